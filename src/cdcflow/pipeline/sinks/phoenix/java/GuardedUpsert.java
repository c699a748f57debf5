// Writes a batch's newest change per key into a Phoenix table from the Spark executors, one
// JDBC connection per partition, guarded on the server (decision 0016).
//
// The statement is an UPSERT ... ON DUPLICATE KEY UPDATE built by cdcflow's Python side
// (cdcflow.pipeline.sinks.phoenix.guarded): every column is set only when the incoming position is
// greater than the one stored in the row, so an older or replayed change never overwrites a newer
// one, and a delete is a tombstone row that keeps its position. Phoenix locks and reads the row
// on the region server; nothing is read back to the client.
//
// Rows arrive as the DataFrame's columns; `params[i]` names the column bound to the i-th '?'. Several
// tables are written in one Spark job by writeTables: each row names its table (an int column), and
// table t's statement binds params[paramStarts[t] .. paramStarts[t + 1]).
// Dates and timestamps arrive as epoch days / epoch microseconds and become java.sql.Date /
// Timestamp from the epoch count, never from calendar fields: Java's calendar is Julian before
// 1582-10-15, MySQL's proleptic Gregorian.
package io.cdcflow.spark;

import java.sql.Connection;
import java.sql.Driver;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.Iterator;
import java.util.Properties;
import org.apache.spark.api.java.function.ForeachPartitionFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.util.LongAccumulator;

public final class GuardedUpsert {
  public static final int PLAIN = 0;
  public static final int EPOCH_DAYS = 1;
  public static final int EPOCH_MICROS = 2;

  private GuardedUpsert() {}

  /** Writes every row of `rows`; throws (failing the Spark job) if any partition fails. */
  public static void write(
      Dataset<Row> rows, String url, String sql, int[] params, int[] sqlTypes, int[] kinds, int commitRows,
      LongAccumulator written) {
    writeTables(rows, url, new String[] {sql}, params, new int[] {0, params.length}, -1, sqlTypes, kinds,
        commitRows, written);
  }

  /**
   * Writes every row of `rows` into the table its column `tableColumn` names (an index into `sqls`; -1:
   * every row is table 0), in one Spark job; throws (failing the job) if any partition fails.
   */
  public static void writeTables(
      Dataset<Row> rows, String url, String[] sqls, int[] params, int[] paramStarts, int tableColumn,
      int[] sqlTypes, int[] kinds, int commitRows, LongAccumulator written) {
    rows.foreachPartition(
        new PartitionWriter(url, sqls, params, paramStarts, tableColumn, sqlTypes, kinds, commitRows, written));
  }

  static final class PartitionWriter implements ForeachPartitionFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final String url;
    private final String[] sqls;
    private final int[] params;
    private final int[] paramStarts;
    private final int tableColumn;
    private final int[] sqlTypes;
    private final int[] kinds;
    private final int commitRows;
    private final LongAccumulator written;

    PartitionWriter(String url, String[] sqls, int[] params, int[] paramStarts, int tableColumn, int[] sqlTypes,
        int[] kinds, int commitRows, LongAccumulator written) {
      this.url = url;
      this.sqls = sqls;
      this.params = params;
      this.paramStarts = paramStarts;
      this.tableColumn = tableColumn;
      this.sqlTypes = sqlTypes;
      this.kinds = kinds;
      this.commitRows = commitRows;
      this.written = written;
    }

    @Override
    public void call(Iterator<Row> rows) throws Exception {
      if (!rows.hasNext()) {
        return;
      }
      try (Connection conn = driver().connect(url, new Properties())) {
        // Mutations are buffered in the connection and sent every commitRows rows: a crash
        // leaves some committed, which the replay writes again with the same result.
        conn.setAutoCommit(false);
        PreparedStatement[] statements = new PreparedStatement[sqls.length];
        try {
          long pending = 0;
          while (rows.hasNext()) {
            Row row = rows.next();
            int table = tableColumn < 0 ? 0 : row.getInt(tableColumn);
            PreparedStatement ps = statements[table];
            if (ps == null) {
              ps = statements[table] = conn.prepareStatement(sqls[table]);
            }
            for (int i = paramStarts[table]; i < paramStarts[table + 1]; i++) {
              bind(ps, i - paramStarts[table] + 1, row, params[i]);
            }
            ps.executeUpdate();
            if (++pending == commitRows) {
              conn.commit();
              written.add(pending);
              pending = 0;
            }
          }
          conn.commit();
          written.add(pending);
        } finally {
          for (PreparedStatement ps : statements) {
            if (ps != null) {
              ps.close();
            }
          }
        }
      }
    }

    /**
     * Phoenix's driver from the loader that holds its jars (Spark's), not DriverManager's. A new driver object
     * per task, which connects to the cluster anew (about 0.4 s on an idle machine): Phoenix's shared instance
     * keeps table metadata across tasks, and after a table was dropped and created again with another key
     * (written from the driver's own connection) its statements failed on columns it did not know.
     */
    private static Driver driver() throws ReflectiveOperationException {
      ClassLoader loader = Thread.currentThread().getContextClassLoader();
      return (Driver) Class.forName("org.apache.phoenix.jdbc.PhoenixDriver", true, loader)
          .getDeclaredConstructor().newInstance();
    }

    private void bind(PreparedStatement ps, int index, Row row, int column) throws SQLException {
      if (row.isNullAt(column)) {
        ps.setNull(index, sqlTypes[column]);
        return;
      }
      switch (kinds[column]) {
        case EPOCH_DAYS:
          ps.setDate(index, new java.sql.Date(((Number) row.get(column)).longValue() * 86_400_000L));
          break;
        case EPOCH_MICROS:
          long micros = ((Number) row.get(column)).longValue();
          Timestamp ts = new Timestamp(Math.floorDiv(micros, 1000L));
          ts.setNanos((int) Math.floorMod(micros, 1_000_000L) * 1000);
          ps.setTimestamp(index, ts);
          break;
        default:
          ps.setObject(index, row.get(column));
      }
    }
  }
}
