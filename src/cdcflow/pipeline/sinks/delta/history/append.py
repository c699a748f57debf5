"""The history of a typed table kept by appending (history format 2, decision 0027).

A key's **open** version (its current row) is the state table's row; the history table holds only **closed**
versions, which never change once written (but for changes that come late). So a fold appends what it closed,
and reads nothing of the history:

- the state rows its MERGE replaced or deleted, read back from the state table's Change Data Feed
  (`update_preimage`, `delete`) from the state version the record names, their row images written back from
  the typed columns (`mysql_types.row_image_sql`; a row a DDL rewrote keeps the image it had, `mysql_types.IMAGE`)
  and their keys as the change log has them (`mysql_types.KEY_TEXT`);
- the fold's own versions that a later one of the same key in the same fold ends.

One window by key over both gives every end (`versions.valid_to_sql`). Keys whose changes came late or twice (the
MERGE left them alone, or a change sorts before the row it replaced, before a delete recorded earlier or before the
table's truncate) take the MERGE of decision 0025 instead, restricted to them (`_merge_late`). A fold whose changes
all come after every transaction folded before (the record's `history_folded_seq`) has none, and skips the check.

Kills: the record keeps the state version the step read up to, and a fold done again reads the feed from there
(its own MERGE then changes nothing). The append is one of Delta's idempotent writes (`txnAppId`, `txnVersion` the
state version); a fold killed after its append and before its record left `history_appending` in the record, and
the next one, which reads further (the changes logged since) and may end those versions elsewhere, sends every key
it touches through the late path's MERGE instead of appending.

Format 1 (every version in the history table, decision 0025: `fold.py`) stays the JSON layout's; a typed table's
history of format 1 is migrated by its next fold (`migrate`).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from cdcflow.pipeline import metrics
from cdcflow.pipeline.sinks.delta.history.versions import (
    HISTORY,
    NO_END,
    STORED,
    Truncate,
    following_version,
    logged_sql,
    one_per_transaction_sql,
    truncates_literal,
    valid_to_sql,
    versions_sql,
    with_seqs_sql,
)
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.delta.layouts.base import Folded, FoldJob
from cdcflow.pipeline.sinks.delta.layouts.mysql import DELETED_KEYS, position_sql
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord, deletes_path, history_path, write_record
from cdcflow.pipeline.sinks.delta.sql import delta_path, pending_sql, quoted, sql_string, steps
from cdcflow.pipeline.sinks.delta.tables import append_creating, ensure_table, merge_guarded
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

log = logging.getLogger(__name__)

FORMAT = 2
_EMPTY = sql_string(WHOLE_TABLE)
_COLUMNS = ", ".join(f.name for f in HISTORY.fields)
# Rows of the history table that are closed versions (a history migrated from format 1 may keep open versions,
# deletes and truncates of its own until they are deleted: `migrate`).
CLOSED = f"valid_to_pos IS NOT NULL AND op != 'd' AND key != {_EMPTY}"


def keeps_by_appending(record: FoldRecord) -> bool:
    """Whether the table's history is kept by appending (typed tables; the JSON layout merges, format 1)."""
    return record.layout == "typed"


def open_versions_sql(state: str, columns: list[MySqlColumn], image: bool, carried: tuple[str, ...] = ()) -> str:
    """Rows of the typed state table (a query: the table, an old version of it, or its Change Data Feed) as
    versions: key (the log's key text), after (the row image; null for a delete), op, pos, source_ts_ms, and the
    `carried` columns. `columns`: the table's source columns; `image`: the rows have `mt.IMAGE` (the image of
    before a rewrite, taken when set)."""
    written = mt.row_image_sql(columns)
    after = f"coalesce({mt.IMAGE}, {written})" if image else written
    extra = "".join(f", {quoted(c)}" for c in carried)
    return (
        f"SELECT {mt.KEY_TEXT} AS key, CASE WHEN {mt.OP} = 'd' THEN NULL ELSE {after} END AS after, {mt.OP} AS op, "
        f"{mt.POS} AS pos, {mt.SOURCE_TS} AS source_ts_ms{extra} FROM ({state})"
    )


