"""Reads of a table's history: every version with its validity (`history_sql`), and the table as it was at a
position, a GTID or a source time (`as_of_sql`). Both are exact up to the sink's last applied batch: the stored
history plus the changes logged since the last fold, ended the way the fold ends them (`versions.py`). Like the
current view, they are SQL text over paths, so a catalog can keep them.

Rows come in the table's layout with the source's columns as the table has them now (`record.mysql_columns`):
a column added later is null in older versions, a dropped one is left out.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.history.append import CLOSED, open_versions_sql
from cdcflow.pipeline.sinks.delta.history.versions import (
    HISTORY,
    NO_END,
    following_version,
    logged_sql,
    one_per_transaction_sql,
    stored_end,
    stored_sql,
    truncates_of_sql,
    truncates_relation_sql,
    valid_to_sql,
    versions_sql,
    with_truncates_sql,
)
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.delta.layouts.mysql import position_sql
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord, deletes_path, history_path, read_record
from cdcflow.pipeline.sinks.delta.sql import delta_path, empty, pending_sql, quoted, sql_string, steps
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

log = logging.getLogger(__name__)

_EMPTY = sql_string(WHOLE_TABLE)
# The history view's own columns, after the source's.
KEY = "_cdcflow_key"
VALID_FROM_POS, VALID_FROM = "_cdcflow_valid_from_pos", "_cdcflow_valid_from"
VALID_TO_POS, VALID_TO = "_cdcflow_valid_to_pos", "_cdcflow_valid_to"
CURRENT = "_cdcflow_current"
_MAX = 2**63 - 1


def history_record(spark: SparkSession, state_path: str) -> FoldRecord:
    """The fold record of a table that keeps history; refused naming why when it does not."""
    record = read_record(spark, state_path)
    if record is None:
        raise FileNotFoundError(f"{state_path}: no state table cdcflow registered there")
    if record.layout == "hbase":
        raise ConfigError(f"{state_path}: an HBase table; history is kept for MySQL tables (HBase keeps cell "
                          "versions in the state table: retained_versions)")  # fmt: skip
    if not record.history:
        raise ConfigError(f"{state_path}: no history is kept for {record.db}.{record.table}; set history: true (or "
                          "history_tables) in the Delta sink's options, and it is kept from the next fold on, with "
                          "every change the change log holds")  # fmt: skip
    return record


def versions_with_ends_sql(spark: SparkSession, state_path: str, record: FoldRecord, at_seq: int | None = None) -> str:
    """Every version of the table (no truncates) with its end, exact up to the last applied batch: the stored
    versions, and the changes logged from the folded version on (inclusive, as the current view) merged in. With
    `at_seq`, the stored versions read are those that can be valid at a position whose first element it is (the
    rest are left out: every version valid there keeps its end)."""
    stored_path = history_path(state_path)
    if record.history_seeded and DeltaTable.isDeltaTable(spark, stored_path):
        stored = stored_versions_sql(spark, state_path, record, at_seq)
        pending = versions_sql(pending_sql(record, record.folded_version))
        stored_truncates = truncates_relation_sql([(list(pos), ts) for pos, ts in record.history_truncates])
    else:  # not folded with history yet: every change the log holds
        stored_truncates = empty(HISTORY)
        stored = f"SELECT *, true AS _real FROM ({stored_truncates})"
        pending = versions_sql(logged_sql(record))
    truncates = truncates_of_sql(stored_truncates, pending)
    # The keys changed since the last fold are few against the stored versions: broadcast, so that neither join
    # moves the history through a shuffle. (Before the history is seeded, every logged change is pending.)
    hint = "/*+ BROADCAST(n) */ " if record.history_seeded else ""
    touched = f"SELECT DISTINCT key FROM ({pending}) WHERE key != {_EMPTY}"
    redo = (
        f"SELECT {hint}h.key, h.after, h.op, h.pos, h.source_ts_ms, h._real FROM ({stored}) h LEFT SEMI JOIN "
        f"({touched}) n ON h.key = n.key UNION ALL SELECT key, after, op, pos, source_ts_ms, true FROM ({pending}) "
        f"WHERE key != {_EMPTY}"
    )
    redone = valid_to_sql(
        with_truncates_sql(f"SELECT *, {NO_END} FROM ({one_per_transaction_sql(redo, '_real')})", truncates),
        following_version(), "_truncates",
    )  # fmt: skip
    # The stored ends stand (the fold ended them by every truncate it knew), but for a truncate logged since.
    kept = valid_to_sql(
        with_truncates_sql(
            f"SELECT {hint}h.* FROM ({stored}) h LEFT ANTI JOIN ({touched}) n ON h.key = n.key WHERE h.key != {_EMPTY}",
            truncates_of_sql(pending),
        ),
        stored_end(), "_truncates",
    )  # fmt: skip
    columns = ", ".join(f.name for f in HISTORY.fields)
    return f"SELECT {columns} FROM ({redone}) UNION ALL SELECT {columns} FROM ({kept})"


def stored_versions_sql(spark: SparkSession, state_path: str, record: FoldRecord, at_seq: int | None = None) -> str:
    """The versions the fold has stored (HISTORY rows and `_real`), with `at_seq` only those that can be valid at a
    position whose first element it is. Format 1: the history table. Format 2 (`append.py`): its closed versions,
    the state table's rows as of the record's state version as the open ones, the recorded deletes, and a delete
    (op `d`, `_real` false) at each closed version's end: a stored end is a delete, a truncate or the key's next
    version (which, being real, is preferred over it), so ends computed again over these keep the deletes."""
    stored = stored_sql(history_path(state_path), at_seq)
    if record.history_format < 2:
        return f"SELECT *, true AS _real FROM ({stored})"
    columns = ", ".join(f.name for f in HISTORY.fields)
    closed = f"SELECT {columns} FROM ({stored}) WHERE {CLOSED}"
    # (the deletes of every closed version, not only of those valid at `at_seq`: a change logged since the last
    # fold may start a version before a delete that ended an earlier one)
    every_closed = f"SELECT {columns} FROM ({stored_sql(history_path(state_path))}) WHERE {CLOSED}"
    parts = [
        f"SELECT *, true AS _real FROM ({closed})",
        f"SELECT key, CAST(NULL AS STRING) AS after, 'd' AS op, valid_to_pos AS pos, valid_to_ts_ms AS source_ts_ms, "
        f"{NO_END}, false AS _real FROM ({every_closed})",
    ]
    upto = f" AND pos[0] <= {int(at_seq)}" if at_seq is not None else ""
    if record.history_state_version is not None and DeltaTable.isDeltaTable(spark, state_path):
        version = int(record.history_state_version)
        present = {
            c.lower(): c for c in spark.read.format("delta").option("versionAsOf", version).load(state_path).columns
        }
        shape = [
            dataclasses.replace(c, name=present[c.name.lower()]) for c in _shape(record) if c.name.lower() in present
        ]
        state = f"SELECT * FROM {delta_path(state_path)} VERSION AS OF {version} WHERE {mt.KEY_TEXT} IS NOT NULL"
        rows = open_versions_sql(state, shape, mt.IMAGE in present)
        parts.append(f"SELECT *, {NO_END}, true AS _real FROM ({rows}) WHERE true{upto}")
    deletes = deletes_path(state_path)
    if DeltaTable.isDeltaTable(spark, deletes):  # (a delete newer than every change of its key is kept only here)
        parts.append(f"SELECT key, CAST(NULL AS STRING) AS after, 'd' AS op, pos, source_ts_ms, {NO_END}, true AS "
                     f"_real FROM {delta_path(deletes)} WHERE key != {_EMPTY}")  # fmt: skip
    return " UNION ALL ".join(f"SELECT {columns}, _real FROM ({p})" for p in parts)


def _shape(record: FoldRecord) -> list[MySqlColumn]:
    return [MySqlColumn(**c) for c in record.mysql_columns]


def history_sql(spark: SparkSession, state_path: str, track_history_on: Sequence[str] | None = None) -> str:
    """Every version of the table's rows (SCD type 2): the source's columns, `_cdcflow_op`, valid from
    (`_cdcflow_valid_from_pos`, `_cdcflow_valid_from`: a timestamp of the source time) up to
    (`_cdcflow_valid_to_pos`, `_cdcflow_valid_to`; null while current), and `_cdcflow_current`. A delete ends a
    version and starts none. `track_history_on` (default: the table's option; None: every column): consecutive
    versions that differ only in other columns are one version, with the newest values."""
    record = history_record(spark, state_path)
    tracked = list(track_history_on if track_history_on is not None else record.track_history_on or [])
    rows = f"SELECT * FROM ({versions_with_ends_sql(spark, state_path, record)}) WHERE op != 'd'"
    validity = [
        f"key AS {KEY}", f"op AS {quoted('_cdcflow_op')}", f"pos AS {VALID_FROM_POS}",
        f"timestamp_millis(source_ts_ms) AS {VALID_FROM}", f"valid_to_pos AS {VALID_TO_POS}",
        f"timestamp_millis(valid_to_ts_ms) AS {VALID_TO}", f"valid_to_pos IS NULL AS {CURRENT}",
    ]  # fmt: skip
    if record.layout == "typed":
        shape = _shape(record)
        if not shape:
            return f"SELECT NULL AS {quoted(KEY)} WHERE false"
        known = {c.name.lower(): c.name for c in shape}
        missing = [c for c in tracked if c.lower() not in known]
        if missing:
            raise ConfigError(f"{state_path}: track_history_on names {missing}, which {record.db}.{record.table} does "
                              f"not have (its columns: {[c.name for c in shape]})")  # fmt: skip
        tracked_sql = [quoted(known[c.lower()]) for c in tracked]
        shown = steps(rows, [["*", mt.VALUES_SQL], [*mt.source_columns_sql(shape), *validity]])
    else:
        tracked_sql = [f"get_json_object(after, {sql_string('$.' + c)})" for c in tracked]
        shown = f"SELECT key, after, {', '.join(validity)} FROM ({rows})"
    if tracked_sql:
        shown = _collapsed(shown, tracked_sql)
    return f"SELECT * EXCEPT ({KEY}) FROM ({shown})"


def _collapsed(rows: str, tracked: Sequence[str]) -> str:
    """Versions that follow one another without a gap (no delete or truncate between) and agree on every
    `tracked` expression made one: valid from the first, to the last, with the last one's values."""
    window = f"PARTITION BY {KEY} ORDER BY {VALID_FROM_POS}"
    same = " AND ".join([f"lag({VALID_TO_POS}) OVER ({window}) <=> {VALID_FROM_POS}",
                         *(f"lag({t}) OVER ({window}) <=> {t}" for t in tracked)])  # fmt: skip
    starts = f"SELECT *, CASE WHEN {same} THEN 0 ELSE 1 END AS _starts FROM ({rows})"
    numbered = f"SELECT *, sum(_starts) OVER ({window} ROWS UNBOUNDED PRECEDING) AS _version FROM ({starts})"
    last = f"max_by(struct(* EXCEPT ({KEY}, _starts, _version)), {VALID_FROM_POS})"
    first = f"min_by(named_struct('pos', {VALID_FROM_POS}, 'at', {VALID_FROM}), {VALID_FROM_POS})"
    merged = f"SELECT {KEY}, {last} AS _last, {first} AS _first FROM ({numbered}) GROUP BY {KEY}, _version"
    return (
        f"SELECT {KEY}, _last.* EXCEPT ({VALID_FROM_POS}, {VALID_FROM}), _first.pos AS {VALID_FROM_POS}, "
        f"_first.at AS {VALID_FROM} FROM ({merged})"
    )


def as_of_sql(
    spark: SparkSession, state_path: str, position: Sequence[int] | None = None, source_ts_ms: int | None = None
) -> str:
    """The table's rows as they were at a source position (every change up to it applied; a position
    comparing element by element, like `pos`) or at a source time (every change whose source time is at most
    `source_ts_ms`), in the columns of its current view."""
    if (position is None) == (source_ts_ms is None):
        raise ValueError("give a position or a source time, not both")
    record = history_record(spark, state_path)
    if position is not None:
        at = position_sql(list(position))
        valid = f"pos <= {at} AND (valid_to_pos IS NULL OR valid_to_pos > {at})"
    else:
        at = f"CAST({int(source_ts_ms or 0)} AS BIGINT)"
        valid = f"source_ts_ms <= {at} AND (valid_to_ts_ms IS NULL OR valid_to_ts_ms > {at})"
    at_seq = int(position[0]) if position is not None and position else None
    if at_seq is not None and _stored_alone_answer(spark, state_path, record, at_seq):
        stored = stored_versions_sql(spark, state_path, record, at_seq)
        versions = f"SELECT * FROM ({stored}) WHERE key != {_EMPTY}"
    else:
        versions = versions_with_ends_sql(spark, state_path, record, at_seq)
    rows = f"SELECT * FROM ({versions}) WHERE op != 'd' AND {valid}"
    if record.layout == "typed":
        shape = _shape(record)
        if not shape:
            return f"SELECT NULL AS {quoted(mt.DELETED)} WHERE false"
        return steps(rows, [["*", mt.VALUES_SQL], mt.typed_columns_sql(shape)])
    return f"SELECT key, after, op = 'd' AS deleted, op, pos, source_ts_ms FROM ({rows})"


def _stored_alone_answer(spark: SparkSession, state_path: str, record: FoldRecord, at_seq: int) -> bool:
    """Whether the stored versions alone give the table as of a position in transaction `at_seq`: true when every
    change logged since the last fold (truncates included) is of a later transaction. Such a change starts no
    version valid there, and it can only end a stored version at its own position, after the read's, so the
    stored ends decide the same rows. (Reads as of a time have no such test: source times may go backwards.)"""
    if not record.history_seeded or not DeltaTable.isDeltaTable(spark, history_path(state_path)):
        return False
    pending = pending_sql(record, record.folded_version)
    earlier = spark.sql(f"SELECT 1 FROM ({pending}) WHERE pos[0] <= {int(at_seq)} LIMIT 1").isEmpty()
    if earlier:
        log.debug("%s as of transaction %d: no change since the last fold at or before it; the stored versions "
                  "alone", state_path, at_seq)  # fmt: skip
    return earlier


_MARIADB_GTID = re.compile(r"^\s*(\d+)-(\d+)-(\d+)\s*$")
_MYSQL_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")


def gtid_position(gtid: str) -> list[int]:
    """The position just after a transaction, from its GTID: MariaDB's `domain-server-sequence`, or for MySQL the
    executed GTID set at that point (`uuid:1-100,uuid2:1-7`, as `@@gtid_executed` shows it): MySQL positions count
    the executed set's transactions (docs/mysql.md, "Positions")."""
    mariadb = _MARIADB_GTID.match(gtid)
    if mariadb:
        return [int(mariadb.group(3)), _MAX]
    count = 0
    for part in (p.strip() for p in gtid.replace("\n", "").split(",")):
        uuid_text, _, intervals = part.partition(":")
        if not uuid_text or not intervals:
            raise ValueError(f"{gtid!r}: not a MariaDB GTID (domain-server-sequence) nor a MySQL GTID set "
                             "(uuid:1-100,...)")  # fmt: skip
        for interval in intervals.split(":"):
            m = _MYSQL_INTERVAL.match(interval.strip())
            if m is None or (m.group(2) and int(m.group(2)) < int(m.group(1))):
                raise ValueError(f"{gtid!r}: {interval!r} is not an interval of transaction numbers")
            count += (int(m.group(2)) if m.group(2) else int(m.group(1))) - int(m.group(1)) + 1
    return [count, _MAX]
