"""The history's rules as SQL text, each written once for the fold (`fold.py`) and the reads (`reads.py`).

- A **version** is what one transaction left of a key: the transaction's last change of the key (its position's
  first element names the transaction: the GTID sequence number on MariaDB, the size of the executed GTID set on
  MySQL). A change the capture delivered twice, or a transaction whose changes came in two batches, makes the
  same version. Deletes are versions too (op `d`, no row), truncates are versions of the empty key (op `t`).
- A version is **valid** from its position and source time up to the key's next version, or to the first
  truncate after it when that comes first; while neither exists it is current.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from cdcflow.pipeline.sinks.delta.layouts.mysql import position_sql
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord
from cdcflow.pipeline.sinks.delta.sql import delta_path, quoted, sql_string

# The history table: one row per version.
HISTORY = StructType(
    [
        StructField("key", StringType(), False),  # the primary-key columns as JSON; truncates: WHOLE_TABLE
        StructField("after", StringType()),  # the row image as JSON; null for a delete
        StructField("op", StringType()),
        StructField("pos", ArrayType(LongType())),  # valid from this position
        StructField("source_ts_ms", LongType()),  # and this source time
        StructField("valid_to_pos", ArrayType(LongType())),  # up to the next version or truncate (null: current)
        StructField("valid_to_ts_ms", LongType()),
    ]
)
# The history table as stored: a version, and its positions' first elements as scalars (Delta keeps no statistics
# of arrays; with these a read as of a position skips the files of versions that start after it or ended before).
STORED = StructType(
    [*HISTORY.fields, StructField("valid_from_seq", LongType()), StructField("valid_to_seq", LongType())]
)
SEQ_COLUMNS = ("valid_from_seq", "valid_to_seq")
VERSION = ("key", "after", "op", "pos", "source_ts_ms")
# The end columns of a version not ended (yet), typed: a bare NULL has no type for the MERGE.
NO_END = "CAST(NULL AS array<bigint>) AS valid_to_pos, CAST(NULL AS BIGINT) AS valid_to_ts_ms"
# A truncate as the fold record keeps it: (position, source time).
Truncate = tuple[list[int], Any]
# The type of a table's truncates as the validity rule reads them: sorted by position.
TRUNCATES_TYPE = "array<struct<pos:array<bigint>,ts:bigint>>"


def logged_sql(record: FoldRecord) -> str:
    """Every log row of the table (the log's current snapshot: compaction keeps the rows, only Change Data Feed
    needs the commits)."""
    return (
        f"SELECT * FROM {delta_path(record.log)} WHERE source_name = {sql_string(record.source)} "
        f"AND db = {sql_string(record.db)} AND `table` = {sql_string(record.table)}"
    )


def versions_sql(changes: str) -> str:
    """Log rows (a query) as versions: key, after, op, pos, source_ts_ms, and `_changes`, the log rows it
    stands for."""
    last = "named_struct('after', after, 'op', op, 'pos', pos, 'source_ts_ms', source_ts_ms)"
    return (
        "SELECT key, _v.after, _v.op, _v.pos, _v.source_ts_ms, _changes FROM (SELECT "
        f"CASE WHEN op = 't' THEN {sql_string(WHOLE_TABLE)} ELSE key END AS key, max_by({last}, pos) AS _v, "
        f"count(*) AS _changes FROM ({changes}) GROUP BY 1, pos[0])"
    )


def one_per_transaction_sql(rows: str, prefer: str | None = None) -> str:
    """`rows` (a query with VERSION columns and more) reduced to one row per key and transaction: the newest by
    position; between equal positions, the one with `prefer` true (a boolean column) first."""
    order = "pos DESC" + (f", {prefer} DESC" if prefer else "")
    return (
        f"SELECT * EXCEPT (_n) FROM (SELECT *, row_number() OVER (PARTITION BY key, pos[0] ORDER BY {order}) AS _n "
        f"FROM ({rows})) WHERE _n = 1"
    )


def valid_to_sql(rows: str, next_version: str, truncates: str) -> str:
    """`rows` (a query) with `valid_to_pos` and `valid_to_ts_ms` (replacing any it has): the version ends at
    `next_version` (an SQL struct<pos, ts>, null when none), or at the first of `truncates` (an SQL expression of
    TRUNCATES_TYPE) after its position when that comes first."""
    # (a lambda runs interpreted, row by row: skipped when there are no truncates, the common case)
    cut = f"CASE WHEN size({truncates}) > 0 THEN try_element_at(filter({truncates}, t -> t.pos > pos), 1) END"
    ends = "CASE WHEN _cut IS NOT NULL AND (_next IS NULL OR _cut.pos < _next.pos) THEN _cut ELSE _next END"
    return (
        "SELECT * EXCEPT (_next, _cut, _end), _end.pos AS valid_to_pos, _end.ts AS valid_to_ts_ms FROM ("
        f"SELECT *, {ends} AS _end FROM (SELECT * EXCEPT (valid_to_pos, valid_to_ts_ms), {next_version} AS _next, "
        f"{cut} AS _cut FROM ({rows})))"
    )


def following_version() -> str:
    """The key's next version (struct<pos, ts>) as a window expression over one key's versions."""
    return "lead(named_struct('pos', pos, 'ts', source_ts_ms)) OVER (PARTITION BY key ORDER BY pos)"


def stored_end() -> str:
    """The end a stored row holds (struct<pos, ts>, null while current)."""
    return "CASE WHEN valid_to_pos IS NULL THEN NULL ELSE named_struct('pos', valid_to_pos, 'ts', valid_to_ts_ms) END"


def truncates_literal(truncates: Sequence[Truncate]) -> str:
    """Truncates (position, source time) as an SQL value of TRUNCATES_TYPE, sorted by position."""
    items = []
    for pos, ts in sorted(truncates, key=lambda t: list(t[0])):
        ts_sql = "NULL" if ts is None else int(ts)
        items.append(f"named_struct('pos', {position_sql(pos)}, 'ts', CAST({ts_sql} AS BIGINT))")
    return f"CAST(array({', '.join(items)}) AS {TRUNCATES_TYPE})"


def truncates_relation_sql(truncates: Sequence[Truncate]) -> str:
    """Truncates (position, source time) as a query with key (WHOLE_TABLE), pos, source_ts_ms."""
    rows = [
        f"SELECT {sql_string(WHOLE_TABLE)} AS key, {position_sql(pos)} AS pos, "
        f"CAST({'NULL' if ts is None else int(ts)} AS BIGINT) AS source_ts_ms"
        for pos, ts in truncates
    ]
    empty = (
        f"SELECT {sql_string(WHOLE_TABLE)} AS key, CAST(NULL AS array<bigint>) AS pos, CAST(NULL AS BIGINT) "
        "AS source_ts_ms WHERE false"
    )
    return " UNION ALL ".join(rows) if rows else empty


def truncates_of_sql(*relations: str) -> str:
    """A one-row query: `_truncates`, the truncates of `relations` (queries with key, pos, source_ts_ms) as
    TRUNCATES_TYPE. Joined to the rows that read it (Spark takes no subquery inside a higher-order function)."""
    union = " UNION ALL ".join(
        f"SELECT pos, source_ts_ms FROM ({r}) WHERE key = {sql_string(WHOLE_TABLE)}" for r in relations
    )
    return (
        f"SELECT CAST(array_sort(collect_list(named_struct('pos', pos, 'ts', source_ts_ms))) AS {TRUNCATES_TYPE}) "
        f"AS _truncates FROM ({union})"
    )


def with_truncates_sql(rows: str, truncates: str) -> str:
    """`rows` (a query) with the column `_truncates` of `truncates` (a `truncates_of_sql` query)."""
    return f"SELECT r.*, t._truncates FROM ({rows}) r CROSS JOIN ({truncates}) t"


def with_seqs_sql(rows: str) -> str:
    """`rows` (a query of HISTORY rows) as stored: with `valid_from_seq` and `valid_to_seq`."""
    return f"SELECT *, pos[0] AS valid_from_seq, valid_to_pos[0] AS valid_to_seq FROM ({rows})"


def stored_sql(history: str, at_seq: int | None = None) -> str:
    """The history table at `history` (a path) as a query of HISTORY rows; with `at_seq`, only versions that can be
    valid at a position whose first element is `at_seq`. A stored end is never before the true one (a change that
    came late only ends a version earlier), so this keeps every version valid there; rows stored before the seq
    columns existed (null) are kept."""
    columns = ", ".join(quoted(f.name) for f in HISTORY.fields)
    if at_seq is None:
        return f"SELECT {columns} FROM {delta_path(history)}"
    at = int(at_seq)
    return (
        f"SELECT {columns} FROM {delta_path(history)} WHERE (valid_from_seq IS NULL OR valid_from_seq <= {at}) "
        f"AND (valid_to_seq IS NULL OR valid_to_seq >= {at})"
    )