def state_version(spark: SparkSession, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {delta_path(path)} LIMIT 1").first()["version"])  # type: ignore[index]


@dataclasses.dataclass(frozen=True)
class StateCommits:
    """The state table's commits after the version the history read up to."""

    newest: int  # the table's newest version
    start: int  # the first version whose Change Data Feed the history reads (after a rewrite: the one after it)
    changing: int  # how many of them may change rows (all but compactions and property or column changes)


# Commits that change no row (their Change Data Feed is empty)
_KEEPING_ROWS = frozenset({"OPTIMIZE", "SET TBLPROPERTIES", "ADD COLUMNS", "UPGRADE PROTOCOL", "VACUUM START",
                           "VACUUM END"})  # fmt: skip


def state_commits_after(spark: SparkSession, path: str, version: int) -> StateCommits:
    """The state table's commits after `version`. The history reads the Change Data Feed from the first of them,
    or after a rewrite of the table for a DDL (an overwrite: its feed deletes and inserts every row, and closes
    nothing), from the commit after it."""
    limit = 8
    while True:
        commits = spark.sql(f"DESCRIBE HISTORY {delta_path(path)} LIMIT {limit}").select(
            "version", "operation", "operationParameters"
        ).collect()  # fmt: skip
        newest = int(commits[0]["version"])
        if len(commits) < limit or int(commits[-1]["version"]) <= version + 1:
            break
        limit = newest - version + 1
    start, changing = version + 1, 0
    for commit in commits:
        if int(commit["version"]) <= version:
            continue
        changing += commit["operation"] not in _KEEPING_ROWS
        if _rewrites(commit["operation"], commit["operationParameters"] or {}):
            start = max(start, int(commit["version"]) + 1)
    return StateCommits(newest, start, changing)


def _rewrites(operation: str, parameters: dict[str, str]) -> bool:
    if operation in ("CREATE OR REPLACE TABLE", "REPLACE TABLE", "CREATE OR REPLACE TABLE AS SELECT"):
        return True
    return operation == "WRITE" and "Overwrite" in str(parameters.get("mode", ""))


def _feed(spark: SparkSession, path: str, start: int, end: int, columns: list[MySqlColumn]) -> DataFrame:
    """The state's Change Data Feed of versions `start` to `end` as versions with `_change_type` (the row image
    only where a fold replaced or deleted the row)."""
    if start > end:
        schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in HISTORY.fields[:5])
        return spark.createDataFrame([], f"{schema}, _change_type string")
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start)
        .option("endingVersion", end).load(path)
    )  # fmt: skip
    present = {c.lower(): c for c in feed.columns}
    shape = [dataclasses.replace(c, name=present[c.name.lower()]) for c in columns if c.name.lower() in present]
    name = f"cdcflow_feed_{uuid.uuid4().hex}"
    feed.createOrReplaceTempView(name)
    try:
        rows = f"SELECT * FROM {name} WHERE _change_type IN ('update_preimage', 'delete', 'insert', 'update_postimage')"
        versions = open_versions_sql(rows, shape, mt.IMAGE in feed.columns, carried=("_change_type",))
        replaced = "_change_type IN ('update_preimage', 'delete')"
        return spark.sql(
            f"SELECT key, CASE WHEN {replaced} THEN after END AS after, op, pos, source_ts_ms, _change_type "
            f"FROM ({versions})"
        )  # fmt: skip
    finally:
        spark.catalog.dropTempView(name)


