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

Each batch: group the events by row, read the current state of just those rows, merge in
Python (pure, idempotent, independent of order and batch boundaries), and MERGE back only the
rows that changed, each guarded by the state it was merged from: a row another writer changed
meanwhile is not overwritten, the MERGE's counts show it, and the table is merged again. A
replayed batch changes no row, so it commits nothing.

MySQL-sourced tables (per row, guarded by position):

    key string (the primary-key columns as JSON), after string (row image as JSON), deleted
    boolean, pos array<bigint>, op string, source_ts_ms bigint

The newest event per key in the batch wins, and MERGE updates a row only when the incoming
position is greater than the stored one; deletes keep the row with `deleted = true` and their
position, so an older create replayed later cannot bring it back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
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

from cdcflow.config.sinks import DeltaStateOptions, SinkOptions
from cdcflow.errors import ConfigError, RetryableError
from cdcflow.events.cells import RowCells, column_name
from cdcflow.events.json_codec import CELL_TYPE_NAMES, CELL_TYPES, render_value
from cdcflow.events.row_state import RowState, StateCell, merge
from cdcflow.pipeline import metrics
from cdcflow.pipeline.envelope import newest_per_key
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta.tables import commit_conflict, ensure_table, refuse_old_layout
from cdcflow.pipeline.sinks.naming import mapped_table

log = logging.getLogger(__name__)

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


def _decode_typed(value: bytes, encoding: str) -> Any:
    """The value in the column's Spark type; null when the bytes do not fit the encoding."""
    if encoding == "base64":
        return value
    if encoding == "utf8":
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    decoded = render_value(value, encoding)
    return None if isinstance(decoded, str) else decoded  # render_value's base64 fallback


def _to_state_cells(rows: list[Row] | None) -> list[StateCell]:
    return [
        StateCell(
            bytes(c["family"]),
            bytes(c["qualifier"]),
            c["ts"],
            CELL_TYPES[c["type"]],
            bytes(c["value"] or b""),
            tuple(c["pos"]),
        )
        for c in rows or ()
    ]


def _cell_row(c: StateCell) -> tuple[Any, ...]:
    return (c.family, c.qualifier, c.ts, CELL_TYPE_NAMES[c.type], c.value, list(c.pos))


def merge_hbase_rows(
    joined: Iterable[Row], retained_versions: int, typed_columns: dict[str, str]
) -> Iterator[tuple[Any, ...]]:
    """(table, row_key, new cells, batch source ts, stored state or nulls) → changed state rows only,
    each with the stored state it was merged from (the MERGE's guard)."""
    for r in joined:
        old = RowState(_to_state_cells(r["old_puts"]), _to_state_cells(r["old_tombstones"]))
        new = merge(old, _to_state_cells(r["new_cells"]), retained_versions)
        source_ts = max(t for t in (r["old_source_ts_ms"], r["batch_ts_ms"]) if t is not None)
        exists_before = r["old_puts"] is not None
        if exists_before and new.puts == old.puts and new.tombstones == old.tombstones:
            continue  # a replay, or changes HBase itself would ignore: nothing to write
        newest = new.newest()
        cells = {column_name(f, q): (c.value, c.ts, list(c.pos)) for (f, q), c in newest.items()}
        typed = []
        for column, encoding in typed_columns.items():
            cell = next((c for (f, q), c in newest.items() if column_name(f, q) == column), None)
            typed.append(None if cell is None else _decode_typed(cell.value, encoding))
        yield (
            r["target"], bytes(r["row_key"]), new.exists, cells, [_cell_row(c) for c in new.puts],
            [_cell_row(c) for c in new.tombstones], source_ts, *typed, r["old_puts"], r["old_tombstones"],
        )  # fmt: skip


