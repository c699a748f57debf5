"""The fold's history step: a fold's versions merged into the table's history, the versions around them cut.

The step reads the stored versions of the keys the fold touches (all keys when the fold holds a truncate, or
when the history starts: then from every change the log holds of the table), computes each version's end
again over both, and MERGEs only what is new or ended differently, matched on key and transaction. Run twice
(a fold killed before its record), it finds nothing to change.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from delta.tables import DeltaTable
from pyspark.sql import Column, SparkSession

from cdcflow.pipeline.sinks.delta.history.append import (
    FORMAT,
    BeforeRewrite,
    history_step,
    keeps_by_appending,
    migrate,
)
from cdcflow.pipeline.sinks.delta.history.versions import (
    HISTORY,
    NO_END,
    SEQ_COLUMNS,
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
from cdcflow.pipeline.sinks.delta.layouts.base import Folded, FoldJob, Layout
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import history_path
from cdcflow.pipeline.sinks.delta.sql import delta_path, pending_sql, sql_string
from cdcflow.pipeline.sinks.delta.tables import ensure_table, merge_guarded

log = logging.getLogger(__name__)

_EMPTY = sql_string(WHOLE_TABLE)


def fold_with_history(job: FoldJob, layout: Layout) -> Folded:
    """The layout's fold of the state, and the history's step, from one read of the pending changes (as
    versions: the state's newest change per key is the newest version). A typed table's history is kept by
    appending (`append.py`, format 2; one of format 1 migrated first), the JSON layout's by this module's MERGE."""
    spark, record = job.spark, job.record
    appending = keeps_by_appending(record)
    if appending and record.history_seeded and record.history_format < FORMAT:
        record = migrate(job)
        job = dataclasses.replace(job, record=record)
    if job.version > record.folded_version:
        pending = pending_sql(record, record.folded_version + 1, job.version)
    else:  # nothing new: a fold that only starts the history (turned on for a table folded before)
        pending = f"SELECT * FROM {delta_path(record.log)} WHERE false"
    versions = spark.sql(versions_sql(pending)).persist()
    name = f"cdcflow_versions_{uuid.uuid4().hex}"
    versions.createOrReplaceTempView(name)
    try:
        before_rewrite = BeforeRewrite(job, name) if appending else None
        folded = layout.fold(dataclasses.replace(job, changes=f"SELECT * FROM {name}", before_rewrite=before_rewrite))
        if appending:
            if before_rewrite is not None and before_rewrite.record is not None:
                job = dataclasses.replace(job, record=before_rewrite.record)
            if folded.changes or not record.history_seeded:
                job.hooks.history_step(job.path)
                if record.history_seeded:
                    _add_seq_columns(spark, history_path(job.path))
                return history_step(job, name, folded)
            return dataclasses.replace(folded, history_truncates=record.history_truncates,
                                       history_state_version=record.history_state_version,
                                       history_folded_seq=record.history_folded_seq)  # fmt: skip
        if folded.changes or not record.history_seeded:
            truncates = fold_history(job, f"SELECT * FROM {name}")
            return dataclasses.replace(folded, history_truncates=truncates)
        return dataclasses.replace(folded, history_truncates=record.history_truncates)
    finally:
        spark.catalog.dropTempView(name)
        versions.unpersist()


def fold_history(job: FoldJob, versions: str) -> list[Truncate]:
    """Merge `versions` (a query of `versions.versions_sql` rows: the fold's changes) into the table's history;
    the table's truncates after it (kept in the fold record, so no fold scans the history for them). The first
    fold that keeps history for a table (`record.history_seeded` false) takes every version the log holds
    instead."""
    spark, path, record = job.spark, history_path(job.path), job.record
    seeding = not record.history_seeded
    if seeding and record.folded_version >= 0:  # (never folded: the fold's changes are every change logged)
        versions = versions_sql(logged_sql(record))
    fresh = not DeltaTable.isDeltaTable(spark, path)
    table = f"cdcflow_history_{uuid.uuid4().hex}"
    new = spark.sql(versions).drop("_changes").persist()
    new.createOrReplaceTempView(table)
    try:
        new_truncates = [(list(r["pos"]), r["source_ts_ms"]) for r in new.where(f"key = {_EMPTY}").collect()]
        stored_truncates = [] if seeding else [(list(pos), ts) for pos, ts in record.history_truncates]
        known = {tuple(pos) for pos, _ts in stored_truncates}
        truncates = [*stored_truncates, *(t for t in new_truncates if tuple(t[0]) not in known)]
        ended_by = truncates_literal(truncates)
        if fresh:
            ensure_table(spark, path, STORED, job.state_properties())
            rows = valid_to_sql(f"SELECT *, {NO_END} FROM {table} WHERE key != {_EMPTY}", following_version(), ended_by)
            truncate_rows = f"SELECT *, {NO_END} FROM {table} WHERE key = {_EMPTY}"
            columns = ", ".join(f.name for f in HISTORY.fields)
            both = f"SELECT {columns} FROM ({rows}) UNION ALL SELECT {columns} FROM ({truncate_rows})"
            spark.sql(with_seqs_sql(both)).write.format("delta").mode("append").save(path)
            return truncates
        _add_seq_columns(spark, path)
        _merge(job, path, table, ended_by, every_key=seeding or bool(new_truncates))
        return truncates
    finally:
        spark.catalog.dropTempView(table)
        new.unpersist()


# History tables this process has seen with the seq columns (checked once each: a check loads the table's snapshot).
_WITH_SEQS: set[str] = set()


def _add_seq_columns(spark: SparkSession, path: str) -> None:
    """A history table written before the seq columns existed gets them (null in its rows: reads keep those)."""
    if path in _WITH_SEQS:
        return
    missing = [c for c in SEQ_COLUMNS if c not in DeltaTable.forPath(spark, path).toDF().columns]
    _WITH_SEQS.add(path)
    if missing:
        spark.sql(f"ALTER TABLE {delta_path(path)} ADD COLUMNS ({', '.join(f'{c} BIGINT' for c in missing)})")
        log.info("%s: the history table gets %s (versions stored before them are read as they were)", path,
                 ", ".join(missing))  # fmt: skip


def _merge(job: FoldJob, path: str, table: str, ended_by: str, every_key: bool) -> None:
    """The stored versions of the keys `table`'s versions touch (of every key when `every_key`: a truncate ends
    versions of every key, and a history that starts now may hold a seed cut short) read narrowly (no row
    images), every end computed again over both, and only what changed MERGEd: new versions inserted (or
    replacing a stored one of the same transaction that they follow), stored ones given their new end."""
    spark = job.spark
    narrow = "key, pos, source_ts_ms, valid_to_pos, valid_to_ts_ms"
    existing = f"SELECT {narrow} FROM {delta_path(path)} WHERE key != {_EMPTY}"
    if not every_key:
        touched = f"SELECT DISTINCT key FROM {table}"
        # (broadcast: the fold's keys are few against the history, which a shuffle join would move whole)
        existing = f"SELECT /*+ BROADCAST(n) */ h.* FROM ({existing}) h LEFT SEMI JOIN ({touched}) n ON h.key = n.key"
    both = (
        "SELECT key, CAST(NULL AS STRING) AS after, CAST(NULL AS STRING) AS op, pos, source_ts_ms, "
        f"valid_to_pos AS _stored_to_pos, valid_to_ts_ms AS _stored_to_ts, true AS _stored FROM ({existing}) "
        f"UNION ALL SELECT key, after, op, pos, source_ts_ms, NULL, NULL, false FROM {table} WHERE key != {_EMPTY}"
    )
    rows = valid_to_sql(f"SELECT *, {NO_END} FROM ({one_per_transaction_sql(both, '_stored')})", following_version(),
                        ended_by)  # fmt: skip
    columns = ", ".join(f.name for f in HISTORY.fields)
    changed = (
        f"SELECT {columns}, _stored FROM ({rows}) WHERE NOT _stored OR NOT (valid_to_pos <=> _stored_to_pos) "
        "OR NOT (valid_to_ts_ms <=> _stored_to_ts) "
        f"UNION ALL SELECT key, after, op, pos, source_ts_ms, {NO_END}, false FROM {table} WHERE key = {_EMPTY}"
    )
    source = job.hooks.merge_source(path, spark.sql(with_seqs_sql(changed)))
    every: dict[str, str | Column] = {f.name: f"s.{f.name}" for f in STORED.fields}
    ends: dict[str, str | Column] = {"valid_to_pos": "s.valid_to_pos", "valid_to_ts_ms": "s.valid_to_ts_ms",
                                     "valid_to_seq": "s.valid_to_seq"}  # fmt: skip

    def merge() -> None:
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(source.alias("s"), "t.key = s.key AND t.pos[0] = s.pos[0]")
            .whenMatchedUpdate(condition="s._stored", set=ends)
            .whenMatchedUpdate(condition=f"s.key != {_EMPTY}", set=every)
            .whenNotMatchedInsert(values=every)
            .execute()
        )  # fmt: skip

    merge_guarded(job.sink, path, merge)