# --- the fold's step ---------------------------------------------------------------------------------------------
def history_step(job: FoldJob, versions: str, folded: Folded) -> Folded:
    """The history's step of a fold whose state MERGE committed: `versions` (a view of `versions_sql` rows) are the
    fold's changes. Returns `folded` with the table's truncates and the state version read up to."""
    spark, record = job.spark, job.record
    columns = job.shapes.mysql_columns(record.source, record.db, record.table, refresh=False)
    seen = _seen(spark, versions)
    new_truncates: list[Truncate] = [(list(t["pos"]), t["ts"]) for t in seen["truncates"]]
    if not record.history_seeded:
        return _seed(job, versions, columns, new_truncates, folded)
    # (every delete of the fold was recorded by the state's fold: `MySqlRows._fold_state`)
    known = {tuple(pos) for pos, _ts in record.history_truncates}
    truncates: list[Truncate] = [
        *((list(pos), ts) for pos, ts in record.history_truncates),
        *(t for t in new_truncates if tuple(t[0]) not in known),
    ]
    if not DeltaTable.isDeltaTable(spark, job.path):  # only truncates so far: nothing to close
        return dataclasses.replace(folded, history_truncates=truncates)
    read_up_to = record.history_state_version if record.history_state_version is not None else -1
    commits = state_commits_after(spark, job.path, read_up_to)
    newest, start = commits.newest, commits.start
    # An append that may have committed without its record (a fold stopped after it) wrote versions whose ends
    # this fold, which reads further, may move: every key of the fold then takes the late path, whose MERGE gives
    # stored versions their new end (an append would only add).
    redo = record.history_appending
    # A fold whose every change is of a transaction after every one folded before (the common case: changes in
    # order, none twice) has no late keys: nothing stored, recorded or truncated can sort after its changes, and
    # the MERGE applied each key's newest. Such a fold skips the check's joins, when the feed holds its own MERGE
    # alone (after a fold stopped between its MERGE and its history step, the feed holds that MERGE too, and the
    # next one's replaces rows of the changes it folds again).
    in_order = (
        not redo and commits.changing <= 1 and record.history_folded_seq is not None
        and seen["first_seq"] > record.history_folded_seq
    )  # fmt: skip
    if in_order:
        log.debug("sink %s: %s: the fold's changes all come after transaction %d, the newest folded before: no late "
                  "keys to look for", job.sink, job.path, record.history_folded_seq)  # fmt: skip
    feed = _feed(spark, job.path, start, newest, columns)
    if not in_order:  # (read by the check and by the append)
        feed = feed.persist()
    names = {n: f"cdcflow_{n}_{uuid.uuid4().hex}" for n in ("feed", "late")}
    feed.createOrReplaceTempView(names["feed"])
    late: DataFrame | None = None
    try:
        # Replaced state rows without key text (rows the history's seed could not give it, and said so:
        # `_fill_keys`) have no versions in the history.
        replaced = f"SELECT key, after, op, pos, source_ts_ms FROM {names['feed']} WHERE _change_type IN " \
                   "('update_preimage', 'delete') AND key IS NOT NULL"  # fmt: skip
        fold_versions = f"SELECT key, after, op, pos, source_ts_ms FROM {versions} WHERE key != {_EMPTY}"
        late_keys, first_seq = 0, None
        if not in_order:
            late_sql = f"SELECT key, min(pos)[0] AS seq FROM ({fold_versions}) GROUP BY key" if redo else \
                _late_keys_sql(job, fold_versions, replaced, names["feed"])  # fmt: skip
            late = spark.sql(late_sql).persist()
            late.createOrReplaceTempView(names["late"])
            found = late.agg(F.count("key"), F.min("seq")).first()
            late_keys, first_seq = (int(found[0]), found[1]) if found else (0, None)
        if redo:
            log.info("sink %s: %s: a history append may have committed without its record (a fold stopped after "
                     "it); the fold's %d keys are merged into the history", job.sink, job.path, late_keys)  # fmt: skip
            metrics.DELTA_HISTORY_REDONE_APPENDS.labels(job.sink).inc()
        else:
            both = f"SELECT *, 1 AS _rank FROM ({replaced}) UNION ALL SELECT *, 0 AS _rank FROM ({fold_versions})"
            if late_keys:
                both = f"SELECT /*+ BROADCAST(l) */ b.* FROM ({both}) b LEFT ANTI JOIN {names['late']} l " \
                       "ON b.key = l.key"  # fmt: skip
            # (in order, a replaced row's transaction is older than every one of the fold, whose versions are one
            # per key and transaction already)
            closed = _closed_sql(both, truncates_literal(new_truncates), one_per_transaction=not in_order)
            _append(job, record, closed, newest)
        if late_keys:
            log.info("sink %s: %s: %d keys with changes late or twice: their history merged (from transaction %s)",
                     job.sink, job.path, late_keys, first_seq)  # fmt: skip
            metrics.DELTA_HISTORY_LATE_KEYS.labels(job.sink).inc(late_keys)
            _merge_late(job, names["late"], int(first_seq or 0), replaced, fold_versions, truncates)
    finally:
        for view in names.values():
            spark.catalog.dropTempView(view)
        if not in_order:
            feed.unpersist()
        if late is not None:
            late.unpersist()
    folded_seq = _folded_seq(job, record.history_folded_seq, seen["last_seq"])
    return dataclasses.replace(folded, history_truncates=truncates, history_state_version=newest,
                               history_folded_seq=folded_seq)  # fmt: skip