# How often a batch re-reads and re-merges a table whose rows another writer changed meanwhile.
CONFLICT_RETRIES = 8


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
        self._apply_hbase(events.where(F.col("source.connector") == "hbase"))
        self._apply_mysql(events.where(F.col("source.connector") == "mysql"))

    # --- HBase: per cell -------------------------------------------------------------------
    def _apply_hbase(self, events: DataFrame) -> None:
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
        try:
            names = grouped.select("source", "db", "table").distinct().collect()
            paths = {self._checked_path(spark, t["source"], t["db"], t["table"]) for t in names}
            if not paths:
                return
            path_of = F.create_map(*[x for t in names for x in (
                F.lit(f"{t['source']}/{t['db']}.{t['table']}"),
                F.lit(self.table_path(t["source"], t["db"], t["table"])))])  # fmt: skip
            targeted = grouped.select(
                path_of[F.concat_ws("/", "source", F.concat_ws(".", "db", "table"))].alias("target"),
                "row_key", "new_cells", "batch_ts_ms",
            )  # fmt: skip
            pending = sorted(paths)
            for attempt in range(CONFLICT_RETRIES + 1):
                pending = self._merge_hbase_tables(spark, targeted, pending)
                if not pending:
                    return
                log.warning("sink %s: another writer changed rows of %s during the batch; merging again (%d)",
                            self.name, ", ".join(pending), attempt + 1)  # fmt: skip
                metrics.DELTA_CONFLICTS.labels(self.name).inc(len(pending))
                time.sleep(min(5.0, 0.2 * 2**attempt))
            raise RetryableError(f"sink {self.name}: {', '.join(pending)} kept changing under this batch "
                                 f"({CONFLICT_RETRIES} merges lost the race); the batch will be retried")  # fmt: skip
        finally:
            grouped.unpersist()

    def _merge_hbase_tables(self, spark: SparkSession, targeted: DataFrame, paths: list[str]) -> list[str]:
        """One Python pass over the batch's rows of these tables, then one MERGE per table, each
        guarded by the state it was merged from. Returns the tables another writer changed meanwhile."""
        schema = hbase_state_schema(self.opts.typed_columns)
        targets = {p: ensure_table(spark, p, schema) for p in paths}
        stored: DataFrame | None = None
        for path, target in targets.items():
            rows = target.toDF().select(
                F.lit(path).alias("target"), "row_key", F.col("puts").alias("old_puts"),
                F.col("tombstones").alias("old_tombstones"), F.col("source_ts_ms").alias("old_source_ts_ms"),
            )  # fmt: skip
            stored = rows if stored is None else stored.unionByName(rows)
        assert stored is not None
        keys = ["target", "row_key"]
        batch = targeted.where(F.col("target").isin(paths))
        current = stored.join(batch.select(*keys), keys, "left_semi")
        joined = batch.join(current, keys, "left")
        retained, typed = self.opts.kept_versions, self.opts.typed_columns
        changed_rdd = joined.rdd.mapPartitions(lambda rows: merge_hbase_rows(rows, retained, typed))
        with_guard = StructType([
            StructField("target", StringType()), *schema.fields,
            StructField("old_puts", ArrayType(STATE_CELL)), StructField("old_tombstones", ArrayType(STATE_CELL)),
        ])  # fmt: skip
        # Cut the lineage before writing: the merge input was read from the tables being written.
        # (verifySchema off: the rows are built right above; checking each one in Python is slow)
        started = time.perf_counter()
        changed = spark.createDataFrame(changed_rdd, with_guard, verifySchema=False).localCheckpoint(eager=True)
        merged_at = time.perf_counter()
        counts = {r["target"]: r["n"] for r in changed.groupBy("target").agg(F.count("*").alias("n")).collect()}
        lost: list[str] = []
        for path, target in targets.items():
            expected = counts.get(path, 0)
            if not expected:
                continue  # a replay: nothing changed, nothing to commit
            source = changed.where(F.col("target") == path).drop("target")
            self._before_commit(path)
            try:
                # The guard: a row is replaced only if it still holds the state it was merged from,
                # and inserted only if it was absent then. Another writer's change in between makes
                # the row match neither; the count below sees it and the table is merged again.
                result = (
                    target.alias("t")
                    .merge(source.alias("s"), "t.row_key = s.row_key")
                    .whenMatchedUpdate(
                        condition="t.puts <=> s.old_puts AND t.tombstones <=> s.old_tombstones",
                        set={f.name: f"s.`{f.name}`" for f in schema.fields},
                    )
                    .whenNotMatchedInsert(
                        condition="s.old_puts IS NULL", values={f.name: f"s.`{f.name}`" for f in schema.fields}
                    )
                    .execute()
                    .first()
                )
            except Exception as exc:
                if not commit_conflict(exc):
                    raise
                log.info("sink %s: %s: Delta refused the commit (%s)", self.name, path, commit_conflict(exc))
                lost.append(path)
                continue
            applied = int(result["num_updated_rows"]) + int(result["num_inserted_rows"]) if result else 0
            if applied != expected:
                lost.append(path)  # the other writer's rows are kept; ours are merged again on top
        log.info("sink %s: state of %d rows merged in %.1f s, written in %.1f s", self.name, sum(counts.values()),
                 merged_at - started, time.perf_counter() - merged_at)  # fmt: skip
        changed.unpersist()
        return lost

    def _before_commit(self, path: str) -> None:
        """Between reading a table's state and committing the merge: where another writer's commit
        can land (tests put one there, to force the guard's path)."""

    # --- MySQL: per row, guarded by position ------------------------------------------------
    def _apply_mysql(self, events: DataFrame) -> None:
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
        try:
            for t in latest.select("source", "db", "table").distinct().collect():
                batch = latest.where(
                    (F.col("source") == t["source"]) & (F.col("db") == t["db"]) & (F.col("table") == t["table"])
                ).drop("source", "db", "table")
                path = self._checked_path(spark, t["source"], t["db"], t["table"])
                for attempt in range(CONFLICT_RETRIES + 1):
                    target = ensure_table(spark, path, MYSQL_STATE)
                    try:
                        # The position guard is inside the MERGE, so Delta's conflict detection covers it.
                        (
                            target.alias("t")
                            .merge(batch.alias("s"), "t.key = s.key")
                            .whenMatchedUpdateAll(condition="s.pos > t.pos")
                            .whenNotMatchedInsertAll()
                            .execute()
                        )
                        break
                    except Exception as exc:
                        if not commit_conflict(exc) or attempt == CONFLICT_RETRIES:
                            raise
                        log.warning("sink %s: %s: another writer committed first (%s); merging again",
                                    self.name, path, commit_conflict(exc))  # fmt: skip
                        metrics.DELTA_CONFLICTS.labels(self.name).inc()
                        time.sleep(min(5.0, 0.2 * 2**attempt))
        finally:
            latest.unpersist()


def hbase_state_rows(spark: SparkSession, path: str, max_versions: int = 1) -> Iterator[RowCells]:
    """The rows of an HBase state table as `cdcflow.verify.hbase` compares them: row-key order, the
    newest `max_versions` visible cells per column (the state keeps more: retained_versions), rows
    whose cells are all deleted left out."""
    rows = (
        spark.read.format("delta").load(path).where("exists").select("row_key", "puts")
        .orderBy("row_key").toLocalIterator()
    )  # fmt: skip
    for r in rows:
        per_column: dict[tuple[bytes, bytes], int] = {}
        cells = set()
        for c in r["puts"]:  # newest first within each column
            col = (bytes(c["family"]), bytes(c["qualifier"]))
            if per_column.get(col, 0) < max_versions:
                per_column[col] = per_column.get(col, 0) + 1
                cells.add((col[0], col[1], int(c["ts"]), bytes(c["value"])))
        yield bytes(r["row_key"]), frozenset(cells)
