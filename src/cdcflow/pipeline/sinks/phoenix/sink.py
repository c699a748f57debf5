"""Apache Phoenix sink: MySQL-sourced change events as rows of typed Phoenix tables.

Per batch and table (docs/phoenix.md, "How a batch is applied"):

1. the newest event per primary key is converted to the Phoenix column types (exactly: see
   cdcflow.pipeline.sinks.phoenix.schema) and written by Spark's JDBC writer (with cdcflow's UPSERT dialect)
   into a stage table, `CDCFLOW."<SCHEMA>__<TABLE>__STAGE"`;
2. Phoenix itself then compares each staged position with the last applied one, kept per key in
   `CDCFLOW."<SCHEMA>__<TABLE>__POS"` (deletes too, as tombstones), and applies only newer
   changes: `UPSERT INTO target SELECT ... FROM stage`, `DELETE FROM target WHERE pk IN (...)`;
3. only then are the new positions recorded, and the stage emptied.

One writer per target table: the sink holds a lease (an ephemeral znode in the Phoenix cluster's
ZooKeeper, cdcflow.pipeline.writer_lease) on each table it writes, so the stage and the positions
are its own; a second pipeline or sink over the same table is refused with the holder's name.
Two sources (source.name) mapped to one table are refused too: their positions do not compare.

Dates and timestamps keep the proleptic Gregorian calendar MySQL uses. java.sql.Date/Timestamp
count days in the Julian calendar before 1582-10-15 (1096-07-06 would be stored 6 days late,
1582-10-10 as 1582-10-15), so they are staged as epoch milliseconds and Phoenix casts them
(ps.stage_table, ps.stage_value): no calendar on the way.

A crash anywhere replays the batch: changes already applied are applied again with the same
values, and a stale event (older than what a key has, a delete included) is never applied.
The data never passes through Python: statements run in the Spark driver's JVM, on Phoenix's
own JDBC driver.

Options: cdcflow.config.sinks.PhoenixOptions (url, tables, table_map, name_case, create_tables,
schema_history_topic).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from cdcflow.clients.kafka.client import KafkaEndpoint
from cdcflow.clients.phoenix import DRIVER, PhoenixConnection, PhoenixError
from cdcflow.config.sinks import PhoenixOptions, SinkOptions
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.jars import phoenix as phoenix_jars
from cdcflow.patterns import matches_any
from cdcflow.pipeline.envelope import newest_per_key
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.mysql_history import ZERO_DATE_PATTERN, latest_table_record, mysql_columns
from cdcflow.pipeline.sinks.phoenix import schema as ps
from cdcflow.pipeline.writer_lease import WriterLeases

log = logging.getLogger(__name__)
DIALECT_CLASS = "io.cdcflow.spark.PhoenixUpsertDialect"
_ZERO_DATE = ZERO_DATE_PATTERN
# Raised inside the stage write by a row whose values do not fit the target's column types.
UNFIT_MARK = "cdcflow: a value does not fit its Phoenix column type"
_CATALOG = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_SIZE, DECIMAL_DIGITS, NULLABLE, KEY_SEQ, ORDINAL_POSITION "
    "FROM SYSTEM.CATALOG WHERE {schema} AND TABLE_NAME = '{name}' AND COLUMN_NAME IS NOT NULL"
)


class PhoenixSchemaError(TerminalError):
    """The Phoenix table is missing or cannot hold the MySQL table's values."""


def zk_quorum_of(url: str) -> str:
    """The ZooKeeper quorum of a Phoenix JDBC URL (jdbc:phoenix:zk1,zk2:2181:/hbase → zk1:2181,zk2:2181)."""
    m = re.match(r"^jdbc:phoenix(?:\+zk)?:(?P<hosts>[^/;]+?)(?::(?P<port>\d+))?(?::/[^;:]*)?(?:;.*)?$", url)
    if not m:
        raise ConfigError(
            f"cannot find the ZooKeeper quorum in Phoenix URL {url!r} (jdbc:phoenix:<hosts>:<port>:<znode>)"
        )
    port = m.group("port") or "2181"
    return ",".join(h if ":" in h else f"{h}:{port}" for h in m.group("hosts").split(","))