def _seen(spark: SparkSession, versions: str) -> Row:
    """One job over `versions` (a view of `versions_sql` rows): first_seq and last_seq, the transactions they span,
    and truncates, theirs (structs of pos and ts)."""
    seen = spark.sql(
        f"SELECT min(pos[0]) AS first_seq, max(pos[0]) AS last_seq, collect_list(CASE WHEN key = {_EMPTY} THEN "
        f"named_struct('pos', pos, 'ts', source_ts_ms) END) AS truncates FROM {versions}"
    ).first()  # fmt: skip
    assert seen is not None
    return seen


def _folded_seq(job: FoldJob, before: int | None, last_seq: int | None) -> int | None:
    """The newest transaction folded into the table so far, after a fold whose newest is `last_seq`: from the
    record (`before`), or, for a record written before it was kept, from what the state, the deletes and the
    truncate hold now (one job, once)."""
    if before is not None:
        return max(before, last_seq) if last_seq is not None else before
    spark, record = job.spark, job.record
    parts = [f"SELECT max({mt.POS}[0]) AS seq FROM {delta_path(job.path)}"]
    deletes = deletes_path(job.path)
    if DeltaTable.isDeltaTable(spark, deletes):
        parts.append(f"SELECT max(pos[0]) FROM {delta_path(deletes)}")
    found = spark.sql(f"SELECT max(seq) AS seq FROM ({' UNION ALL '.join(parts)})").first()
    truncated = record.truncated_at[0] if record.truncated_at else None
    seqs = [s for s in (found["seq"] if found else None, last_seq, truncated) if s is not None]
    return max(seqs) if seqs else None


def _record_deletes(job: FoldJob, versions: str) -> None:
    """Every delete among `versions` (a view of `versions_sql` rows) in the table's deletes: the history needs each
    as the end of versions that come later (a change older than a delete, delivered after it: its version ends at
    the delete, which no stored version ends). A fold's own are recorded by the state's fold, which records every
    delete when history is kept; the seed records those of the whole log. Blind appends: a delete recorded twice
    changes nothing, and the state's rule (a change older than a delete of its key is gone) holds for every
    delete."""
    spark, path = job.spark, deletes_path(job.path)
    deletes = spark.sql(f"SELECT key, pos, source_ts_ms FROM {versions} WHERE op = 'd' AND key != {_EMPTY}")
    if not deletes.isEmpty():  # (`versions` is kept in memory: a look, where an empty append was a commit)
        append_creating(spark, path, deletes, DELETED_KEYS)


def _append(job: FoldJob, record: FoldRecord, closed: str, newest: int) -> None:
    """Append `closed` (a query of HISTORY rows) to the history, once for state version `newest` (one of Delta's
    idempotent writes), the record marked `history_appending` first. An append that may have committed without its
    record leaves out the versions the history holds (their ends are set right by the fold's late path, which every
    key of a fold after such an append takes)."""
    spark, stored = job.spark, history_path(job.path)
    if record.history_appending:
        closed = f"SELECT c.* FROM ({closed}) c LEFT ANTI JOIN {delta_path(stored)} h ON c.key = h.key " \
                 "AND c.pos = h.pos"  # fmt: skip
    else:
        write_record(spark, job.path, dataclasses.replace(record, history_appending=True))
    (
        spark.sql(with_seqs_sql(closed)).write.format("delta").mode("append")
        .option("txnAppId", f"cdcflow-history:{job.path}").option("txnVersion", newest).save(stored)
    )  # fmt: skip


