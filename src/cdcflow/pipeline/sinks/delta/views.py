"""Exact reads of merge-on-read state: a table's state plus the logged changes not folded yet.

`current_view(spark, state_path)` is the table as of the last batch the sink applied: the state
table as of its last fold, with every change the log holds from that fold's version on applied the
way the fold applies it (the same rules: `hbase_state.merge_steps` for HBase; for MySQL the newest
position per key, changes older than their key's recorded delete or the table's newest truncate
dropped). It needs nothing but the state path: the fold record beside the table names the log and
the version folded.

The view is SQL text (`view_sql`), so a catalog can store it (`catalog.register`): it reads the log's
Change Data Feed from the folded version *on* (inclusive: that version always exists, and a version
applied twice leaves the same result, both merges being idempotent), up to whatever the log holds
when it is queried. The record is read before the state table, so a fold that commits in between
makes the view apply some changes a second time, which also leaves the same result.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from cdcflow.events.cells import RowCells
from cdcflow.pipeline.sinks.delta import mysql_typed as mt
from cdcflow.pipeline.sinks.delta.hbase_state import (
    CELL_STEPS,
    CELLS_BY_ROW,
    STORED_FOR_MERGE,
    hbase_state_schema,
    merge_steps,
)
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord, deletes_path, read_record
from cdcflow.pipeline.sinks.delta.state_sql import visible_cells_sql
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

_JSON_COLUMNS = ["key", "after", "deleted", "op", "pos", "source_ts_ms"]


def current_view(spark: SparkSession, state_path: str, include_deleted: bool = False) -> DataFrame:
    """The table's rows as of the sink's last applied batch; deleted rows (tombstones of tables
    folded before deletes were deletes, HBase rows whose every cell is deleted) only with
    `include_deleted`. A table written before merge-on-read (no fold record) is read as it is."""
    return spark.sql(view_sql(spark, state_path, include_deleted))


def view_sql(spark: SparkSession, state_path: str, include_deleted: bool = False) -> str:
    """`current_view` as a SQL query over paths (Delta paths and `table_changes_by_path`)."""
    record = read_record(spark, state_path)
    state = _state_columns(spark, state_path)
    if record is None:
        if state is None:
            raise FileNotFoundError(f"{state_path}: neither a Delta table nor a state table cdcflow registered")
        return _without_deleted(f"SELECT * FROM {delta_path(state_path)}", state.fieldNames(), include_deleted)
    if record.layout == "hbase":
        return _hbase_view(state_path, state, record, include_deleted)
    return _mysql_view(spark, state_path, state, record, include_deleted)


def delta_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def _state_columns(spark: SparkSession, state_path: str) -> StructType | None:
    if not DeltaTable.isDeltaTable(spark, state_path):
        return None
    return spark.read.format("delta").load(state_path).schema


def _pending_sql(record: FoldRecord) -> str:
    """The table's log rows from its folded version on (Change Data Feed: only those commits' files)."""
    start = max(record.folded_version, 0)
    where = " AND ".join(
        f"{mt.quoted(c)} = {mt.sql_string(v)}"
        for c, v in (("source_name", record.source), ("db", record.db), ("table", record.table))
    )
    return (
        f"SELECT * FROM table_changes_by_path({mt.sql_string(record.log)}, {start}) "
        f"WHERE _change_type = 'insert' AND {where}"
    )


def _steps(relation: str, steps: Sequence[Sequence[str]]) -> str:
    """Projections applied one over the other to `relation` (a query), as one query."""
    query = relation
    for step in steps:
        query = f"SELECT {', '.join(step)} FROM ({query})"
    return query


def _empty(schema: StructType) -> str:
    columns = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {mt.quoted(f.name)}" for f in schema.fields)
    return f"SELECT {columns} WHERE false"


def _without_deleted(query: str, columns: Sequence[str], include_deleted: bool) -> str:
    if include_deleted:
        return query
    for flag in ("exists", mt.DELETED, "deleted"):
        if flag in columns:
            kept = "coalesce(`exists`, false)" if flag == "exists" else f"NOT coalesce({mt.quoted(flag)}, false)"
            return f"SELECT * FROM ({query}) WHERE {kept}"
    return query


def _hbase_view(state_path: str, state: StructType | None, record: FoldRecord, include_deleted: bool) -> str:
    schema = hbase_state_schema(record.typed_columns)
    columns = ", ".join(mt.quoted(f.name) for f in schema.fields)
    stored = f"SELECT {columns} FROM {delta_path(state_path)}" if state is not None else _empty(schema)
    grouped = f"SELECT {', '.join(CELLS_BY_ROW)} FROM ({_steps(_pending_sql(record), CELL_STEPS)}) GROUP BY row_key"
    joined = (
        f"SELECT g.row_key, g.new_cells, g.batch_ts_ms, s.old_puts, s.old_tombstones, s.old_source_ts_ms "
        f"FROM ({grouped}) g LEFT JOIN ({_steps(stored, [STORED_FOR_MERGE])}) s ON g.row_key = s.row_key"
    )
    changed = _steps(joined, [*merge_steps(record.kept_versions, record.typed_columns), [columns]])
    untouched = f"SELECT {columns} FROM ({stored}) s LEFT ANTI JOIN ({grouped}) g ON s.row_key = g.row_key"
    rows = _unexpired(f"{untouched} UNION ALL {changed}", record, columns)
    return _without_deleted(rows, ["exists"], include_deleted)


def _unexpired(rows: str, record: FoldRecord, columns: str) -> str:
    """HBase rows without the cells HBase no longer shows, neither of which any change says: the cells past
    their family's TTL at the time of the query (expiry writes nothing to the WAL), and those older than the
    table's newest truncate (folded, or still in the log: the peer's op t events)."""
    expired = " ".join(
        f"WHEN X'{family.encode().hex()}' THEN c.ts < unix_millis(current_timestamp()) - {int(ttl) * 1000}"
        for family, ttl in sorted(record.family_ttls.items())
    )
    truncates = f"SELECT max(pos[0]) FROM ({_pending_sql(record)}) WHERE op = 't'"
    floor = f"greatest({int(record.emptied_before_ts or -1)}, coalesce(({truncates}), -1)) AS _emptied_before"
    hidden = "c.ts < _emptied_before" + (f" OR (CASE c.family {expired} ELSE false END)" if expired else "")
    with_floor = f"SELECT r.*, f._emptied_before FROM ({rows}) r CROSS JOIN (SELECT {floor}) f"
    return hiding(with_floor, hidden, record.kept_versions, record.typed_columns, columns)


def hiding(rows: str, hidden: str, kept_versions: int, typed_columns: dict[str, str], columns: str,
           tombstones: str = "tombstones") -> str:  # fmt: skip
    """HBase state rows (a query) without the put versions `hidden` (a predicate on cell `c`) names, their
    visible cells and typed columns computed again."""
    live = f"SELECT row_key, filter(puts, c -> NOT ({hidden})) AS puts, {tombstones} AS tombstones, " \
           f"source_ts_ms FROM ({rows})"  # fmt: skip
    visible = ["row_key", "size(puts) > 0 AS `exists`", f"{visible_cells_sql('puts')} AS cells", "puts",
               "tombstones", "source_ts_ms"]  # fmt: skip
    return _steps(live, [visible, merge_steps(kept_versions, typed_columns)[-1], [columns]])


def emptied_rows_sql(state_path: str, before_ts: int, kept_versions: int, typed_columns: dict[str, str]) -> str:
    """A state table as it is once every cell older than `before_ts` is gone (puts and delete markers; a row
    left with neither is gone too): what a fold writes for the source's truncate."""
    schema = hbase_state_schema(typed_columns)
    columns = ", ".join(mt.quoted(f.name) for f in schema.fields)
    older = f"c.ts < {int(before_ts)}"
    rows = hiding(f"SELECT {columns} FROM {delta_path(state_path)}", older, kept_versions, typed_columns, columns,
                  f"filter(tombstones, c -> NOT ({older}))")  # fmt: skip
    return f"SELECT * FROM ({rows}) WHERE size(puts) > 0 OR size(tombstones) > 0"


