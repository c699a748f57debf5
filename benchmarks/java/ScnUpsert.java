// Benchmark only (benchmarks/phoenix_guards.py, the second way of guarding): every row written through
// a Phoenix connection whose CurrentSCN is the row's own timestamp, so HBase's newest-timestamp-wins
// rule is the guard and nothing is read. Each row has its own SCN, hence its own connection.
package io.cdcflow.bench;

import java.sql.Connection;
import java.sql.Driver;
import java.sql.PreparedStatement;
import java.util.Iterator;
import java.util.Properties;
import org.apache.spark.api.java.function.ForeachPartitionFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

public final class ScnUpsert {
  private ScnUpsert() {}

  /** Columns 0..n-2 are bound in order; column n-1 (a long) is the row's SCN. */
  public static void write(Dataset<Row> rows, String url, String sql) {
    rows.foreachPartition(new Writer(url, sql));
  }

  static final class Writer implements ForeachPartitionFunction<Row> {
    private static final long serialVersionUID = 1L;
    private final String url;
    private final String sql;

    Writer(String url, String sql) {
      this.url = url;
      this.sql = sql;
    }

    @Override
    public void call(Iterator<Row> rows) throws Exception {
      ClassLoader loader = Thread.currentThread().getContextClassLoader();
      Driver driver = (Driver) Class.forName("org.apache.phoenix.jdbc.PhoenixDriver", true, loader)
          .getDeclaredConstructor().newInstance();
      while (rows.hasNext()) {
        Row row = rows.next();
        int n = row.size();
        Properties props = new Properties();
        props.setProperty("CurrentSCN", Long.toString(row.getLong(n - 1)));
        try (Connection conn = driver.connect(url, props)) {
          conn.setAutoCommit(false);
          try (PreparedStatement ps = conn.prepareStatement(sql)) {
            for (int i = 0; i < n - 1; i++) {
              ps.setObject(i + 1, row.get(i));
            }
            ps.executeUpdate();
          }
          conn.commit();
        }
      }
    }
  }
}
