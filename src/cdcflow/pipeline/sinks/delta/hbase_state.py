"""HBase-sourced state tables: their schema and HBase's rules as Spark SQL, shared by the fold
(which MERGEs them into the state table) and the current view (which applies the pending changes
at read time), so both read one definition (`state_sql`, checked against `cdcflow.events.row_state`).

A state table, per row:

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
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame
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

from cdcflow.pipeline.sinks.delta.state_sql import decode_value_sql, merged_state_sql, visible_cells_sql

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


def cells_by_row(log_rows: DataFrame) -> DataFrame:
    """A table's logged changes (the change log's columns) as (row_key, new_cells, batch_ts_ms): every
    cell of every change of a row, each with the change's position plus the cell's index (which
    breaks ties between two writes of one cell in the same change)."""
    cells = log_rows.select(
        F.unbase64(F.get_json_object("key", "$.row")).alias("row_key"),
        F.col("source_ts_ms").alias("ts_ms"),
        F.col("pos").alias("event_pos"),
        F.posexplode("cells").alias("i", "c"),
    ).select(
        "row_key", "ts_ms",
        F.struct(
            F.unbase64("c.family").alias("family"), F.unbase64("c.qualifier").alias("qualifier"),
            F.col("c.ts").alias("ts"), F.col("c.type").alias("type"), F.unbase64("c.value").alias("value"),
            F.concat("event_pos", F.array(F.col("i").cast("long"))).alias("pos"),
        ).alias("cell"),
    )  # fmt: skip
    return cells.groupBy("row_key").agg(F.collect_list("cell").alias("new_cells"), F.max("ts_ms").alias("batch_ts_ms"))


def stored_for_merge(state: DataFrame) -> DataFrame:
    """A state table's columns as `merged_rows` reads the stored side of a row."""
    return state.select(
        "row_key", F.col("puts").alias("old_puts"), F.col("tombstones").alias("old_tombstones"),
        F.col("source_ts_ms").alias("old_source_ts_ms"),
    )  # fmt: skip