def _mysql_view(
    spark: SparkSession, state_path: str, state: StructType | None, record: FoldRecord, include_deleted: bool
) -> str:
    pending = _pending_sql(record)
    newest_per_key = (
        "SELECT key, after, op = 'd' AS deleted, op, pos, source_ts_ms FROM (SELECT *, row_number() OVER "
        f"(PARTITION BY key ORDER BY pos DESC) AS _n FROM ({pending}) WHERE op != 't') WHERE _n = 1"
    )
    # Truncates: the newest one recorded by a fold (the deletes table's WHOLE_TABLE row) or not folded yet.
    truncates = f"SELECT pos FROM ({pending}) WHERE op = 't'"
    deletes = deletes_path(state_path)
    if DeltaTable.isDeltaTable(spark, deletes):
        newest_per_key = (
            f"SELECT * FROM ({newest_per_key}) l WHERE NOT EXISTS (SELECT 1 FROM {delta_path(deletes)} d "
            "WHERE d.key = l.key AND d.pos > l.pos)"
        )
        truncates += f" UNION ALL SELECT pos FROM {delta_path(deletes)} WHERE key = {mt.sql_string(WHOLE_TABLE)}"
    truncated_at = f"coalesce((SELECT max(pos) FROM ({truncates})), array(CAST(-1 AS BIGINT)))"
    if record.layout == "json":
        names, pos, keys, rows = _JSON_COLUMNS, "pos", ["key"], newest_per_key
    elif not record.mysql_columns:  # only truncates so far (a table dropped before a row event described it)
        return f"SELECT NULL AS {mt.quoted(mt.DELETED)} WHERE false"
    else:
        shape = [MySqlColumn(**c) for c in record.mysql_columns]
        names = [*(c.name for c in shape), mt.DELETED, mt.OP, mt.POS, mt.SOURCE_TS]
        pos, keys = mt.POS, mt.key_columns(shape)
        rows = _steps(newest_per_key, [["*", mt.VALUES_SQL], mt.typed_columns_sql(shape)])
    columns = ", ".join(mt.quoted(n) for n in names)
    if state is None:
        return _without_deleted(
            f"SELECT {columns} FROM ({rows}) WHERE {mt.quoted(pos)} > {truncated_at}", names, include_deleted
        )
    have = {n.lower() for n in state.fieldNames()}
    from_state = ", ".join(mt.quoted(n) if n.lower() in have else f"NULL AS {mt.quoted(n)}" for n in names)
    both = f"SELECT {from_state} FROM {delta_path(state_path)} UNION ALL SELECT {columns} FROM ({rows})"
    partition = ", ".join(mt.quoted(k) for k in keys)
    newest = (
        f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {partition} ORDER BY {mt.quoted(pos)} "
        f"DESC) AS _n FROM ({both})) WHERE _n = 1 AND {mt.quoted(pos)} > {truncated_at}"
    )
    return _without_deleted(newest, names, include_deleted)


def _verify_selection(name: str, data_type: str) -> str:
    """How `mysql_view_rows` reads a typed column: no time zone and no calendar between Delta and Python."""
    q = mt.quoted(name)
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
        typed_keys = [(F.col(mt.quoted(k)), types[k]) for k in key_range.keys]
        if key_range.low is not None:
            view = view.where(_key_after(typed_keys, key_range.low))
        if key_range.high is not None:
            view = view.where(~_key_after(typed_keys, key_range.high))
    present = [(n, d) for n, d in columns if n in view.columns]
    typed = view.selectExpr(*(f"{_verify_selection(n, d)} AS {mt.quoted(n)}" for n, d in present))
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
