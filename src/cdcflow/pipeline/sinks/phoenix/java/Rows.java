// Reads a JDBC ResultSet in bulk for cdcflow's Python side (compiled with GuardedUpsert).
//
// Python reaches the JVM through Py4J, where every call is a socket round trip; reading a
// result cell by cell would cost one round trip per value. fetch() returns up to maxRows rows
// as JSON lines instead, one round trip per chunk. Values keep their exact form: DECIMAL as
// its plain string, FLOAT/DOUBLE as Java's shortest round-trip string, TIMESTAMP with all its
// fractional digits (in the JVM's time zone, which cdcflow sets to UTC), bytes as base64.
package io.cdcflow.spark;

import java.math.BigDecimal;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.util.Base64;

public final class Rows {
  private Rows() {}

  /** Up to maxRows rows, one JSON array per line; an empty string once the result is exhausted. */
  public static String fetch(ResultSet rs, int maxRows) throws SQLException {
    ResultSetMetaData md = rs.getMetaData();
    int n = md.getColumnCount();
    StringBuilder out = new StringBuilder();
    for (int r = 0; r < maxRows && rs.next(); r++) {
      out.append('[');
      for (int i = 1; i <= n; i++) {
        if (i > 1) out.append(',');
        Object v = rs.getObject(i);
        if (v == null) {
          out.append("null");
        } else if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
          out.append(v);
        } else if (v instanceof Boolean) {
          out.append(v);
        } else if (v instanceof BigDecimal) {
          string(out, ((BigDecimal) v).toPlainString());
        } else if (v instanceof byte[]) {
          string(out, Base64.getEncoder().encodeToString((byte[]) v));
        } else if (v instanceof Timestamp) {
          string(out, v.toString());
        } else {
          string(out, v.toString()); // Float, Double, Date, Time, String
        }
      }
      out.append("]\n");
    }
    return out.toString();
  }

  private static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': out.append("\\\""); break;
        case '\\': out.append("\\\\"); break;
        case '\n': out.append("\\n"); break;
        case '\r': out.append("\\r"); break;
        case '\t': out.append("\\t"); break;
        default:
          if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
          else out.append(c);
      }
    }
    out.append('"');
  }
}
