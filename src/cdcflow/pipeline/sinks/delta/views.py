"""Exact reads of merge-on-read state: a table's state plus the logged changes not folded yet.

`current_view(spark, state_path)` is the table as of the last batch the sink applied: the state
table as of its last fold, with every change the log holds after that fold applied the way the fold
would apply it (the same rules: `hbase_state.merged_rows` for HBase, the newest position per key for
MySQL). It needs nothing but the state path: the fold record beside the table names the log and the
version folded.

The record is read before the state table, so a fold that commits in between makes the view apply
some changes a second time, which leaves the same result (both merges are idempotent).
"""

from __future__ import annotations

from collections.abc import Iterator

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdcflow.events.cells import RowCells
from cdcflow.pipeline.sinks.delta import log as change_log
from cdcflow.pipeline.sinks.delta import mysql_typed as mt
from cdcflow.pipeline.sinks.delta.hbase_state import cells_by_row, hbase_state_schema, merged_rows, stored_for_merge
from cdcflow.pipeline.sinks.delta.records import FoldRecord, read_record
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn


def current_view(spark: SparkSession, state_path: str, include_deleted: bool = False) -> DataFrame:
    """The table's rows as of the sink's last applied batch; deleted rows (tombstones) only with
    `include_deleted`. A table written before merge-on-read (no fold record) is read as it is."""
    record = read_record(spark, state_path)
    exists = DeltaTable.isDeltaTable(spark, state_path)
    if record is None:
        if not exists:
            raise FileNotFoundError(f"{state_path}: neither a Delta table nor a state table cdcflow registered")
        return _without_deleted(spark.read.format("delta").load(state_path), include_deleted)
    version = change_log.latest_version(spark, record.log)
    pending = change_log.table_changes(
        spark, record.log, record.source, record.db, record.table, record.folded_version, version
    )
    state = spark.read.format("delta").load(state_path) if exists else None
    if record.layout == "hbase":
        view = _hbase_view(spark, state, pending, record)
    else:
        view = _mysql_view(state, pending, record)
    return _without_deleted(view, include_deleted)


def _without_deleted(rows: DataFrame, include_deleted: bool) -> DataFrame:
    if include_deleted:
        return rows
    if "exists" in rows.columns:
        return rows.where("exists")
    if mt.DELETED in rows.columns:
        return rows.where(~F.col(mt.DELETED))
    return rows.where(~F.col("deleted")) if "deleted" in rows.columns else rows


def _hbase_view(spark: SparkSession, state: DataFrame | None, pending: DataFrame, record: FoldRecord) -> DataFrame:
    schema = hbase_state_schema(record.typed_columns)
    if state is None:
        state = spark.createDataFrame([], schema)
    grouped = cells_by_row(pending)
    changed = merged_rows(
        grouped.join(stored_for_merge(state), "row_key", "left"), record.kept_versions, record.typed_columns
    ).select(*(F.col(f.name) for f in schema.fields))
    untouched = state.join(grouped.select("row_key"), "row_key", "left_anti")
    return untouched.unionByName(changed, allowMissingColumns=True)


def _mysql_view(state: DataFrame | None, pending: DataFrame, record: FoldRecord) -> DataFrame:
    latest = change_log.newest_row_changes(pending)
    if record.layout == "json":
        rows, pos, keys = latest, "pos", ["key"]
    else:
        columns = [MySqlColumn(**c) for c in record.mysql_columns]
        rows = mt.typed_rows(latest, columns).drop("_misfits", "_event_columns")
        pos, keys = mt.POS, mt.key_columns(columns)
    if state is None:
        return rows
    both = state.unionByName(rows, allowMissingColumns=True)
    newest = Window.partitionBy(*keys).orderBy(F.col(pos).desc())
    return both.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")


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
    size = 0
    if DeltaTable.isDeltaTable(spark, path):
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
