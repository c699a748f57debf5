"""Apache Phoenix sink: MySQL-sourced change events as rows of typed Phoenix tables.

Per batch (docs/phoenix.md, "How a batch is applied"; decision 0016), three Spark jobs whatever the
number of tables:

1. the newest event per primary key (kept in memory for the next steps), and the tables, columns and
   truncates of the batch;
2. every value converted to its Phoenix column type (exactly: see cdcflow.pipeline.sinks.phoenix.schema)
   and checked to fit, for every table at once, before anything is written;
3. each Spark partition (the batch is partitioned by key) writes its rows straight into their tables
   from its executor, one guarded `UPSERT ... ON DUPLICATE KEY UPDATE` per row, committed every
   `commit_rows` rows (GuardedUpsert.java): Phoenix compares the incoming position with the one the
   row holds, under the row lock on the region server, and keeps the newer change. Deletes are
   tombstone rows that keep their position, so a replayed older insert cannot bring a row back.

The table cdcflow writes is `<TABLE>__CDCFLOW` (the columns plus `_CDCFLOW_POS` and
`_CDCFLOW_DELETED`); users read the view `<TABLE>`, which leaves tombstones out (guarded.py).

One writer per target table: the sink holds a lease (an ephemeral znode in the Phoenix cluster's
ZooKeeper, cdcflow.pipeline.writer_lease) on each table it writes; a second pipeline or sink over
the same table is refused with the holder's name. Two sources (source.name) mapped to one table
are refused too: their positions do not compare.

Dates and timestamps keep the proleptic Gregorian calendar MySQL uses: they travel as epoch days /
microseconds and become JDBC values from the epoch count, never from calendar fields (Java's
calendar is Julian before 1582-10-15).

A crash anywhere replays the batch: rows already written are written again with the same values,
and a stale event (older than what a key has, a delete included) is never applied. The data never
passes through Python.

Options: cdcflow.config.sinks.PhoenixOptions (url, tables, table_map, name_case, create_tables,
schema_history_topic, commit_rows).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from cdcflow.clients.kafka.client import KafkaEndpoint
from cdcflow.clients.phoenix import (
    PhoenixConnection,
    PhoenixError,
    PhoenixUnavailable,
    release_executor_driver,
    write_tables_from_executors,
)
from cdcflow.config.sinks import PhoenixOptions, SinkOptions
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.jars import phoenix as phoenix_jars
from cdcflow.patterns import matches_any
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import newest_per_key
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.mysql_history import ZERO_DATE_PATTERN, latest_table_record, mysql_columns
from cdcflow.pipeline.sinks.phoenix import guarded
from cdcflow.pipeline.sinks.phoenix import schema as ps
from cdcflow.pipeline.sinks.table_events import under_policy
from cdcflow.pipeline.writer_lease import WriterLeases

log = logging.getLogger(__name__)
_ZERO_DATE = ZERO_DATE_PATTERN
# `_prepared` column sets a sink keeps at most (a set per table and its index in a batch)
_KEPT_COLUMN_SETS = 256
_CATALOG = (
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_SIZE, DECIMAL_DIGITS, NULLABLE, KEY_SEQ, ORDINAL_POSITION "
    "FROM SYSTEM.CATALOG WHERE {schema} AND TABLE_NAME = '{name}' AND COLUMN_NAME IS NOT NULL"
)
_TABLE_TYPE = (
    "SELECT TABLE_TYPE FROM SYSTEM.CATALOG WHERE {schema} AND TABLE_NAME = '{name}' AND COLUMN_NAME IS NULL "
    "AND COLUMN_FAMILY IS NULL"
)


class PhoenixSchemaError(TerminalError):
    """The Phoenix table is missing or cannot hold the MySQL table's values."""


class UnfitValuesError(PhoenixSchemaError):
    """Values of a batch that the Phoenix table's column types cannot hold exactly (nothing was written)."""


