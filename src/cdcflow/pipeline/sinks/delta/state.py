"""Delta Lake current-state sink: one Delta table per source table, one row per source row, at
<path>/<source name>/<db>/<table> (two sources with the same db.table stay apart).

HBase-sourced tables (per cell; see `cdcflow.events.row_state` for the rules):

    row_key     binary      the HBase row key
    exists      boolean     false once every cell is deleted (the row stays, as a tombstone)
    cells       map<string, struct<value binary, ts bigint, pos array<bigint>>>
                            the visible value of each column, keyed "family:qualifier"
                            (cdcflow.events.cells.column_name), with its cell timestamp and position
    puts        array<cell> unmasked put versions, newest first per column, up to retained_versions
                            (readers take the first max_versions)
    tombstones  array<cell> delete markers that still mask puts
    source_ts_ms bigint     newest source time applied to the row
    <typed>     optional columns decoded from `cells` (option `typed_columns`)

Each batch: group the events by row, read the current state of just those rows, merge in Spark
SQL (`state_sql`: the rules of `row_state`, checked against it; pure, idempotent, independent of
order and batch boundaries), and MERGE back only the rows that changed, each guarded by the state
it was merged from: a row another writer changed meanwhile is not overwritten, the MERGE's counts
show it (or Delta refuses the commit), and the table is merged again. A replayed batch changes no
row, so it commits nothing. The tables of a batch are merged side by side (a MERGE is mostly
fixed cost).

MySQL-sourced tables (per row, guarded by position):

    key string (the primary-key columns as JSON), after string (row image as JSON), deleted
    boolean, pos array<bigint>, op string, source_ts_ms bigint

The newest event per key in the batch wins, and MERGE updates a row only when the incoming
position is greater than the stored one; deletes keep the row with `deleted = true` and their
position, so an older create replayed later cannot bring it back.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from cdcflow.clients.kafka.client import KafkaEndpoint
from cdcflow.config.sinks import DeltaStateOptions, SinkOptions
from cdcflow.errors import ConfigError, RetryableError, TerminalError
from cdcflow.events.cells import RowCells
from cdcflow.pipeline import metrics
from cdcflow.pipeline.envelope import newest_per_key
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta import mysql_typed as mt
from cdcflow.pipeline.sinks.delta.state_sql import decode_value_sql, merged_state_sql, visible_cells_sql
from cdcflow.pipeline.sinks.delta.tables import commit_conflict, ensure_table, refuse_old_layout
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn, latest_table_record, mysql_columns
from cdcflow.pipeline.sinks.naming import mapped_table

log = logging.getLogger(__name__)
# Typed MySQL tables: Change Data Feed for downstream readers, type widening for MODIFY COLUMN.
TYPED_TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableTypeWidening": "true"}

STATE_CELL = StructType(
    [
        StructField("family", BinaryType()),
        StructField("qualifier", BinaryType()),
        StructField("ts", LongType()),
        StructField("type", StringType()),
        StructField("value", BinaryType()),
        StructField("pos", ArrayType(LongType())),
    ]
)
VISIBLE = StructType(
    [StructField("value", BinaryType()), StructField("ts", LongType()), StructField("pos", ArrayType(LongType()))]
)
TYPED: dict[str, DataType] = {
    "base64": BinaryType(),
    "utf8": StringType(),
    "long": LongType(),
    "int": IntegerType(),
    "short": ShortType(),
    "double": DoubleType(),
    "float": FloatType(),
    "boolean": BooleanType(),
}
MYSQL_STATE = StructType(
    [
        StructField("key", StringType(), False),
        StructField("after", StringType()),
        StructField("deleted", BooleanType()),
        StructField("op", StringType()),
        StructField("pos", ArrayType(LongType())),
        StructField("source_ts_ms", LongType()),
    ]
)


def typed_column_name(column: str) -> str:
    """ "cf:first-name" → "cf_first_name"."""
    return re.sub(r"[^A-Za-z0-9_]", "_", column)


def hbase_state_schema(typed_columns: dict[str, str]) -> StructType:
    fields = [
        StructField("row_key", BinaryType(), False),
        StructField("exists", BooleanType()),
        StructField("cells", MapType(StringType(), VISIBLE)),
        StructField("puts", ArrayType(STATE_CELL)),
        StructField("tombstones", ArrayType(STATE_CELL)),
        StructField("source_ts_ms", LongType()),
    ]
    fields += [StructField(typed_column_name(c), TYPED[enc]) for c, enc in typed_columns.items()]
    return StructType(fields)


def merged_rows(joined: DataFrame, retained_versions: int, typed_columns: dict[str, str]) -> DataFrame:
    """(row_key, new_cells, batch_ts_ms, old_puts, old_tombstones, old_source_ts_ms) → every state
    column, `changed`, and the stored state each row was merged from (the MERGE's guard).

    Each step is its own projection that refers to the one before by column name, so the merge is
    computed once per row (Spark does not inline an expensive expression into several places)."""
    merged = joined.select(
        "*", F.expr(merged_state_sql("old_puts", "old_tombstones", "new_cells", retained_versions)).alias("_m")
    )
    state = merged.select(
        "row_key", "old_puts", "old_tombstones", F.col("_m.puts").alias("puts"),
        F.col("_m.tombstones").alias("tombstones"),
        F.greatest("old_source_ts_ms", "batch_ts_ms").alias("source_ts_ms"),
    )  # fmt: skip
    state = state.select(
        "*",
        (F.size("puts") > 0).alias("exists"),
        F.expr(visible_cells_sql("puts")).alias("cells"),
        F.expr("old_puts IS NULL OR NOT (puts <=> old_puts AND tombstones <=> old_tombstones)").alias("changed"),
    )
    typed = [
        F.expr(decode_value_sql(f"try_element_at(cells, '{_sql_string(column)}').value", encoding)).alias(
            typed_column_name(column)
        )
        for column, encoding in typed_columns.items()
    ]
    return state.select("*", *typed)


def _sql_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


# Raised inside a typed MySQL table's MERGE by a row that does not fit the table's known shape.
UNFIT_MARK = "cdcflow: the row does not fit the typed table's known shape"
# How often a batch runs a table's MERGE again after another writer committed first.
CONFLICT_RETRIES = 8
# Tables of one batch merged at the same time (HBase- and MySQL-sourced alike).
MERGE_THREADS = 4


class DeltaStateSink(Sink):
    """Options: cdcflow.config.sinks.DeltaStateOptions."""

    def __init__(self, name: str, options: SinkOptions, context: dict[str, Any]) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, DeltaStateOptions)
        if not options.path and context.get("data_dir"):
            # default: beside the checkpoints, <stack home>/pipeline/delta
            options = options.model_copy(update={"path": f"{context['data_dir']}/delta"})
        self.opts = options
        self.options = options
        self._checked_paths: set[str] = set()
        self._mysql_shapes: dict[tuple[str, str, str], list[MySqlColumn]] = {}

    def table_path(self, source: str, db: str, table: str) -> str:
        mapped = mapped_table(self.opts.table_map, db, table, source)
        if mapped:
            return mapped
        if not self.opts.path:
            raise ConfigError(f"sink {self.name}: no table_map entry for {source}/{db}.{table} and no path")
        return f"{self.opts.path.rstrip('/')}/{source}/{db}/{table}"

    def _checked_path(self, spark: SparkSession, source: str, db: str, table: str) -> str:
        path = self.table_path(source, db, table)
        if path not in self._checked_paths:
            if self.opts.path and not mapped_table(self.opts.table_map, db, table, source):
                refuse_old_layout(spark, self.name, f"{self.opts.path.rstrip('/')}/{db}/{table}", path)
            self._checked_paths.add(path)
        return path

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        # Each path costs Spark jobs even when it has nothing to do; run only those with events.
        connectors = {r[0] for r in events.select("source.connector").distinct().collect()}
        kept: list[DataFrame] = []  # persisted for the table merges; released after the last one
        try:
            merges: dict[str, Callable[[], None]] = {}
            if "hbase" in connectors:
                merges.update(self._hbase_merges(events.where(F.col("source.connector") == "hbase"), kept))
            if "mysql" in connectors:
                merges.update(self._mysql_merges(events.where(F.col("source.connector") == "mysql"), kept))
            self._run_merges(merges)
        finally:
            for frame in kept:
                frame.unpersist()

    def _run_merges(self, merges: dict[str, Callable[[], None]]) -> None:
        """One MERGE per table, every table of the batch (HBase- and MySQL-sourced) side by side:
        most of a MERGE's time is fixed cost on the driver (planning, reading the Delta log,
        committing), which overlaps with the other tables' jobs."""

        def timed(path: str, merge: Callable[[], None]) -> None:
            started = time.perf_counter()
            merge()
            log.info("sink %s: %s: merged in %.1f s", self.name, path, time.perf_counter() - started)

        with ThreadPoolExecutor(max_workers=min(MERGE_THREADS, len(merges) or 1)) as pool:
            for done in [pool.submit(timed, path, merge) for path, merge in merges.items()]:
                done.result()

    # --- HBase: per cell -------------------------------------------------------------------
    def _hbase_merges(self, events: DataFrame, kept: list[DataFrame]) -> dict[str, Callable[[], None]]:
        """The MERGE of each HBase-sourced table of the batch (the grouped cells kept persisted)."""
        spark = events.sparkSession
        cells = events.select(
            F.col("source.name").alias("source"),
            F.col("source.db").alias("db"),
            F.col("source.table").alias("table"),
            F.unbase64(F.get_json_object("key", "$.row")).alias("row_key"),
            F.col("source.ts_ms").alias("ts_ms"),
            F.col("source.pos").alias("event_pos"),
            F.posexplode("cells").alias("i", "c"),
        ).select(
            "source", "db", "table", "row_key", "ts_ms",
            F.struct(
                F.unbase64("c.family").alias("family"), F.unbase64("c.qualifier").alias("qualifier"),
                F.col("c.ts").alias("ts"), F.col("c.type").alias("type"), F.unbase64("c.value").alias("value"),
                # the cell's index breaks ties between two writes of one cell in the same event
                F.concat("event_pos", F.array(F.col("i").cast("long"))).alias("pos"),
            ).alias("cell"),
        )  # fmt: skip
        grouped = (
            cells.groupBy("source", "db", "table", "row_key")
            .agg(F.collect_list("cell").alias("new_cells"), F.max("ts_ms").alias("batch_ts_ms"))
            .persist()
        )
        kept.append(grouped)
        merges: dict[str, Callable[[], None]] = {}
        for t in grouped.select("source", "db", "table").distinct().collect():
            path = self._checked_path(spark, t["source"], t["db"], t["table"])
            batch = grouped.where(
                (F.col("source") == t["source"]) & (F.col("db") == t["db"]) & (F.col("table") == t["table"])
            ).select("row_key", "new_cells", "batch_ts_ms")
            merges[path] = functools.partial(self._merge_hbase_table, spark, path, batch)
        return merges

    def _merge_hbase_table(self, spark: SparkSession, path: str, batch: DataFrame) -> None:
        """Read the stored state of the batch's rows, merge in Spark SQL (`state_sql`), and MERGE
        back the rows that changed, each guarded by the state it was merged from: a row another
        writer changed meanwhile is not overwritten, the MERGE's counts show it, and the table is
        read and merged again (as when Delta refuses the commit for a conflict)."""
        schema = hbase_state_schema(self.opts.typed_columns)
        columns = [f.name for f in schema.fields]
        for attempt in range(CONFLICT_RETRIES + 1):
            target = ensure_table(spark, path, schema)
            stored = target.toDF().select(
                "row_key", F.col("puts").alias("old_puts"), F.col("tombstones").alias("old_tombstones"),
                F.col("source_ts_ms").alias("old_source_ts_ms"),
            )  # fmt: skip
            joined = batch.join(stored.join(batch.select("row_key"), "row_key", "left_semi"), "row_key", "left")
            merged = merged_rows(joined, self.opts.kept_versions, self.opts.typed_columns).persist()
            started = time.perf_counter()
            try:
                expected = merged.where("changed").count()
                if not expected:
                    return  # a replay, or changes HBase itself would ignore: nothing to write
                source = self._merge_source(path, merged.where("changed"))
                try:
                    result = (
                        target.alias("t")
                        .merge(source.alias("s"), "t.row_key = s.row_key")
                        .whenMatchedUpdate(
                            condition="t.puts <=> s.old_puts AND t.tombstones <=> s.old_tombstones",
                            set={c: f"s.`{c}`" for c in columns},
                        )
                        .whenNotMatchedInsert(condition="s.old_puts IS NULL", values={c: f"s.`{c}`" for c in columns})
                        .execute()
                        .first()
                    )
                    applied = int(result["num_updated_rows"]) + int(result["num_inserted_rows"]) if result else 0
                    conflict = None if applied == expected else f"{expected - applied} rows changed meanwhile"
                except Exception as exc:
                    conflict = commit_conflict(exc)
                    if not conflict:
                        raise
            finally:
                merged.unpersist()
            log.info("sink %s: %s: %d rows merged in %.1f s", self.name, path, expected, time.perf_counter() - started)
            if not conflict:
                return
            log.warning("sink %s: %s: another writer committed first (%s); merging again (%d)",
                        self.name, path, conflict, attempt + 1)  # fmt: skip
            metrics.DELTA_CONFLICTS.labels(self.name).inc()
            time.sleep(min(5.0, 0.2 * 2**attempt))
        raise RetryableError(
            f"sink {self.name}: {path} kept changing under this batch "
            f"({CONFLICT_RETRIES} merges lost the race); the batch will be retried"
        )

    def _merge_source(self, path: str, batch: DataFrame) -> DataFrame:
        """The MERGE's source rows for one table (tests wrap it, to land another writer's commit
        while the MERGE runs)."""
        return batch

    # --- MySQL: per row, guarded by position ------------------------------------------------
    def _mysql_merges(self, events: DataFrame, kept: list[DataFrame]) -> dict[str, Callable[[], None]]:
        """The MERGE of each MySQL-sourced table of the batch (the newest row per key kept persisted)."""
        spark = events.sparkSession
        latest = newest_per_key(
            events.select(
                F.col("source.name").alias("source"), F.col("source.db").alias("db"),
                F.col("source.table").alias("table"), "key", F.col("after"),
                (F.col("op") == "d").alias("deleted"), F.col("op"), F.col("source.pos").alias("pos"),
                F.col("source.ts_ms").alias("source_ts_ms"),
            ),
            ["source", "db", "table", "key"],
        ).persist()  # fmt: skip
        kept.append(latest)
        merges: dict[str, Callable[[], None]] = {}
        for t in latest.select("source", "db", "table").distinct().collect():
            batch = latest.where(
                (F.col("source") == t["source"]) & (F.col("db") == t["db"]) & (F.col("table") == t["table"])
            ).drop("source", "db", "table")
            path = self._checked_path(spark, t["source"], t["db"], t["table"])
            if self.opts.mysql_layout == "json":
                json_merge = functools.partial(self._mysql_json_merge, spark, path, batch)
                merges[path] = functools.partial(self._merge_guarded, path, json_merge)
            else:
                merges[path] = functools.partial(
                    self._merge_mysql_typed, spark, path, batch, t["source"], t["db"], t["table"]
                )
        return merges

    def _merge_mysql_typed(
        self, spark: SparkSession, path: str, batch: DataFrame, source: str, db: str, table: str
    ) -> None:
        """The MERGE checks inside its own pass that every value fits the table's known shape
        (UNFIT_MARK raised from the source rows; a failed MERGE commits nothing). Only a batch that
        does not fit pays for the separate check: the schema history is read again, the table
        evolved, or the batch refused with the columns and values named."""
        try:
            self._merge_guarded(path, self._mysql_typed_merge(spark, path, batch, source, db, table, checked=False))
        except Exception as exc:
            if UNFIT_MARK not in str(exc):
                raise
            log.info("sink %s: %s: the batch holds columns or values the known shape of %s/%s.%s does not fit; "
                     "checking it against the schema history", self.name, path, source, db, table)  # fmt: skip
            metrics.DELTA_SHAPE_CHECKS.labels(self.name).inc()
            self._merge_guarded(path, self._mysql_typed_merge(spark, path, batch, source, db, table, checked=True))

    def _merge_guarded(self, path: str, merge: Callable[[], None]) -> None:
        """Run a MERGE whose guard is inside it; when Delta refuses the commit because another
        writer committed first, run it again (it re-reads the table)."""
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                merge()
                return
            except Exception as exc:
                if not commit_conflict(exc) or attempt == CONFLICT_RETRIES:
                    raise
                log.warning("sink %s: %s: another writer committed first (%s); merging again",
                            self.name, path, commit_conflict(exc))  # fmt: skip
                metrics.DELTA_CONFLICTS.labels(self.name).inc()
                time.sleep(min(5.0, 0.2 * 2**attempt))

    def _mysql_json_merge(self, spark: SparkSession, path: str, batch: DataFrame) -> None:
        target = ensure_table(spark, path, MYSQL_STATE)
        (
            target.alias("t")
            .merge(batch.alias("s"), "t.key = s.key")
            .whenMatchedUpdateAll(condition="s.pos > t.pos")
            .whenNotMatchedInsertAll()
            .execute()
        )

    def _mysql_typed_merge(
        self, spark: SparkSession, path: str, batch: DataFrame, source: str, db: str, table: str, checked: bool
    ) -> Callable[[], None]:
        """Convert the batch to the table's columns (the newest shape in the schema history),
        evolve the table (new columns, widened types), and return the guarded MERGE.

        Unchecked, with the shape known so far, the MERGE itself fails with UNFIT_MARK on a row
        that carries a column the shape lacks or a value that does not convert. Checked, a job of
        its own looks first, and the schema history is read again when the events do not fit."""
        label = f"{source}/{db}.{table}"
        if checked:
            columns, rows = self._fitting_shape(batch, source, db, table)
        else:
            columns = self._mysql_columns(source, db, table, refresh=False)
            rows = mt.typed_rows(batch, columns)
            # In the column every MERGE clause reads for every source row (the guard; inserted),
            # so a row that does not fit fails the MERGE before it commits.
            known = F.array(*(F.lit(c.name) for c in columns))
            unfit = (F.size("_misfits") > 0) | (F.size(F.array_except("_event_columns", known)) > 0)
            rows = rows.withColumn(mt.POS, F.when(unfit, F.raise_error(F.lit(UNFIT_MARK))).otherwise(F.col(mt.POS)))
        keys = mt.key_columns(columns)
        if not keys:
            raise ConfigError(
                f"sink {self.name}: MySQL table {label} has no primary key in its schema history: a typed Delta "
                "table needs one to match rows; set mysql_layout: json for this sink (or map the table elsewhere)"
            )
        schema = mt.table_schema(columns)
        target = ensure_table(spark, path, schema, TYPED_TABLE_PROPERTIES)
        current = target.toDF().schema
        if mt.POS not in current.fieldNames():
            raise ConfigError(
                f"sink {self.name}: {path} holds {label} in the JSON layout (key, after); set mysql_layout: json "
                "for this sink, or move the table away so the typed one is built from the topics"
            )
        widen, refuse = mt.type_changes(current, schema)
        if refuse:
            raise TerminalError(
                f"sink {self.name}: MySQL table {label} changed column type(s) in a way Delta cannot follow in "
                f"place: {', '.join(refuse)}. Move {path} away; the sink rebuilds it from the topics"
            )
        have = {n.lower() for n in current.fieldNames()}
        previous = None
        for field in schema.fields:  # columns added in MySQL, placed where MySQL has them
            if field.name.lower() not in have:
                where = f"AFTER {_quoted(previous)}" if previous else "FIRST"
                log.info("sink %s: %s: adding column %s %s", self.name, path, field.name, field.dataType.simpleString())
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({_quoted(field.name)} "
                          f"{field.dataType.simpleString()} {where})")  # fmt: skip
            previous = field.name
        for change in widen:
            column, wanted = change.split(": ", 1)[0], schema[change.split(": ", 1)[0]].dataType.simpleString()
            log.info("sink %s: %s: widening column %s", self.name, path, change)
            spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {_quoted(column)} TYPE {wanted}")
        source_rows = rows.drop("_misfits", "_event_columns")
        on = " AND ".join(f"t.{_quoted(k)} <=> s.{_quoted(k)}" for k in keys)

        def merge() -> None:
            # The position guard is inside the MERGE, so Delta's conflict detection covers it.
            (
                DeltaTable.forPath(spark, path).alias("t")
                .merge(source_rows.alias("s"), on)
                .whenMatchedUpdateAll(condition=f"s.{mt.POS} > t.{mt.POS}")
                .whenNotMatchedInsertAll()
                .execute()
            )  # fmt: skip

        return merge

    def _fitting_shape(self, batch: DataFrame, source: str, db: str, table: str) -> tuple[list[MySqlColumn], DataFrame]:
        """The table's shape that every event of the batch fits (the known one, else the schema
        history's newest), and the batch converted to it; refused naming what does not fit."""
        for refresh in (False, True):
            columns = self._mysql_columns(source, db, table, refresh)
            rows = mt.typed_rows(batch, columns)
            found = rows.agg(
                F.array_distinct(F.flatten(F.collect_set("_misfits"))).alias("misfits"),
                F.array_distinct(F.flatten(F.collect_set("_event_columns"))).alias("columns"),
            ).first()
            misfits = sorted(found["misfits"] or []) if found else []
            unknown = sorted(set(found["columns"] or []) - {c.name for c in columns}) if found else []
            if not misfits and not unknown:
                return columns, rows
        why = []
        if unknown:
            why.append(f"the events carry column(s) {unknown} that its newest schema-history record lacks")
        if misfits:
            why.append(f"values of column(s) {misfits} do not fit the types of its schema-history record")
        raise TerminalError(f"sink {self.name}: MySQL table {source}/{db}.{table}: {'; '.join(why)} "
                            f"(history topic {self._history_topic()})")  # fmt: skip

    def _history_topic(self) -> str:
        topic = self.opts.schema_history_topic or self.context.get("mysql_schema_history_topic")
        if not topic:
            raise ConfigError(
                f"sink {self.name}: typed Delta tables for MySQL sources are built from the capture's schema "
                "history: set the sink's schema_history_topic (or mysql.schema_history_topic), or mysql_layout: json"
            )
        return str(topic)

    def _mysql_columns(self, source: str, db: str, table: str, refresh: bool) -> list[MySqlColumn]:
        cached = self._mysql_shapes.get((source, db, table))
        if cached is not None and not refresh:
            return cached
        kafka = KafkaEndpoint.of(self.context["bootstrap_servers"], self.context.get("kafka_properties"))
        record = latest_table_record(kafka, self._history_topic(), source, db, table)
        if record is None:
            raise TerminalError(
                f"sink {self.name}: the schema history ({self._history_topic()}) has no record of {source}/{db}.{table}"
                " to build its typed Delta table from"
            )
        columns = mysql_columns(record["columns"])
        self._mysql_shapes[(source, db, table)] = columns
        return columns


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


