"""Delta Lake current-state sink: one Delta table per source table, one row per source row.

HBase-sourced tables (per cell; see `cdcflow.pipeline.sinks.delta.cell_state` for the rules):

    row_key     binary      the HBase row key
    exists      boolean     false once every cell is deleted (the row stays, as a tombstone)
    cells       map<string, struct<value binary, ts bigint, pos array<bigint>>>
                            the visible value of each column, keyed "family:qualifier"
                            (non-printable bytes as \\xNN), with its cell timestamp and position
    puts        array<cell> retained put versions (newest first per column, up to max_versions)
    tombstones  array<cell> delete markers that still mask puts
    source_ts_ms bigint     newest source time applied to the row
    <typed>     optional columns decoded from `cells` (option `typed_columns`)

Each batch: group the events by row, read the current state of just those rows, merge in
Python (pure, idempotent, order-independent), and MERGE back only the rows that changed. A
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

from cdcflow.errors import ConfigError
from cdcflow.events.cells import RowCells
from cdcflow.events.json_codec import CELL_TYPE_NAMES, CELL_TYPES, VALUE_ENCODINGS, render_value
from cdcflow.pipeline.envelope import newest_per_key
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta.cell_state import RowState, StateCell, column_key, merge
from cdcflow.pipeline.sinks.delta.tables import ensure_table
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
    joined: Iterable[Row], max_versions: int, typed_columns: dict[str, str]
) -> Iterator[tuple[Any, ...]]:
    """(db, table, row_key, new cells, batch source ts, stored state or nulls) → changed state rows only."""
    for r in joined:
        old = RowState(_to_state_cells(r["old_puts"]), _to_state_cells(r["old_tombstones"]))
        new = merge(old, _to_state_cells(r["new_cells"]), max_versions)
        source_ts = max(t for t in (r["old_source_ts_ms"], r["batch_ts_ms"]) if t is not None)
        exists_before = r["old_puts"] is not None
        if exists_before and new.puts == old.puts and new.tombstones == old.tombstones:
            continue  # a replay, or changes HBase itself would ignore: nothing to write
        newest = new.newest()
        cells = {column_key(f, q): (c.value, c.ts, list(c.pos)) for (f, q), c in newest.items()}
        typed = []
        for column, encoding in typed_columns.items():
            family, _, qualifier = column.partition(":")
            cell = newest.get((family.encode(), qualifier.encode()))
            typed.append(None if cell is None else _decode_typed(cell.value, encoding))
        yield (
            r["db"], r["table"], bytes(r["row_key"]), new.exists, cells, [_cell_row(c) for c in new.puts],
            [_cell_row(c) for c in new.tombstones], source_ts, *typed,
        )  # fmt: skip


class DeltaStateSink(Sink):
    """Options: path (root; tables at <path>/<db>/<table>; default <stack home>/pipeline/delta),
    table_map {"db.table": path},
    max_versions (per column, default 1), typed_columns {"cf:qual": encoding} (HBase sources)."""

    def __init__(self, name: str, options: dict[str, Any], context: dict[str, Any]) -> None:
        super().__init__(name, options, context)
        if not options.get("path") and context.get("data_dir"):
            # default: beside the checkpoints, <stack home>/pipeline/delta
            self.options = options = {**options, "path": f"{context['data_dir']}/delta"}
        if not options.get("path") and "table_map" not in options:
            raise ConfigError(f"sink {name}: delta needs options.path (or a table_map for every table)")
        self.max_versions = int(options.get("max_versions", 1))
        if self.max_versions < 1:
            raise ConfigError(f"sink {name}: max_versions must be at least 1")
        self.typed_columns: dict[str, str] = dict(options.get("typed_columns", {}))
        bad = {c: e for c, e in self.typed_columns.items() if e not in VALUE_ENCODINGS or ":" not in c}
        if bad:
            raise ConfigError(
                f"sink {name}: typed_columns {bad}: keys are 'family:qualifier', encodings one of {VALUE_ENCODINGS}"
            )

    def table_path(self, db: str, table: str) -> str:
        mapped = mapped_table(self.options.get("table_map", {}), db, table)
        if mapped:
            return mapped
        if "path" not in self.options:
            raise ConfigError(f"sink {self.name}: no table_map entry for {db}.{table} and no path")
        return f"{str(self.options['path']).rstrip('/')}/{db}/{table}"

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        self._apply_hbase(events.where(F.col("source.connector") == "hbase"))
        self._apply_mysql(events.where(F.col("source.connector") == "mysql"))

    # --- HBase: per cell -------------------------------------------------------------------
    def _apply_hbase(self, events: DataFrame) -> None:
        spark = events.sparkSession
        cells = events.select(
            F.col("source.db").alias("db"),
            F.col("source.table").alias("table"),
            F.unbase64(F.get_json_object("key", "$.row")).alias("row_key"),
            F.col("source.ts_ms").alias("ts_ms"),
            F.col("source.pos").alias("event_pos"),
            F.posexplode("cells").alias("i", "c"),
        ).select(
            "db", "table", "row_key", "ts_ms",
            F.struct(
                F.unbase64("c.family").alias("family"), F.unbase64("c.qualifier").alias("qualifier"),
                F.col("c.ts").alias("ts"), F.col("c.type").alias("type"), F.unbase64("c.value").alias("value"),
                # the cell's index breaks ties between two writes of one cell in the same event
                F.concat("event_pos", F.array(F.col("i").cast("long"))).alias("pos"),
            ).alias("cell"),
        )  # fmt: skip
        grouped = (
            cells.groupBy("db", "table", "row_key")
            .agg(F.collect_list("cell").alias("new_cells"), F.max("ts_ms").alias("batch_ts_ms"))
            .persist()
        )
        try:
            tables = [(t["db"], t["table"]) for t in grouped.select("db", "table").distinct().collect()]
            if tables:
                self._merge_hbase_tables(spark, grouped, tables)
        finally:
            grouped.unpersist()

    def _merge_hbase_tables(self, spark: SparkSession, grouped: DataFrame, tables: list[tuple[str, str]]) -> None:
        """One Python pass over the batch's rows of every table, then one MERGE per table."""
        schema = hbase_state_schema(self.typed_columns)
        targets = {t: ensure_table(spark, self.table_path(*t), schema) for t in tables}
        stored: DataFrame | None = None
        for (db, table), target in targets.items():
            rows = target.toDF().select(
                F.lit(db).alias("db"), F.lit(table).alias("table"), "row_key",
                F.col("puts").alias("old_puts"), F.col("tombstones").alias("old_tombstones"),
                F.col("source_ts_ms").alias("old_source_ts_ms"),
            )  # fmt: skip
            stored = rows if stored is None else stored.unionByName(rows)
        assert stored is not None
        keys = ["db", "table", "row_key"]
        current = stored.join(grouped.select(*keys), keys, "left_semi")
        joined = grouped.join(current, keys, "left")
        max_versions, typed = self.max_versions, self.typed_columns
        changed_rdd = joined.rdd.mapPartitions(lambda rows: merge_hbase_rows(rows, max_versions, typed))
        with_table = StructType([StructField("db", StringType()), StructField("table", StringType()), *schema.fields])
        # Cut the lineage before writing: the merge input was read from the tables being written.
        # (verifySchema off: the rows are built right above; checking each one in Python is slow)
        started = time.perf_counter()
        changed = spark.createDataFrame(changed_rdd, with_table, verifySchema=False).localCheckpoint(eager=True)
        merged_at = time.perf_counter()
        counts = {
            (r["db"], r["table"]): r["n"] for r in changed.groupBy("db", "table").agg(F.count("*").alias("n")).collect()
        }
        for (db, table), target in targets.items():
            if not counts.get((db, table)):
                continue  # a replay: nothing changed, nothing to commit
            source = changed.where((F.col("db") == db) & (F.col("table") == table)).drop("db", "table")
            (
                target.alias("t")
                .merge(source.alias("s"), "t.row_key = s.row_key")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        log.info("sink %s: state of %d rows merged in %.1f s, written in %.1f s", self.name, sum(counts.values()),
                 merged_at - started, time.perf_counter() - merged_at)  # fmt: skip

    # --- MySQL: per row, guarded by position ------------------------------------------------
    def _apply_mysql(self, events: DataFrame) -> None:
        spark = events.sparkSession
        latest = newest_per_key(
            events.select(
                F.col("source.db").alias("db"), F.col("source.table").alias("table"), "key", F.col("after"),
                (F.col("op") == "d").alias("deleted"), F.col("op"), F.col("source.pos").alias("pos"),
                F.col("source.ts_ms").alias("source_ts_ms"),
            ),
            ["db", "table", "key"],
        ).persist()  # fmt: skip
        try:
            for t in latest.select("db", "table").distinct().collect():
                batch = latest.where((F.col("db") == t["db"]) & (F.col("table") == t["table"])).drop("db", "table")
                target = ensure_table(spark, self.table_path(t["db"], t["table"]), MYSQL_STATE)
                (
                    target.alias("t")
                    .merge(batch.alias("s"), "t.key = s.key")
                    .whenMatchedUpdateAll(condition="s.pos > t.pos")
                    .whenNotMatchedInsertAll()
                    .execute()
                )
        finally:
            latest.unpersist()


def hbase_state_rows(spark: SparkSession, path: str, max_versions: int = 1) -> Iterator[RowCells]:
    """The rows of an HBase state table as `cdcflow.verify.hbase` compares them: row-key order, the
    newest `max_versions` visible cells per column, rows whose cells are all deleted left out."""
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