@dataclasses.dataclass
class BeforeRewrite:
    """The history's part of a fold that rewrites the state table for a DDL (`MySqlTyped._reshape`: an overwrite
    in the new schema), called just before the rewrite.

    Delta reads a Change Data Feed in the table's newest schema and refuses commits written in another, so after
    the rewrite the commits before it cannot be read. Commits the history has not read then (a fold stopped between
    its state MERGE and its history append) are read now: the rows their MERGEs replaced or deleted become closed
    versions, ended by the fold's versions (which hold the stopped fold's changes: its record was not written), are
    appended, and the record moves past them, still marked `history_appending`: the fold's own step, which reads on
    from it, then merges its keys (the late path) instead of appending them again. `record`: that record, once
    written."""

    job: FoldJob
    versions: str  # the fold's changes as versions (a view of `versions_sql` rows)
    record: FoldRecord | None = None

    def __call__(self) -> None:
        job, record = self.job, self.record or self.job.record
        spark = job.spark
        if not (keeps_by_appending(record) and record.history_seeded and record.history_format >= FORMAT):
            return
        read_up_to = record.history_state_version if record.history_state_version is not None else -1
        commits = state_commits_after(spark, job.path, read_up_to)
        newest, start = commits.newest, commits.start
        if start > newest or not record.mysql_columns:
            return
        columns = [MySqlColumn(**c) for c in record.mysql_columns]  # the shape the table has until the rewrite
        feed = _feed(spark, job.path, start, newest, columns).persist()
        name = f"cdcflow_feed_{uuid.uuid4().hex}"
        feed.createOrReplaceTempView(name)
        try:
            truncates = [(list(r["pos"]), r["source_ts_ms"]) for r in spark.sql(
                f"SELECT pos, source_ts_ms FROM {self.versions} WHERE key = {_EMPTY}").collect()]  # fmt: skip
            every_truncate = [*((list(pos), ts) for pos, ts in record.history_truncates), *truncates]
            both = (
                f"SELECT key, after, op, pos, source_ts_ms, 1 AS _rank FROM {name} WHERE _change_type IN "
                f"('update_preimage', 'delete') AND key IS NOT NULL UNION ALL SELECT key, after, op, pos, "
                f"source_ts_ms, 0 FROM {self.versions} WHERE key != {_EMPTY}"
            )  # fmt: skip
            one = one_per_transaction_sql(both, "_rank")
            ended = valid_to_sql(f"SELECT *, {NO_END} FROM ({one})", following_version(),
                                 truncates_literal(every_truncate))  # fmt: skip
            closed = f"SELECT {_COLUMNS} FROM ({ended}) WHERE _rank = 1 AND valid_to_pos IS NOT NULL AND op != 'd'"
            _append(job, record, closed, newest)
            self.record = dataclasses.replace(record, history_state_version=newest, history_appending=True)
            write_record(spark, job.path, self.record)
            log.info("sink %s: %s: the state commits up to version %d read into the history before the table is "
                     "rewritten", job.sink, job.path, newest)  # fmt: skip
            metrics.DELTA_HISTORY_READ_BEFORE_REWRITES.labels(job.sink).inc()
        finally:
            spark.catalog.dropTempView(name)
            feed.unpersist()