_VERIFY_PIECE_BYTES = 2 * 2**20  # compressed Parquet: several times that once decoded


def hbase_state_rows(
    spark: SparkSession, path: str, max_versions: int = 1, start_row: bytes = b"", stop_row: bytes = b""
) -> Iterator[RowCells]:
    """The rows of an HBase state table as `cdcflow.verify.hbase` compares them: row-key order, the
    newest `max_versions` visible cells per column (the state keeps more: retained_versions), rows
    whose cells are all deleted left out; only keys from `start_row` up to `stop_row` (b"": the end).
    Spark compares binary keys byte by byte, unsigned, as HBase orders them."""
    table = spark.read.format("delta").load(path).where("exists")
    if start_row:
        table = table.where(F.col("row_key") >= F.lit(bytearray(start_row)))
    if stop_row:
        table = table.where(F.col("row_key") < F.lit(bytearray(stop_row)))
    # toLocalIterator brings one partition at a time through the driver: sorted into pieces of about
    # _VERIFY_PIECE_BYTES of table files each, so a large table never needs a large driver.
    size = int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["sizeInBytes"] or 0)  # type: ignore[index]
    pieces = max(2, -(-size // _VERIFY_PIECE_BYTES))
    ordered = table.select("row_key", "puts").repartitionByRange(pieces, "row_key").sortWithinPartitions("row_key")
    rows = ordered.toLocalIterator()
    for r in rows:
        per_column: dict[tuple[bytes, bytes], int] = {}
        cells = set()
        for c in r["puts"]:  # newest first within each column
            col = (bytes(c["family"]), bytes(c["qualifier"]))
            if per_column.get(col, 0) < max_versions:
                per_column[col] = per_column.get(col, 0) + 1
                cells.add((col[0], col[1], int(c["ts"]), bytes(c["value"])))
        yield bytes(r["row_key"]), frozenset(cells)