class PhoenixSink(Sink):
    def __init__(self, name: str, options: SinkOptions, context: dict[str, Any]) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, PhoenixOptions)
        url = options.url or context.get("phoenix_url")
        if not url:
            raise ConfigError(f"sink {name}: phoenix needs options.url (jdbc:phoenix:<zk quorum>:<znode>)")
        if not str(url).startswith("jdbc:phoenix:"):
            raise ConfigError(f"sink {name}: url must start with jdbc:phoenix:, got {url!r}")
        self.url = str(url)
        self.zk_quorum = zk_quorum_of(self.url)
        self.patterns = list(options.tables)
        self.table_map = dict(options.table_map)
        self.case = options.name_case
        self.create = options.create_tables
        self.history_topic = options.schema_history_topic or context.get("mysql_schema_history_topic")
        self._conn: PhoenixConnection | None = None
        self._targets: dict[tuple[str, str, str], ps.PhoenixTable] = {}
        self._sources: dict[str, str] = {}  # Phoenix table → the source that writes it
        self._leases: WriterLeases | None = None

    def jars(self) -> list[str]:
        return [str(j) for j in (*phoenix_jars.client_jars(), phoenix_jars.helper_jar())]

    # --- connection ---------------------------------------------------------------------------
    def _connection(self, spark: SparkSession) -> PhoenixConnection:
        if self._conn is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            dialects = jvm.org.apache.spark.sql.jdbc.JdbcDialects
            if dialects.get(self.url).getClass().getName() != DIALECT_CLASS:
                dialects.registerDialect(loader.loadClass(DIALECT_CLASS).newInstance())
            self._conn = PhoenixConnection(jvm, loader, self.url)
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._targets.clear()

    def close(self) -> None:
        self._reset()
        if self._leases is not None:
            self._leases.close()  # the session ends: every lease of this sink is released
            self._leases = None

    def _lease(self, table: ps.PhoenixTable) -> None:
        if self._leases is None:
            owner = {"sink": self.name, "checkpoint": self.context.get("checkpoint_root"), "url": self.url}
            self._leases = WriterLeases(self.zk_quorum, owner)
        self._leases.acquire(f"phoenix:{table.display}")

    # --- tables -------------------------------------------------------------------------------
    def _describe(self, conn: PhoenixConnection, schema: str, name: str) -> ps.PhoenixTable | None:
        for part in (schema, name):
            ps.quote(part)  # rejects names that cannot be quoted
        where = f"TABLE_SCHEM = '{schema}'" if schema else "TABLE_SCHEM IS NULL"
        rows = conn.query(_CATALOG.format(schema=where, name=name.replace("'", "''")))
        return ps.table_from_catalog(schema, name, rows)

    def _history(
        self, spark: SparkSession, source: str, db: str, table: str, schema: str, name: str
    ) -> ps.PhoenixTable | None:
        """The table's shape from the newest `kind: table` record of the MySQL schema history."""
        if not self.history_topic:
            return None
        kafka = KafkaEndpoint.of(self.context["bootstrap_servers"], self.context.get("kafka_properties"))
        latest = latest_table_record(kafka, str(self.history_topic), source, db, table)
        if latest is None:
            return None
        return ps.expected_table(schema, name, mysql_columns(latest["columns"]), self.case)

    def _target(self, spark: SparkSession, source: str, db: str, table: str, columns: set[str]) -> ps.PhoenixTable:
        """The Phoenix table for a MySQL table, checked (and created) once per process, and again
        when events carry columns it does not have."""
        cached = self._targets.get((source, db, table))
        if cached is not None and columns <= {c.name for c in cached.columns}:
            return cached
        conn = self._connection(spark)
        schema, name = ps.target_name(db, table, self.table_map, self.case, source)
        label = f"Phoenix table {schema}.{name} (for MySQL {db}.{table} of source {source})"
        other = self._sources.setdefault(f"{schema}.{name}", source)
        if other != source:
            raise PhoenixSchemaError(
                f"{label} is also the target of source {other}'s {db}.{table}: two sources' positions do not "
                f"compare. Map one of them elsewhere, e.g. table_map: {{'{source}/{db}.{table}': "
                f"'{schema}_{source.upper()}.{name}'}}"
            )
        actual = self._describe(conn, schema, name)
        expected = (
            self._history(spark, source, db, table, schema, name) if (self.create or actual is not None) else None
        )
        if actual is None:
            if not self.create:
                raise PhoenixSchemaError(f"{label} does not exist; create it, or set create_tables: true")
            if expected is None:
                raise PhoenixSchemaError(
                    f"{label} does not exist and the schema history ({self.history_topic}) has no record of "
                    f"{db}.{table} to create it from"
                )
            log.info("creating %s: %s", label, ps.create_table_sql(expected))
            conn.execute(ps.create_table_sql(expected))
            actual = self._describe(conn, schema, name)
            assert actual is not None
        if expected is not None:
            problems = ps.compatibility_problems(expected, actual)
            missing = [c for c in expected.columns if actual.column(c.name) is None]
            if self.create and missing and len(problems) == len(missing):
                for c in missing:  # a column added in MySQL since the table was created
                    log.info("adding column %s %s to %s", c.name, c.type, label)
                    conn.execute(f"ALTER TABLE {actual.qualified} ADD IF NOT EXISTS {ps.quote(c.name)} {c.type}")
                actual = self._describe(conn, schema, name)
                assert actual is not None
                problems = ps.compatibility_problems(expected, actual)
            if problems:
                raise PhoenixSchemaError(f"{label} cannot hold the MySQL rows: {'; '.join(problems)}")
        unknown = sorted(columns - {c.name for c in actual.columns})
        if unknown:
            raise PhoenixSchemaError(
                f"{label} has no column(s) {unknown} that the change events carry"
                + ("" if self.create else "; add them, or set create_tables: true")
            )
        for c in actual.columns:
            ps.spark_type(c.type)  # every column must be writable
        self._lease(actual)  # before touching the stage: only the lease holder may
        stage, positions = ps.stage_table(actual), ps.position_table(actual)
        # The stage is empty between batches: recreate it, so it always has the target's shape.
        conn.execute(f"DROP TABLE IF EXISTS {stage.qualified}")
        conn.execute(ps.create_table_sql(stage))
        conn.execute(ps.create_table_sql(positions))
        self._targets[(source, db, table)] = actual
        return actual

    # --- batches ------------------------------------------------------------------------------
    def _wanted(self, db: str, table: str) -> bool:
        return matches_any(f"{db}.{table}", self.patterns)

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        spark = events.sparkSession
        as_map = MapType(StringType(), StringType())
        values = F.from_json(F.coalesce(F.col("after"), F.col("key")), as_map)  # type: ignore[arg-type]
        if self.case == "upper":
            values = F.transform_keys(values, lambda k, _v: F.upper(k))
        pos = F.array_join(F.transform("source.pos", lambda p: F.lpad(p.cast("string"), 20, "0")), ".")
        rows = events.where(F.col("source.connector") == "mysql").select(
            F.col("source.name").alias("source"), F.col("source.db").alias("db"), F.col("source.table").alias("table"),
            "key", "op", values.alias("values"), pos.alias("pos"),
        )  # fmt: skip
        latest = newest_per_key(rows, ["source", "db", "table", "key"]).persist()
        try:
            if self._leases is not None:
                self._leases.check()
            found = (
                latest.select("source", "db", "table", F.explode(F.map_keys("values")).alias("c")).distinct().collect()
            )
            tables: dict[tuple[str, str, str], set[str]] = {}
            for r in found:
                tables.setdefault((r["source"], r["db"], r["table"]), set()).add(r["c"])
            for (source, db, table), columns in sorted(tables.items()):
                if self._wanted(db, table):
                    self._apply_table(spark, latest, source, db, table, columns, batch_id)
        except PhoenixError:
            self._reset()  # reconnect and re-check the tables on the retry
            raise
        finally:
            latest.unpersist()

    def _apply_table(
        self, spark: SparkSession, latest: DataFrame, source: str, db: str, table: str, columns: set[str],
        batch_id: int,
    ) -> None:  # fmt: skip
        started = time.perf_counter()
        target = self._target(spark, source, db, table, columns)
        conn = self._connection(spark)
        stage, positions = ps.stage_table(target), ps.position_table(target)
        rows = latest.where((F.col("source") == source) & (F.col("db") == db) & (F.col("table") == table))
        converted, problems = [], []
        for c in target.columns:
            raw = F.col("values")[c.name]
            value = _convert(raw, ps.spark_type(c.type))
            stage_columns, unfit = _stage_columns(c, value)
            converted += stage_columns
            zero = raw.rlike(_ZERO_DATE) if c.type in ("DATE", "TIMESTAMP") else F.lit(False)
            misfit = (raw.isNotNull() & value.isNull() & ~zero) | unfit
            problems.append(F.when(misfit, F.concat(F.lit(f"{c.name}="), raw)))
        staged = rows.select(
            *converted,
            F.col("op").cast("string").alias(ps.OP_COLUMN),
            F.col("pos").alias(ps.POS_COLUMN),
            F.concat_ws(", ", *problems).alias("_problem"),
            F.col("key").alias("_key"),
        )
        # The values are checked inside the stage write, its one pass over the batch: a row that does
        # not fit fails the write (its position column raises), before any statement touches the
        # target. Only then is the batch read again, for the examples the error names.
        fenced = F.when(F.col("_problem") != "", F.raise_error(F.lit(UNFIT_MARK))).otherwise(F.col(ps.POS_COLUMN))
        checked = time.perf_counter()
        conn.execute(f"DELETE FROM {stage.qualified}")  # leftovers of a batch that crashed
        try:
            (
                staged.withColumn(ps.POS_COLUMN, fenced).drop("_problem", "_key")
                .write.format("jdbc")
                .option("url", self.url)
                .option("driver", DRIVER)
                .option("dbtable", stage.qualified)
                .option("batchsize", "2000")
                # No Spark transaction: Phoenix would buffer a whole partition in memory until the
                # commit (100 MB at most). Auto-commit instead commits every JDBC batch; a partial
                # stage is harmless, the statements below run only after the whole write succeeded.
                .option("isolationLevel", "NONE")
                .option("phoenix.connection.autoCommit", "true")
                .mode("append")
                .save()
            )  # fmt: skip
        except Exception as exc:
            if UNFIT_MARK not in str(exc):
                raise
            bad = staged.where(F.col("_problem") != "").select("_key", "_problem", ps.POS_COLUMN).limit(5).collect()
            examples = "; ".join(f"key {r['_key']} at {r[ps.POS_COLUMN]}: {r['_problem']}" for r in bad)
            raise PhoenixSchemaError(
                f"{db}.{table}: values that do not fit the Phoenix column types of {target.display} "
                f"(nothing of this batch was applied; the events stay in Kafka): {examples}"
            ) from None
        written = time.perf_counter()
        upserted, deleted, steps = self._apply_stage(conn, target, stage, positions)
        log.info("phoenix %s: batch %d: %d upserted, %d deleted (prepare %.1f s, convert + stage write %.1f s, "
                 "apply %.1f s: %s)", target.display, batch_id, upserted, deleted, checked - started, written - checked,
                 time.perf_counter() - written, steps)  # fmt: skip

    @staticmethod
    def _apply_stage(
        conn: PhoenixConnection, target: ps.PhoenixTable, stage: ps.PhoenixTable, positions: ps.PhoenixTable
    ) -> tuple[int, int, str]:
        """Steps 2-4 of docs/phoenix.md. Returns (upserted, deleted, seconds per step for the log)."""
        q = ps.quote
        key_columns = [c for k in target.primary_key if (c := target.column(k)) is not None]
        keys = ", ".join(q(k) for k in target.primary_key)
        # stage columns hold DATE/TIMESTAMP values in another type: read them with stage_value
        stage_keys = ", ".join(f"s.{q(k)}" for k in target.primary_key) + "".join(
            f", s.{q(ps.millis_column(c.name))}" for c in key_columns if c.type == "TIMESTAMP"
        )
        stage_key_names = keys + "".join(f", {q(ps.millis_column(c.name))}" for c in key_columns
                                         if c.type == "TIMESTAMP")  # fmt: skip
        join = " AND ".join(f"p.{q(c.name)} = {ps.stage_value(c, 's')}" for c in key_columns)
        newer = f"({q(ps.OLD_POS_COLUMN)} IS NULL OR {q(ps.POS_COLUMN)} > {q(ps.OLD_POS_COLUMN)})"
        cols = ", ".join(q(c.name) for c in target.columns)
        values = ", ".join(ps.stage_value(c) for c in target.columns)
        key_values = ", ".join(ps.stage_value(c) for c in key_columns)
        steps: list[tuple[str, str]] = [
            ("positions", f"UPSERT INTO {stage.qualified} ({stage_key_names}, {q(ps.OLD_POS_COLUMN)}) "
                          f"SELECT {stage_keys}, p.{q(ps.POS_COLUMN)} FROM {positions.qualified} p "
                          f"JOIN {stage.qualified} s ON {join}"),
            ("upsert", f"UPSERT INTO {target.qualified} ({cols}) SELECT {values} FROM {stage.qualified} "
                       f"WHERE {q(ps.OP_COLUMN)} <> 'd' AND {newer}"),
            ("delete", f"DELETE FROM {target.qualified} WHERE ({keys}) IN "
                       f"(SELECT {key_values} FROM {stage.qualified} WHERE {q(ps.OP_COLUMN)} = 'd' AND {newer})"),
            # Positions last: if this process dies before here, the replay finds the old positions
            # and applies the same changes again.
            ("record", f"UPSERT INTO {positions.qualified} ({keys}, {q(ps.POS_COLUMN)}, {q(ps.DELETED_COLUMN)}) "
                       f"SELECT {key_values}, {q(ps.POS_COLUMN)}, {q(ps.OP_COLUMN)} = 'd' FROM {stage.qualified} "
                       f"WHERE {newer}"),
            ("clear", f"DELETE FROM {stage.qualified}"),
        ]  # fmt: skip
        counts, times = {}, []
        for name, sql in steps:
            began = time.perf_counter()
            counts[name] = conn.execute(sql)
            times.append(f"{name} {time.perf_counter() - began:.1f}")
        return counts["upsert"], counts["delete"], ", ".join(times)