def _late_keys_sql(job: FoldJob, fold_versions: str, replaced: str, feed: str) -> str:
    """The fold's keys whose versions cannot simply be appended (key, seq: the first element of their oldest
    position in the fold): the MERGE left them alone (a change delivered again, or older than a recorded delete or
    the table's truncate); a change of theirs sorts before the row the MERGE replaced, or is of its transaction
    (whose first part was stored as a version's end: a transaction whose changes came in two folds); or they were
    inserted while a delete recorded earlier is newer than one of their changes."""
    record = job.record
    keys = f"SELECT key, min(pos) AS min_pos FROM ({fold_versions}) GROUP BY key"
    applied = f"SELECT key FROM {feed} WHERE _change_type IN ('insert', 'update_postimage', 'delete')"
    parts = [
        f"SELECT v.key, v.min_pos FROM ({keys}) v LEFT ANTI JOIN ({applied}) a ON v.key = a.key",
        f"SELECT v.key, v.min_pos FROM ({keys}) v JOIN ({replaced}) p ON v.key = p.key WHERE p.pos[0] >= v.min_pos[0]",
    ]
    deletes = deletes_path(job.path)
    if DeltaTable.isDeltaTable(job.spark, deletes):
        inserted = f"SELECT key FROM {feed} WHERE _change_type = 'insert'"
        parts.append(
            f"SELECT v.key, v.min_pos FROM ({keys}) v JOIN {delta_path(deletes)} d ON v.key = d.key "
            f"WHERE d.pos >= v.min_pos AND v.key IN ({inserted})"
        )  # fmt: skip
    if record.truncated_at is not None:
        parts.append(f"SELECT key, min_pos FROM ({keys}) WHERE min_pos <= {position_sql(record.truncated_at)}")
    union = " UNION ALL ".join(parts)
    return f"SELECT key, min(min_pos)[0] AS seq FROM ({union}) GROUP BY key"


def _closed_sql(versions: str, truncates: str, one_per_transaction: bool = True) -> str:
    """The versions (a query with VERSION columns and `_rank`: which to keep of one transaction's, the highest)
    that a later one of their key, or a truncate of `truncates`, ends; deletes left out. Without
    `one_per_transaction` the versions are known to be one per key and transaction already (no window for it)."""
    one = one_per_transaction_sql(versions, "_rank") if one_per_transaction else versions
    ended = valid_to_sql(f"SELECT *, {NO_END} FROM ({one})", following_version(), truncates)
    return f"SELECT {_COLUMNS} FROM ({ended}) WHERE valid_to_pos IS NOT NULL AND op != 'd'"


_NULLS = "CAST(NULL AS array<bigint>), CAST(NULL AS BIGINT)"


def _merge_late(job: FoldJob, late: str, first_seq: int, replaced: str, fold_versions: str,
                truncates: list[Truncate]) -> None:  # fmt: skip
    """Decision 0025's MERGE for the `late` keys: their stored versions that end at or after transaction
    `first_seq` (and a delete at each of their ends), their state row (open), the rows the fold replaced, their
    recorded deletes and the fold's versions, every end computed again; new closed versions inserted, stored ones
    given their new end, and stored ones a delete of the same transaction replaces deleted."""
    spark, stored = job.spark, history_path(job.path)
    seq = int(first_seq)
    parts = [
        f"SELECT key, CAST(NULL AS STRING) AS after, op, pos, source_ts_ms, valid_to_pos AS _stored_to_pos, "
        f"valid_to_ts_ms AS _stored_to_ts, 3 AS _rank FROM {delta_path(stored)} WHERE {CLOSED} "
        f"AND (valid_to_seq IS NULL OR valid_to_seq >= {seq})",
        f"SELECT {mt.KEY_TEXT} AS key, CAST(NULL AS STRING) AS after, {mt.OP} AS op, {mt.POS} AS pos, "
        f"{mt.SOURCE_TS} AS source_ts_ms, {_NULLS}, 2 "
        f"FROM {delta_path(job.path)} WHERE {mt.KEY_TEXT} IS NOT NULL",
        f"SELECT key, after, op, pos, source_ts_ms, {_NULLS}, 1 FROM ({replaced})",
        f"SELECT key, after, op, pos, source_ts_ms, {_NULLS}, 0 FROM ({fold_versions})",
    ]
    # A delete at each stored end (a delete, a truncate, or the key's next version, which is preferred over it)
    ending = f"{delta_path(stored)} WHERE {CLOSED} AND (valid_to_seq IS NULL OR valid_to_seq >= {seq})"
    parts.append(f"SELECT key, CAST(NULL AS STRING), 'd', valid_to_pos, valid_to_ts_ms, {_NULLS}, -1 FROM {ending}")
    deletes = deletes_path(job.path)
    if DeltaTable.isDeltaTable(spark, deletes):  # (a delete newer than every change of its key is kept only here)
        parts.append(f"SELECT key, CAST(NULL AS STRING), 'd', pos, source_ts_ms, {_NULLS}, -1 FROM "
                     f"{delta_path(deletes)} WHERE key != {_EMPTY} AND pos[0] >= {seq}")  # fmt: skip
    both = " UNION ALL ".join(
        f"SELECT /*+ BROADCAST(l) */ r.* FROM ({p}) r LEFT SEMI JOIN {late} l ON r.key = l.key" for p in parts
    )
    one = one_per_transaction_sql(both, "_rank")
    ended = valid_to_sql(f"SELECT *, {NO_END} FROM ({one})", following_version(), truncates_literal(truncates))
    # Closed versions new or ended differently; and deletes, which remove a stored version of the same transaction
    # (a transaction whose changes came in two folds: the first one's part was stored as its version).
    changed = (
        f"SELECT {_COLUMNS}, _rank = 3 AS _stored FROM ({ended}) WHERE _rank != 2 AND ((valid_to_pos IS NOT NULL "
        "AND op != 'd' AND (_rank != 3 OR NOT (valid_to_pos <=> _stored_to_pos) "
        "OR NOT (valid_to_ts_ms <=> _stored_to_ts))) OR op = 'd')"
    )
    source = spark.sql(with_seqs_sql(changed))
    every: dict[str, str | Column] = {f.name: f"s.{f.name}" for f in STORED.fields}
    ends: dict[str, str | Column] = {"valid_to_pos": "s.valid_to_pos", "valid_to_ts_ms": "s.valid_to_ts_ms",
                                     "valid_to_seq": "s.valid_to_seq"}  # fmt: skip

    def merge() -> None:
        (
            DeltaTable.forPath(spark, stored).alias("t")
            .merge(source.alias("s"), "t.key = s.key AND t.pos[0] = s.pos[0]")
            .whenMatchedDelete(condition="s.op = 'd'")
            .whenMatchedUpdate(condition="s._stored", set=ends)
            .whenMatchedUpdate(set=every)
            .whenNotMatchedInsert(condition="s.op != 'd'", values=every)
            .execute()
        )  # fmt: skip

    merge_guarded(job.sink, stored, merge)


