// Spark JDBC dialect for Apache Phoenix, compiled by cdcflow at first use (cdcflow/jars/phoenix.py).
//
// Spark's JDBC writer emits "INSERT INTO t (...) VALUES (...)", which Phoenix rejects: it only
// has UPSERT. Spark has no Phoenix dialect of its own, so this one alone handles jdbc:phoenix:
// URLs. Identifiers are always double-quoted, so names reach Phoenix with their exact case
// (unquoted, Phoenix would upper-case them). NULLs are bound with the column's real SQL type.
package io.cdcflow.spark;

import java.sql.Types;
import java.util.Arrays;
import java.util.stream.Collectors;
import org.apache.spark.sql.jdbc.JdbcDialect;
import org.apache.spark.sql.jdbc.JdbcType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import scala.Option;

public class PhoenixUpsertDialect extends JdbcDialect {
  @Override
  public boolean canHandle(String url) {
    return url.startsWith("jdbc:phoenix:");
  }

  @Override
  public String quoteIdentifier(String name) {
    return "\"" + name.replace("\"", "\"\"") + "\"";
  }

  @Override
  public String insertIntoTable(String table, StructField[] fields) {
    String columns = Arrays.stream(fields).map(f -> quoteIdentifier(f.name())).collect(Collectors.joining(","));
    String marks = Arrays.stream(fields).map(f -> "?").collect(Collectors.joining(","));
    return "UPSERT INTO " + table + " (" + columns + ") VALUES (" + marks + ")";
  }

  @Override
  public Option<JdbcType> getJDBCType(DataType dt) {
    if (dt.equals(DataTypes.StringType)) return Option.apply(new JdbcType("VARCHAR", Types.VARCHAR));
    if (dt.equals(DataTypes.BinaryType)) return Option.apply(new JdbcType("VARBINARY", Types.VARBINARY));
    if (dt.equals(DataTypes.ByteType)) return Option.apply(new JdbcType("TINYINT", Types.TINYINT));
    if (dt.equals(DataTypes.ShortType)) return Option.apply(new JdbcType("SMALLINT", Types.SMALLINT));
    if (dt.equals(DataTypes.IntegerType)) return Option.apply(new JdbcType("INTEGER", Types.INTEGER));
    if (dt.equals(DataTypes.LongType)) return Option.apply(new JdbcType("BIGINT", Types.BIGINT));
    if (dt.equals(DataTypes.FloatType)) return Option.apply(new JdbcType("FLOAT", Types.FLOAT));
    if (dt.equals(DataTypes.DoubleType)) return Option.apply(new JdbcType("DOUBLE", Types.DOUBLE));
    if (dt.equals(DataTypes.BooleanType)) return Option.apply(new JdbcType("BOOLEAN", Types.BOOLEAN));
    if (dt.equals(DataTypes.DateType)) return Option.apply(new JdbcType("DATE", Types.DATE));
    if (dt.equals(DataTypes.TimestampType)) return Option.apply(new JdbcType("TIMESTAMP", Types.TIMESTAMP));
    if (dt instanceof DecimalType) return Option.apply(new JdbcType("DECIMAL", Types.DECIMAL));
    return Option.empty();
  }
}