def _stage_columns(c: ps.PhoenixColumn, value: Column) -> tuple[list[Column], Column]:
    """A converted value as the stage holds it (ps.stage_table), and when it cannot be staged.
    DATE: epoch milliseconds. TIMESTAMP: epoch milliseconds with three decimals, which Phoenix
    casts without a calendar; except before 1970 with sub-millisecond digits, which Phoenix's
    DECIMAL cast refuses (it truncates toward zero and sets negative nanoseconds): those go as a
    JDBC timestamp, exact from 1582-10-15 on and, before, handed over as the Julian-calendar
    fields of the same day (_for_julian_jdbc)."""
    if c.type == "DATE":
        return [(F.unix_date(value).cast("long") * 86_400_000).alias(c.name)], F.lit(False)
    if c.type != "TIMESTAMP":
        return [value.alias(c.name)], F.lit(False)
    micros = F.unix_micros(value)
    decimal_ok = (micros >= 0) | (F.pmod(micros, F.lit(1000)) == 0)
    # decimals, not doubles: 6e16 microseconds exceed 2^53
    as_decimal = (micros.cast("decimal(22,0)") / 1000).cast("decimal(19,3)")
    julian, unfit = _for_julian_jdbc(value)
    columns = [
        F.when(~decimal_ok, julian).alias(c.name),
        F.when(decimal_ok, as_decimal).alias(ps.millis_column(c.name)),
    ]
    return columns, value.isNotNull() & ~decimal_ok & unfit


