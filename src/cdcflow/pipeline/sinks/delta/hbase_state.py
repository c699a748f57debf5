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


def merge_steps(retained_versions: int, typed_columns: dict[str, str]) -> list[list[str]]:
    """`merged_rows` as SQL projections, each over the one before (the views nest them in SQL text).

    Each step refers to the one before by column name, so the merge is computed once per row (Spark
    does not inline an expensive expression into several places)."""
    merged = merged_state_sql("old_puts", "old_tombstones", "new_cells", retained_versions)
    typed = [
        f"{decode_value_sql(f'try_element_at(cells, {_sql_literal(column)}).value', encoding)} AS "
        f"`{typed_column_name(column)}`"
        for column, encoding in typed_columns.items()
    ]
    return [
        ["row_key", "old_puts", "old_tombstones", "old_source_ts_ms", "batch_ts_ms", f"{merged} AS _m"],
        ["row_key", "old_puts", "old_tombstones", "_m.puts AS puts", "_m.tombstones AS tombstones",
         "greatest(old_source_ts_ms, batch_ts_ms) AS source_ts_ms"],
        ["*", "size(puts) > 0 AS `exists`", f"{visible_cells_sql('puts')} AS cells",
         "old_puts IS NULL OR NOT (puts <=> old_puts AND tombstones <=> old_tombstones) AS changed"],
        ["*", *typed],
    ]  # fmt: skip


def merged_rows(joined: DataFrame, retained_versions: int, typed_columns: dict[str, str]) -> DataFrame:
    """(row_key, new_cells, batch_ts_ms, old_puts, old_tombstones, old_source_ts_ms) → every state
    column, `changed`, and the stored state each row was merged from (the MERGE's guard)."""
    for step in merge_steps(retained_versions, typed_columns):
        joined = joined.selectExpr(*step)
    return joined


def _sql_literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# A table's logged changes (the change log's columns) as (row_key, new_cells, batch_ts_ms): every cell
# of every change of a row, each with the change's position plus the cell's index (which breaks ties
# between two writes of one cell in the same change). Two projections, then a grouping by row.
CELL_STEPS = [
    ["unbase64(get_json_object(key, '$.row')) AS row_key", "source_ts_ms AS ts_ms", "pos AS event_pos",
     "posexplode(cells) AS (i, c)"],
    ["row_key", "ts_ms", "named_struct('family', unbase64(c.family), 'qualifier', unbase64(c.qualifier), "
     "'ts', c.ts, 'type', c.type, 'value', unbase64(c.value), 'pos', concat(event_pos, array(CAST(i AS BIGINT)))) "
     "AS cell"],
]  # fmt: skip
CELLS_BY_ROW = ["row_key", "collect_list(cell) AS new_cells", "max(ts_ms) AS batch_ts_ms"]


def cells_by_row(log_rows: DataFrame) -> DataFrame:
    """A table's logged changes as (row_key, new_cells, batch_ts_ms) (`CELL_STEPS`)."""
    for step in CELL_STEPS:
        log_rows = log_rows.selectExpr(*step)
    return log_rows.groupBy("row_key").agg(*(F.expr(e) for e in CELLS_BY_ROW[1:]))


# A state table's columns as `merged_rows` reads the stored side of a row.
STORED_FOR_MERGE = ["row_key", "puts AS old_puts", "tombstones AS old_tombstones", "source_ts_ms AS old_source_ts_ms"]


def stored_for_merge(state: DataFrame) -> DataFrame:
    return state.selectExpr(*STORED_FOR_MERGE)