# --- a history begun, or migrated from format 1 ------------------------------------------------------------------
def _seed(job: FoldJob, versions: str, columns: list[MySqlColumn], truncates: list[Truncate],
          folded: Folded) -> Folded:  # fmt: skip
    """The history's first fold: every version the change log holds (the fold's own when the table was never
    folded), the closed ones written as the history (an overwrite: a seed done again writes the same), and the
    state's rows given their key text from the open ones."""
    spark, record = job.spark, job.record
    source = f"SELECT * FROM {versions}"
    if record.folded_version >= 0:
        source = versions_sql(logged_sql(record))
    every = spark.sql(source).drop("_changes").persist()
    name = f"cdcflow_seed_{uuid.uuid4().hex}"
    every.createOrReplaceTempView(name)
    try:
        _record_deletes(job, name)
        seen = _seen(spark, name)
        truncates = [(list(t["pos"]), t["ts"]) for t in seen["truncates"]]
        ended = valid_to_sql(
            f"SELECT *, {NO_END} FROM {name} WHERE key != {_EMPTY}", following_version(), truncates_literal(truncates)
        )  # fmt: skip
        stored = history_path(job.path)
        ensure_table(spark, stored, STORED, job.state_properties())
        closed = f"SELECT {_COLUMNS} FROM ({ended}) WHERE valid_to_pos IS NOT NULL AND op != 'd'"
        (
            spark.sql(with_seqs_sql(closed)).write.format("delta").mode("overwrite")
            .option("overwriteSchema", "true").save(stored)
        )  # fmt: skip
        newest = None
        if DeltaTable.isDeltaTable(spark, job.path):
            if record.folded_version >= 0:
                _fill_keys(job, f"SELECT * FROM ({ended}) WHERE valid_to_pos IS NULL AND op != 'd'", columns)
            newest = state_version(spark, job.path)
        log.info("sink %s: %s: history begun from the change log (closed versions in %s, open ones the state's rows)",
                 job.sink, job.path, stored)  # fmt: skip
        # (the log holds every change folded: its newest transaction is the newest folded)
        return dataclasses.replace(folded, history_truncates=truncates, history_state_version=newest,
                                   history_folded_seq=seen["last_seq"])  # fmt: skip
    finally:
        spark.catalog.dropTempView(name)
        every.unpersist()