def _convert(raw: Column, spark_type: str) -> Column:
    """An event value (JSON text) as the Spark type of its Phoenix column; null when it does not fit
    (the caller reports those), and for MySQL's zero dates, which no Phoenix type can hold."""
    if spark_type == "string":
        return raw
    if spark_type == "binary":
        return F.try_to_binary(raw, F.lit("base64"))
    if spark_type in ("date", "timestamp"):
        return F.when(raw.rlike(_ZERO_DATE), F.lit(None)).otherwise(raw.try_cast(spark_type))
    return raw.try_cast(spark_type)


GREGORIAN_START_DAY = -141427  # 1582-10-15, days since 1970-01-01; the JDBC calendars agree from here on


def julian_fields(epoch_day: int) -> tuple[int, int, int]:
    """(year, month, day) of an epoch day in the Julian calendar (integer arithmetic, from the
    Julian day number; valid from 4713 BC). The pure twin of `_for_julian_jdbc`, for tests."""
    c = epoch_day + 2440588 + 32082
    d = (4 * c + 3) // 1461
    e = c - (1461 * d) // 4
    m = (5 * e + 2) // 153
    return d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def _for_julian_jdbc(value: Column) -> tuple[Column, Column]:
    """A timestamp before 1582-10-15 as the value whose Julian-calendar fields name the same day,
    and whether that is impossible.

    Spark's JDBC writer turns a timestamp into java.sql.Timestamp by its fields, and Java counts
    those in the Julian calendar before 1582-10-15: 1096-07-06 would be stored 6 days late.
    Handing it the Julian fields of the same day stores the proleptic Gregorian instant MySQL
    means. The Julian leap days of century years (1500-02-29 Julian = 1500-03-10) have no such
    fields in Spark's calendar: those are reported as values that do not fit, never shifted."""
    n = F.unix_date(F.to_date(value)).cast("long")
    c = n + (2440588 + 32082)  # Julian day number → Julian calendar fields (all integer arithmetic)
    d = F.floor((c * 4 + 3) / 1461)
    e = c - F.floor(d * 1461 / 4)
    m = F.floor((e * 5 + 2) / 153)
    day = e - F.floor((m * 153 + 2) / 5) + 1
    month = m + 3 - F.floor(m / 10) * 12
    year = d - 4800 + F.floor(m / 10)
    # the same fields read in the proleptic Gregorian calendar (days from civil), as an epoch day
    y = year - F.when(month <= 2, 1).otherwise(0)
    era = F.floor(y / 400)
    yoe = y - era * 400
    doy = F.floor((F.when(month > 2, month - 3).otherwise(month + 9) * 153 + 2) / 5) + day - 1
    epoch_day = era * 146097 + yoe * 365 + F.floor(yoe / 4) - F.floor(yoe / 100) + doy - 719468
    shifted = F.timestamp_micros(F.unix_micros(value) + (epoch_day - n).cast("long") * 86_400_000_000)
    before = n < GREGORIAN_START_DAY
    julian_only = (
        before & (month == 2) & (day == 29) & (F.pmod(year, F.lit(100)) == 0) & (F.pmod(year, F.lit(400)) != 0)
    )
    return F.when(before, shifted).otherwise(value), julian_only
