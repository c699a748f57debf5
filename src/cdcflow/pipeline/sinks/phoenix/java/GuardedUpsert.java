// Writes a batch's newest change per key into a Phoenix table from the Spark executors, one
// JDBC connection per partition, guarded on the server (decision 0016).
//
// Each executor keeps one Phoenix driver per writer `scope` (a sink) for as long as the writer's
// `epoch` stays the same; the writer changes its epoch whenever it changed a table's schema (see
// driver()).
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
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
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
    writeTables(rows, url, "", "", new String[] {sql}, params, new int[] {0, params.length}, -1, sqlTypes, kinds,
        commitRows, written);
  }

  /**
   * Writes every row of `rows` into the table its column `tableColumn` names (an index into `sqls`; -1:
   * every row is table 0), in one Spark job; throws (failing the job) if any partition fails. `scope` names
   * the writer whose driver the executors keep while `epoch` stays the same ("": a new driver per task).
   */
  public static void writeTables(
      Dataset<Row> rows, String url, String scope, String epoch, String[] sqls, int[] params, int[] paramStarts,
      int tableColumn, int[] sqlTypes, int[] kinds, int commitRows, LongAccumulator written) {
    rows.foreachPartition(new PartitionWriter(url, scope, epoch, sqls, params, paramStarts, tableColumn, sqlTypes,
        kinds, commitRows, written));
  }

  /** The drivers this JVM keeps: scope -> {epoch, driver}. */
  private static final Map<String, Object[]> DRIVERS = new HashMap<>();

  /** Drivers this JVM made for writes (each one connected to the cluster anew). */
  private static final AtomicLong MADE = new AtomicLong();

  /** Drivers this JVM closed (a task's own at its end; a kept one at a new epoch or its release). */
  private static final AtomicLong CLOSED = new AtomicLong();

  public static long driversMade() {
    return MADE.get();
  }

  public static long driversClosed() {
    return CLOSED.get();
  }

  /** Whether this JVM keeps a driver for `scope`. */
  public static boolean keeps(String scope) {
    synchronized (DRIVERS) {
      return DRIVERS.containsKey(scope);
    }
  }

  /**
   * Phoenix's driver from the loader that holds its jars (Spark's), not DriverManager's.
   *
   * <p>A driver connects to the cluster when it makes its first connection (about 0.4 s on an idle machine,
   * seconds under load) and keeps table metadata from then on. Phoenix's shared instance is not used: after a
   * table was dropped and created again with another key (from the writer's own connection on the Spark
   * driver) its statements failed on columns it did not know. So a driver is kept per writer and epoch, and
   * the writer moves to a new epoch after every schema change it makes: the next batch's tasks get a new
   * driver, and the old one is closed (a writer runs one batch at a time, so none of its tasks uses it).
   */
  static Driver driver(String scope, String epoch) throws Exception {
    if (scope.isEmpty()) {
      return newDriver();
    }
    Object[] stale = null;
    Driver kept;
    synchronized (DRIVERS) {
      Object[] entry = DRIVERS.get(scope);
      if (entry != null && epoch.equals(entry[0])) {
        return (Driver) entry[1];
      }
      stale = entry;
      kept = newDriver();
      DRIVERS.put(scope, new Object[] {epoch, kept});
    }
    if (stale != null) {
      close((Driver) stale[1]);
    }
    return kept;
  }

  /** Closes the driver kept for `scope`, if any (the writer is done: a sink closed). */
  public static void release(String scope) {
    Object[] entry;
    synchronized (DRIVERS) {
      entry = DRIVERS.remove(scope);
    }
    if (entry != null) {
      close((Driver) entry[1]);
    }
  }

  private static Driver newDriver() throws ReflectiveOperationException {
    MADE.incrementAndGet();
    ClassLoader loader = Thread.currentThread().getContextClassLoader();
    return (Driver) Class.forName("org.apache.phoenix.jdbc.PhoenixDriver", true, loader)
        .getDeclaredConstructor().newInstance();
  }

  private static void close(Driver driver) {
    CLOSED.incrementAndGet();
    try {
      driver.getClass().getMethod("close").invoke(driver); // PhoenixDriver.close: its cluster connections
    } catch (ReflectiveOperationException | RuntimeException e) {
      // nothing to do: a driver that cannot close holds only what the JVM frees at its end
    }
  }

  static final class PartitionWriter implements ForeachPartitionFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final String url;
    private final String scope;
    private final String epoch;
    private final String[] sqls;
    private final int[] params;
    private final int[] paramStarts;
    private final int tableColumn;
    private final int[] sqlTypes;
    private final int[] kinds;
    private final int commitRows;
    private final LongAccumulator written;

    PartitionWriter(String url, String scope, String epoch, String[] sqls, int[] params, int[] paramStarts,
        int tableColumn, int[] sqlTypes, int[] kinds, int commitRows, LongAccumulator written) {
      this.url = url;
      this.scope = scope;
      this.epoch = epoch;
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
      Driver driver = driver(scope, epoch);
      try {
        write(driver, rows);
      } finally {
        if (scope.isEmpty()) {
          close(driver); // made for this task alone: its cluster connections end with it
        }
      }
    }

    private void write(Driver driver, Iterator<Row> rows) throws Exception {
      try (Connection conn = driver.connect(url, new Properties())) {
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