def migrate(job: FoldJob) -> FoldRecord:
    """A typed table's history of format 1 (every version in the history table) made format 2, before the fold:
    the state's rows given their key text from the history's open versions (and from the changes not folded yet,
    which a fold killed before its record may have merged into the state already), the record written with format
    2, then the history's open versions, deletes and truncates deleted (the state's rows and the record hold them).
    Killed at any point, the next fold finds format 1 (and migrates again) or format 2 (whose reads keep only closed
    versions)."""
    spark, record = job.spark, job.record
    stored = history_path(job.path)
    if not DeltaTable.isDeltaTable(spark, job.path) or not DeltaTable.isDeltaTable(spark, stored):
        return dataclasses.replace(record, history_seeded=False)  # nothing to migrate: the fold seeds it
    columns = job.shapes.mysql_columns(record.source, record.db, record.table, refresh=False)
    kept_open = f"SELECT key, after, op, pos, source_ts_ms FROM {delta_path(stored)} WHERE valid_to_pos IS NULL " \
                f"AND op != 'd' AND key != {_EMPTY}"  # fmt: skip
    pending = versions_sql(pending_sql(record, record.folded_version + 1))
    both = f"SELECT key, after, op, pos, source_ts_ms FROM ({pending}) WHERE key != {_EMPTY} AND op != 'd' " \
           f"UNION ALL {kept_open}"  # fmt: skip
    _fill_keys(job, f"SELECT key, pos, first(after) AS after, first(op) AS op FROM ({both}) GROUP BY key, pos", columns)
    migrated = dataclasses.replace(
        record, history_format=FORMAT, history_state_version=state_version(spark, job.path), history_appending=False
    )  # fmt: skip
    write_record(spark, job.path, migrated)

    def delete_open_versions() -> None:
        spark.sql(f"DELETE FROM {delta_path(stored)} WHERE NOT ({CLOSED})")

    merge_guarded(job.sink, stored, delete_open_versions)
    log.info("sink %s: %s: history migrated to format %d (the open versions are the state's rows; the history "
             "table keeps the closed ones)", job.sink, job.path, FORMAT)  # fmt: skip
    return migrated


def _fill_keys(job: FoldJob, open_versions: str, columns: list[MySqlColumn]) -> None:
    """The state's rows without key text given it from `open_versions` (a query: key, after, pos), matched on the
    key columns and the position; the rows left without it are counted in a warning."""
    spark, path = job.spark, job.path
    state = DeltaTable.forPath(spark, path)
    if mt.KEY_TEXT not in state.toDF().columns:
        spark.sql(f"ALTER TABLE {delta_path(path)} ADD COLUMNS ({mt.KEY_TEXT} STRING)")
    keys = [c for c in columns if c.key_order is not None]
    if keys:
        typed = [*mt.source_columns_sql(keys), "key AS _k", "pos AS _p"]
        source = spark.sql(steps(open_versions, [["*", mt.VALUES_SQL], typed]))
        on = " AND ".join([*(f"t.{quoted(c.name)} <=> s.{quoted(c.name)}" for c in keys), f"t.{mt.POS} = s._p"])

        def merge() -> None:
            (
                DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on)
                .whenMatchedUpdate(condition=f"t.{mt.KEY_TEXT} IS NULL", set={mt.KEY_TEXT: "s._k"}).execute()
            )  # fmt: skip

        merge_guarded(job.sink, path, merge)
    left = spark.sql(f"SELECT count(*) AS n FROM {delta_path(path)} WHERE {mt.KEY_TEXT} IS NULL AND NOT "
                     f"coalesce({mt.DELETED}, false)").first()  # fmt: skip
    if left and left["n"]:
        log.warning("sink %s: %s: %d state rows have no change the log or the history holds to take their key text "
                    "from; their versions are not kept in the history", job.sink, path, left["n"])  # fmt: skip
