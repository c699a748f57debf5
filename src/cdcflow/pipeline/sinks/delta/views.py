"""Exact reads of merge-on-read state: a table's state plus the logged changes not folded yet.

`current_view(spark, state_path)` is the table as of the last batch the sink applied: the state table as of
its last fold, with every change the log holds from that fold's version on applied the way the fold applies
it. Each layout writes its view beside its fold (`layouts`), from the same rules. It needs nothing but the
state path: the fold record beside the table names the log, the layout and the version folded.

The view is SQL text (`view_sql`), so a catalog can store it (`catalog.register`): it reads the log's Change
Data Feed from the folded version *on* (inclusive: that version always exists, and a version applied twice
leaves the same result, both merges being idempotent), up to whatever the log holds when it is queried. The
record is read before the state table, so a fold that commits in between makes the view apply some changes a
second time, which also leaves the same result.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from cdcflow.events.cells import RowCells
from cdcflow.pipeline.sinks.delta.layouts import layout_of
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.delta.records import read_record
from cdcflow.pipeline.sinks.delta.sql import delta_path, quoted, without_deleted
from cdcflow.pipeline.sinks.delta.tables import table_size


def current_view(spark: SparkSession, state_path: str, include_deleted: bool = False) -> DataFrame:
    """The table's rows as of the sink's last applied batch; deleted rows (tombstones of tables
    folded before deletes were deletes, HBase rows whose every cell is deleted) only with
    `include_deleted`. A table written before merge-on-read (no fold record) is read as it is."""
    return spark.sql(view_sql(spark, state_path, include_deleted))


def view_sql(spark: SparkSession, state_path: str, include_deleted: bool = False) -> str:
    """`current_view` as a SQL query over paths (Delta paths and `table_changes_by_path`): the view of the
    table's layout (`layouts`)."""
    record = read_record(spark, state_path)
    state = spark.read.format("delta").load(state_path).schema if DeltaTable.isDeltaTable(spark, state_path) else None
    if record is None:
        if state is None:
            raise FileNotFoundError(f"{state_path}: neither a Delta table nor a state table cdcflow registered")
        return without_deleted(f"SELECT * FROM {delta_path(state_path)}", state.fieldNames(), include_deleted)
    return layout_of(record.layout).view_sql(spark, state_path, state, record, include_deleted)


def _verify_selection(name: str, data_type: str) -> str:
    """How `mysql_view_rows` reads a typed column: no time zone and no calendar between Delta and Python."""
    q = quoted(name)
    t = data_type.lower()
    if t == "date":
        return f"unix_date({q})"  # epoch days
    if t == "timestamp":
        return f"unix_micros({q})"  # an instant: epoch microseconds
    if t == "datetime":
        return f"date_format({q}, 'yyyy-MM-dd HH:mm:ss.SSSSSS')"  # a wall clock: its text
    return q


def mysql_view_rows(
    spark: SparkSession, state_path: str, columns: Sequence[tuple[str, str]], key_range: KeyRange | None = None
) -> tuple[bool, Iterator[dict[str, Any]]]:
    """The rows of a MySQL state table's current view as `cdcflow.verify.delta` compares them, and whether the
    table is typed. Typed: {column: value} for the `columns` (name, MySQL data type) the table has, dates as
    epoch days, TIMESTAMP as epoch microseconds, DATETIME as text. The JSON layout: {"after": the row's image}.
    `key_range` (typed tables): only the rows whose key is after `low` and up to `high`, in key order."""
    view = current_view(spark, state_path)
    if mt.POS not in view.columns:
        return False, (r.asDict() for r in view.select("after").toLocalIterator())
    if key_range is not None and all(k in view.columns for k in key_range.keys):
        types = {f.name: f.dataType for f in view.schema.fields}
        typed_keys = [(F.col(quoted(k)), types[k]) for k in key_range.keys]
        if key_range.low is not None:
            view = view.where(_key_after(typed_keys, key_range.low))
        if key_range.high is not None:
            view = view.where(~_key_after(typed_keys, key_range.high))
    present = [(n, d) for n, d in columns if n in view.columns]
    typed = view.selectExpr(*(f"{_verify_selection(n, d)} AS {quoted(n)}" for n, d in present))
    return True, (r.asDict() for r in typed.toLocalIterator())


@dataclass(frozen=True)
class KeyRange:
    """Keys after `low` (None: from the first) up to `high` (None: to the last), compared column by column in
    `keys` order."""

    keys: tuple[str, ...]
    low: tuple[Any, ...] | None
    high: tuple[Any, ...] | None


def _key_after(columns: Sequence[tuple[Column, DataType]], values: tuple[Any, ...]) -> Column:
    """The key (columns, in order) comes after `values`: (a, b) > (x, y) as a OR of prefixes."""
    ors: list[Column] = []
    for i, (column, data_type) in enumerate(columns):
        term = column > F.lit(values[i]).cast(data_type)
        for prior, (earlier, earlier_type) in enumerate(columns[:i]):
            term = term & (earlier == F.lit(values[prior]).cast(earlier_type))
        ors.append(term)
    return functools.reduce(lambda a, b: a | b, ors)


_VERIFY_PIECE_BYTES = 2 * 2**20  # compressed Parquet: several times that once decoded


def hbase_state_rows(
    spark: SparkSession, path: str, max_versions: int = 1, start_row: bytes = b"", stop_row: bytes = b""
) -> Iterator[RowCells]:
    """The rows of an HBase state table's current view as `cdcflow.verify.hbase` compares them:
    row-key order, the newest `max_versions` visible cells per column (the state keeps more:
    retained_versions), rows whose cells are all deleted left out; only keys from `start_row` up to
    `stop_row` (b"": the end). Spark compares binary keys byte by byte, unsigned, as HBase orders them."""
    table = current_view(spark, path)
    if start_row:
        table = table.where(F.col("row_key") >= F.lit(bytearray(start_row)))
    if stop_row:
        table = table.where(F.col("row_key") < F.lit(bytearray(stop_row)))
    # toLocalIterator brings one partition at a time through the driver: sorted into pieces of about
    # _VERIFY_PIECE_BYTES of table files each, so a large table never needs a large driver.
    known = table_size(spark, path)  # (from Delta's checksum, no Spark job, where one was written)
    size = known.bytes if known is not None else 0
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