def _schema_clause(schema: str) -> str:
    ps.quote(schema or "x")  # rejects names that cannot be quoted
    return f"TABLE_SCHEM = '{schema.replace(chr(39), chr(39) * 2)}'" if schema else "TABLE_SCHEM IS NULL"


def _name_literal(name: str) -> str:
    ps.quote(name)
    return name.replace("'", "''")


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
    # The batch's events are read by its first job, which keeps their newest change per key in memory for the
    # check and the write: the runner's counts ride along that job.
    reads_events_once = True

    def __init__(self, name: str, options: SinkOptions, context: Endpoints) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, PhoenixOptions)
        url = options.url or context.phoenix_url
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
        self.history_topic = options.schema_history_topic or context.mysql_schema_history_topic
        self.commit_rows = options.commit_rows
        self.on_drop = options.on_drop
        self._conn: PhoenixConnection | None = None
        self._targets: dict[tuple[str, str, str], ps.PhoenixTable] = {}  # → the guarded table written
        # (a table's index in the batch, its guarded table) → its `_prepared` columns
        self._columns: dict[tuple[int, ps.PhoenixTable], list[Column]] = {}
        self._sources: dict[str, str] = {}  # Phoenix table → the source that writes it
        self._leases: WriterLeases | None = None
        # The executors keep a Phoenix driver per sink while its epoch stays (GuardedUpsert.driver): the epoch
        # moves whenever a table was checked, created or altered, or a batch failed, so the next write's
        # tasks start with fresh table metadata.
        self._driver_scope = f"{self.url}|{name}"
        self._epoch_token, self._epoch = uuid.uuid4().hex[:8], 0
        self._jvm: Any = None  # the Spark driver's JVM, once a connection was made there

    def jars(self) -> list[str]:
        return [str(j) for j in (*phoenix_jars.client_jars(), phoenix_jars.helper_jar())]

    # --- connection ---------------------------------------------------------------------------
    def _connection(self, spark: SparkSession) -> PhoenixConnection:
        if self._conn is None:
            jvm = spark.sparkContext._jvm
            assert jvm is not None
            loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
            self._conn = PhoenixConnection(jvm, loader, self.url)
            self._jvm = jvm
        return self._conn

    def _reset(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self._targets.clear()
        self._epoch += 1

    def close(self) -> None:
        self._reset()
        if self._jvm is not None:  # the Spark driver JVM's kept driver (the executors' end with their JVMs)
            release_executor_driver(self._jvm, self._driver_scope)
            self._jvm = None
        if self._leases is not None:
            self._leases.close()  # the session ends: every lease of this sink is released
            self._leases = None

    def _lease(self, table: ps.PhoenixTable) -> None:
        if self._leases is None:
            owner = {"sink": self.name, "checkpoint": self.context.checkpoint_root, "url": self.url}
            self._leases = WriterLeases(self.zk_quorum, owner)
        self._leases.acquire(f"phoenix:{table.display}")

    # --- tables -------------------------------------------------------------------------------
    def _describe(self, conn: PhoenixConnection, schema: str, name: str) -> ps.PhoenixTable | None:
        rows = conn.query(_CATALOG.format(schema=_schema_clause(schema), name=_name_literal(name)))
        return ps.table_from_catalog(schema, name, rows)

    def _table_type(self, conn: PhoenixConnection, schema: str, name: str) -> str | None:
        """SYSTEM.CATALOG's TABLE_TYPE: 'u' a table, 'v' a view; None when nothing has the name."""
        rows = conn.query(_TABLE_TYPE.format(schema=_schema_clause(schema), name=_name_literal(name)))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def _history(
        self, spark: SparkSession, source: str, db: str, table: str, schema: str, name: str
    ) -> ps.PhoenixTable | None:
        """The table's shape from the newest `kind: table` record of the MySQL schema history."""
        if not self.history_topic:
            return None
        kafka = KafkaEndpoint.of(self.context.bootstrap_servers, self.context.kafka_properties)
        latest = latest_table_record(kafka, str(self.history_topic), source, db, table)
        if latest is None:
            return None
        return ps.expected_table(schema, name, mysql_columns(latest["columns"]), self.case)

    def _target(
        self, spark: SparkSession, source: str, db: str, table: str, columns: set[str], rekeyed: bool = False
    ) -> ps.PhoenixTable:
        """The guarded table written for a MySQL table, checked (and created) once per process, and
        again when events carry columns it does not have or the batch empties the table (`rekeyed`: the
        source's primary key may have changed)."""
        cached = self._targets.get((source, db, table))
        if cached is not None and not rekeyed and columns <= {c.name for c in guarded.data_columns(cached)}:
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
        written = self._guarded_table(conn, spark, label, source, db, table, schema, name, rekeyed)
        self._epoch += 1  # the table may have been created or altered: the executors take new drivers
        unknown = sorted(columns - {c.name for c in guarded.data_columns(written)})
        if unknown:
            raise PhoenixSchemaError(
                f"{label} has no column(s) {unknown} that the change events carry"
                + ("" if self.create else "; add them, or set create_tables: true")
            )
        for c in written.columns:
            ps.spark_type(c.type)  # every column must be writable
        self._lease(ps.PhoenixTable(schema, name, (), ()))
        self._targets[(source, db, table)] = written
        return written

    def _written(self, spark: SparkSession, source: str, db: str, table: str) -> bool:
        """Whether the Phoenix table for a MySQL table exists (cdcflow's own or one the user made)."""
        if (source, db, table) in self._targets:
            return True
        schema, name = ps.target_name(db, table, self.table_map, self.case, source)
        conn = self._connection(spark)
        return self._table_type(conn, schema, guarded.physical_name(name)) is not None or (
            self._table_type(conn, schema, name) is not None
        )

    def _guarded_table(
        self, conn: PhoenixConnection, spark: SparkSession, label: str, source: str, db: str, table: str,
        schema: str, name: str, rekeyed: bool = False,
    ) -> ps.PhoenixTable:  # fmt: skip
        """Find (or create) the table to write: `<name>__CDCFLOW` behind the view `<name>`, or a
        table `<name>` the user made with the guard columns; refuse anything else, saying why."""
        kind = self._table_type(conn, schema, name)
        own = self._describe(conn, schema, guarded.physical_name(name))
        named = self._describe(conn, schema, name) if own is None and kind == "u" else None
        actual = own or named
        expected = (
            self._history(spark, source, db, table, schema, name) if (self.create or actual is not None) else None
        )
        if actual is None:
            if kind is not None:
                raise PhoenixSchemaError(
                    f"{label} is a view cdcflow did not make (no {guarded.physical_name(name)} beside it); drop it, "
                    "or map the MySQL table elsewhere (table_map)"
                )
            if not self.create:
                raise PhoenixSchemaError(f"{label} does not exist; create it, or set create_tables: true")
            if expected is None:
                raise PhoenixSchemaError(
                    f"{label} does not exist and the schema history ({self.history_topic}) has no record of "
                    f"{db}.{table} to create it from"
                )
            own = guarded.physical_table(expected)
            log.info("creating %s: %s", label, ps.create_table_sql(own))
            conn.execute(ps.create_table_sql(own))
            actual = self._describe(conn, schema, own.name)
            assert actual is not None
        if (
            expected is not None
            and own is not None
            and rekeyed
            and self.create
            and kind in (None, "v")
            and set(own.primary_key) != set(expected.primary_key)
        ):
            # The source's primary key changed and the batch empties the table (a rekey truncate): Phoenix cannot
            # change a table's key, so cdcflow's own table is made again with the new one, empty.
            log.warning("%s: the MySQL primary key is now (%s), the table's (%s): dropping and creating it again "
                        "(the truncate in this batch empties it anyway)", label, ", ".join(expected.primary_key),
                        ", ".join(own.primary_key))  # fmt: skip
            if kind == "v":
                conn.execute(f"DROP VIEW {ps.PhoenixTable(schema, name, (), ()).qualified}")
            conn.execute(f"DROP TABLE {own.qualified}")
            own = guarded.physical_table(expected)
            conn.execute(ps.create_table_sql(own))
            actual = self._describe(conn, schema, own.name)
            assert actual is not None
            kind = None
        if expected is not None:
            actual = self._widened(conn, label, expected, actual)
        if own is not None:
            if kind is None:
                view = ps.PhoenixTable(schema, name, (), ())
                log.info("creating the view %s over %s", view.display, actual.display)
                conn.execute(guarded.create_view_sql(view, actual))
            elif kind != "v":
                raise PhoenixSchemaError(
                    f"{label}: {schema}.{name} is a table, but cdcflow's rows are in {actual.display}, read through "
                    f"a view named {name}; drop or rename the table {schema}.{name}"
                )
            return actual
        if not guarded.is_guarded(actual):
            if self._describe(conn, ps.STATE_SCHEMA, ps.legacy_position_table_name(schema, name)) is not None:
                raise PhoenixSchemaError(
                    f"{label} was written by an earlier cdcflow (positions in {ps.STATE_SCHEMA}."
                    f"{ps.legacy_position_table_name(schema, name)}); this one writes {guarded.physical_name(name)} "
                    f"behind a view {name}. Stop the pipeline, drop {schema}.{name} and that positions table, and "
                    "replay the topic: cdcflow pipeline offsets reset <sink> --to earliest (docs/phoenix.md, "
                    '"Upgrading")'
                )
            raise PhoenixSchemaError(
                f"{label} is a table without cdcflow's guard columns. Either drop it and set create_tables: true "
                f"(cdcflow writes {guarded.physical_name(name)} and serves {name} as a view), or add them: ALTER TABLE "
                f'{actual.qualified} ADD "{guarded.GUARD_POS}" VARCHAR, "{guarded.GUARD_DELETED}" BOOLEAN '
                "(then deleted rows stay in it as tombstones: read it WHERE "
                f'"{guarded.GUARD_DELETED}" = FALSE)'
            )
        adopted = conn.execute(guarded.adopt_sql(actual))
        if adopted:
            log.info("%s: %d rows that were there before cdcflow given the lowest position (older than any change)",
                     label, adopted)  # fmt: skip
        return actual

    def _widened(
        self, conn: PhoenixConnection, label: str, expected: ps.PhoenixTable, actual: ps.PhoenixTable
    ) -> ps.PhoenixTable:
        """`actual` checked against the schema history's shape; with create_tables, columns added in
        MySQL since the table was made are added to it (the view shows them too)."""
        data = ps.PhoenixTable(actual.schema, actual.name, guarded.data_columns(actual), actual.primary_key)
        problems = ps.compatibility_problems(expected, data)
        missing = [c for c in expected.columns if actual.column(c.name) is None]
        if self.create and missing and len(problems) == len(missing):
            for c in missing:
                log.info("adding column %s %s to %s", c.name, c.type, label)
                conn.execute(f"ALTER TABLE {actual.qualified} ADD IF NOT EXISTS {ps.quote(c.name)} {c.type}")
            described = self._describe(conn, actual.schema, actual.name)
            assert described is not None
            return self._widened(conn, label, expected, described)
        keyed_alike = set(data.primary_key) == set(expected.primary_key)
        stale = []
        for c in data.columns:
            wanted = expected.column(c.name)
            if c.name not in data.primary_key and (wanted is None or not ps.holds(c.type, wanted.type)):
                stale.append(c)
        if self.create and problems and keyed_alike and stale and guarded.is_guarded(actual):
            # Columns the source dropped, renamed or retyped: dropped here (a retyped one is added again with
            # its new type). Their values come back with the rows the capture reads again after such a DDL.
            for c in stale:
                log.warning("dropping column %s %s of %s: the MySQL table no longer has it with that type", c.name,
                            c.type, label)  # fmt: skip
                conn.execute(f"ALTER TABLE {actual.qualified} DROP COLUMN IF EXISTS {ps.quote(c.name)}")
            described = self._describe(conn, actual.schema, actual.name)
            assert described is not None
            return self._widened(conn, label, expected, described)
        if problems:
            raise PhoenixSchemaError(f"{label} cannot hold the MySQL rows: {'; '.join(problems)}")
        return actual

    # --- batches ------------------------------------------------------------------------------
    def _wanted(self, db: str, table: str) -> bool:
        return matches_any(f"{db}.{table}", self.patterns)

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        spark = events.sparkSession
        events = under_policy(events, self.on_drop)
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
            # Each table's columns, and its newest truncate (a table's truncates share the key {}), in one job.
            truncate_pos = F.when(F.col("op") == "t", F.col("pos")).alias("t")
            found = (
                latest.select("source", "db", "table", F.explode_outer(F.map_keys("values")).alias("c"), truncate_pos)
                .distinct()
                .collect()
            )
            tables: dict[tuple[str, str, str], set[str]] = {}
            truncates: dict[tuple[str, str, str], str] = {}
            for r in found:
                key = (r["source"], r["db"], r["table"])
                columns = tables.setdefault(key, set())
                if r["c"] is not None:
                    columns.add(r["c"])
                if r["t"] is not None:
                    truncates[key] = max(r["t"], truncates.get(key, r["t"]))
            wanted = [(key, columns) for key, columns in sorted(tables.items()) if self._wanted(key[1], key[2])]
            # Tables are resolved (and created) one at a time, on the driver's one connection ...
            # (a table whose events are only truncates and that was never written here has nothing to empty)
            wanted = [(k, c) for k, c in wanted if c or k not in truncates or self._written(spark, *k)]
            targets = {key: self._target(spark, *key, columns, key in truncates) for key, columns in wanted}
            for key, _ in wanted:  # ... truncates applied there before the rows that follow them ...
                if key in truncates:
                    self._truncate(spark, targets[key], key, truncates[key], batch_id)
            # ... then every value of every table checked against its column type (one job) ...
            keys = [key for key, _ in wanted]
            frames = [self._prepared(latest, i, targets[k], k, truncates.get(k)) for i, k in enumerate(keys)]
            unfit = self._unfit(frames, keys)
            if unfit:  # the tables as the schema history has them now (a MODIFY), then checked once more
                for key in unfit:
                    self._targets.pop(key, None)
                    targets[key] = self._target(spark, *key, tables[key])
                    i = keys.index(key)
                    frames[i] = self._prepared(latest, i, targets[key], key, truncates.get(key))
                unfit = self._unfit([frames[keys.index(k)] for k in unfit], keys)
                if unfit:
                    raise UnfitValuesError(
                        "values that do not fit the Phoenix column types (nothing of this batch was applied; the "
                        "events stay in Kafka): " + "; ".join(
                            f"{db}.{table} into {targets[(source, db, table)].display}: {examples}"
                            for (source, db, table), examples in sorted(unfit.items())
                        )
                    )  # fmt: skip
            # ... and the rows of every table written in one job: a job's fixed cost (planning, scheduling,
            # connections) is paid once per batch, not once per table.
            if keys:
                self._write_tables(spark, frames, keys, targets, batch_id)
        except (PhoenixError, PhoenixUnavailable):
            self._reset()  # reconnect and re-check the tables on the retry
            raise
        finally:
            latest.unpersist()

    def _truncate(
        self, spark: SparkSession, target: ps.PhoenixTable, key: tuple[str, str, str], position: str, batch_id: int
    ) -> None:
        """A source TRUNCATE: every row older than it a tombstone at its position (a replayed older change of
        any key then stays out, as after a delete)."""
        started = time.perf_counter()
        changed = self._connection(spark).execute(guarded.truncate_sql(target, position))
        metrics.TRUNCATES.labels(self.name, f"{key[1]}.{key[2]}").inc()
        log.info("phoenix %s: batch %d: truncate of %s/%s.%s at %s: %d rows made tombstones in %.1f s",
                 target.display, batch_id, *key, position, changed, time.perf_counter() - started)  # fmt: skip

    def _prepared(
        self, latest: DataFrame, index: int, target: ps.PhoenixTable, key: tuple[str, str, str],
        truncated_at: str | None,
    ) -> DataFrame:  # fmt: skip
        """A table's rows of the batch, converted to its column types: `_t` (the table's index in the batch),
        `_<index>_<n>` (its n-th column), `_pos`, `_deleted`, `_problem` (the values that do not fit) and `_key`."""
        source, db, table = key
        rows = latest.where(
            (F.col("source") == source) & (F.col("db") == db) & (F.col("table") == table) & (F.col("op") != "t")
        )
        if truncated_at is not None:
            # A row's newest change older than the batch's truncate: the row is gone, and stays a tombstone at
            # the truncate's position (so a later duplicate of that change stays out too).
            older = F.col("pos") < F.lit(truncated_at)
            rows = rows.withColumns(
                {  # one projection: `older` reads the position before it is replaced
                    "op": F.when(older, F.lit("d")).otherwise(F.col("op")),
                    "pos": F.when(older, F.lit(truncated_at)).otherwise(F.col("pos")),
                }
            )
        return rows.select(*self._prepared_columns(index, target))

    def _prepared_columns(self, index: int, target: ps.PhoenixTable) -> list[Column]:
        """`_prepared`'s columns, made once per (index, table) and kept: they depend on nothing else, and making
        them (a call into the JVM per function) was about a third of a batch's driver time over a few wide
        tables."""
        cached = self._columns.get((index, target))
        if cached is not None:
            return cached
        deleted = F.col("op") == "d"
        converted, problems = [], []
        for n, c in enumerate(guarded.data_columns(target)):
            raw = F.col("values")[c.name]
            value = _convert(raw, ps.spark_type(c.type))
            zero = raw.rlike(_ZERO_DATE) if c.type in ("DATE", "TIMESTAMP") else F.lit(False)
            unfit = (value.isNull() & ~zero) | (value.isNotNull() & _lossy(raw, value, ps.spark_type(c.type)))
            problems.append(F.when(raw.isNotNull() & unfit, F.concat(F.lit(f"{c.name}="), raw)))
            if c.name not in target.primary_key:
                value = F.when(~deleted, value)  # a tombstone holds its key and position only
            converted.append(_bindable(value, c.type).alias(f"_{index}_{n}"))
        columns = [
            F.lit(index).alias("_t"), *converted, F.col("pos").alias("_pos"), deleted.alias("_deleted"),
            F.concat_ws(", ", *problems).alias("_problem"), F.col("key").alias("_key"),
        ]  # fmt: skip
        if len(self._columns) >= _KEPT_COLUMN_SETS:
            self._columns.clear()  # tables retyped again and again: start over rather than grow
        self._columns[(index, target)] = columns
        return columns

    def _unfit(self, frames: list[DataFrame], keys: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
        """The tables with values their Phoenix column types cannot hold, with examples; one job for them all.
        `frames`: `_prepared` frames of some of the batch's tables, `keys`: all of them (a frame's `_t` is its
        table's index there). Every value is checked before any row is written: the executors commit as they go."""
        if not frames:
            return {}
        bad = None
        text = F.concat(F.lit("key "), F.col("_key"), F.lit(" at "), F.col("_pos"), F.lit(": "), F.col("_problem"))
        for frame in frames:
            part = frame.where(F.col("_problem") != "").select("_t", text.alias("_text"))
            bad = part if bad is None else bad.unionByName(part)
        assert bad is not None
        found = (
            bad.coalesce(_tasks(bad.sparkSession))
            .groupBy("_t")
            .agg(F.count("*").alias("n"), F.min("_text").alias("a"), F.max("_text").alias("b"))
        )
        unfit = {}
        for r in found.collect():
            examples = r["a"] if r["a"] == r["b"] else f"{r['a']}; {r['b']}"
            unfit[keys[r["_t"]]] = f"{r['n']} row(s), e.g. {examples}"
        return unfit

    def _write_tables(
        self, spark: SparkSession, frames: list[DataFrame], keys: list[tuple[str, str, str]],
        targets: dict[tuple[str, str, str], ps.PhoenixTable], batch_id: int,
    ) -> None:  # fmt: skip
        """Every table's rows (`keys`, each with its `_prepared` frame) through GuardedUpsert.java, in the executors,
        in one Spark job."""
        started = time.perf_counter()
        rows = frames[0].drop("_problem", "_key")
        for frame in frames[1:]:
            rows = rows.unionByName(frame.drop("_problem", "_key"), allowMissingColumns=True)
        # A union has each table's partitions; coalesced, a task (a Phoenix connection, a statement per table)
        # writes a share of every table.
        rows = rows.coalesce(_tasks(spark))
        at = {name: n for n, name in enumerate(rows.columns)}
        sql_types, kinds = [0] * len(at), [guarded.PLAIN] * len(at)
        statements = []
        for i, k in enumerate(keys):
            data = guarded.data_columns(targets[k])
            layout = [*(f"_{i}_{n}" for n in range(len(data))), "_pos", "_deleted"]
            for name, c in zip(layout, [*data, *guarded.GUARD_COLUMNS], strict=True):
                sql_types[at[name]], kinds[at[name]] = guarded.sql_type(c.type), guarded.bind_kind(c.type)
            sql, params = guarded.upsert_sql(targets[k])
            statements.append((sql, [at[layout[p]] for p in params]))
        written = self._write(rows, statements, at["_t"], sql_types, kinds)
        log.info("phoenix sink %s: batch %d: %d rows of %d table(s) written by the executors in %.1f s", self.name,
                 batch_id, written, len(keys), time.perf_counter() - started)  # fmt: skip

    def _write(
        self, rows: DataFrame, statements: list[tuple[str, list[int]]], table_column: int, sql_types: list[int],
        kinds: list[int],
    ) -> int:  # fmt: skip
        """The executors' write (GuardedUpsert.java); the number of rows written."""
        return write_tables_from_executors(rows, self.url, statements, table_column, sql_types, kinds,
                                           self.commit_rows, f"cdcflow-phoenix-{self.name}",
                                           (self._driver_scope, f"{self._epoch_token}.{self._epoch}"))  # fmt: skip


def _tasks(spark: SparkSession) -> int:
    """Tasks for a batch's work over all of its tables: as many as the batch has partitions."""
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 1))


def _bindable(value: Column, phoenix_type: str) -> Column:
    """A converted value as GuardedUpsert.java binds it: dates as epoch days, timestamps as epoch
    microseconds (the JDBC values are built from those counts, with no calendar on the way)."""
    if phoenix_type == "DATE":
        return F.unix_date(value)
    if phoenix_type == "TIMESTAMP":
        return F.unix_micros(value)
    return value


def _lossy(raw: Column, value: Column, spark_type: str) -> Column:
    """A value converted with a loss (digits past a DECIMAL's scale, a time of day in a DATE, an integer whose text
    is not the event's): the MySQL column changed since the Phoenix table was made (MODIFY)."""
    if spark_type.startswith("decimal("):
        scale = int(spark_type[8:-1].split(",")[1])
        return raw.rlike("\\.[0-9]{" + str(scale) + "}[0-9]*[1-9]")
    if spark_type == "date":
        return raw.rlike("[ T][0-9:.]*[1-9]")
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return value.cast("string") != raw
    return F.lit(False)


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
