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

from cdcflow.pipeline.sinks.delta.history.versions import (
    HISTORY,
    NO_END,
    following_version,
    one_per_transaction_sql,
    stored_sql,
    truncates_literal,
    valid_to_sql,
    versions_sql,
)
from cdcflow.pipeline.sinks.delta.layouts.base import Folded, FoldJob, Layout
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord, history_path
from cdcflow.pipeline.sinks.delta.sql import delta_path, pending_sql, sql_string
from cdcflow.pipeline.sinks.delta.tables import ensure_table, merge_guarded

log = logging.getLogger(__name__)

_EMPTY = sql_string(WHOLE_TABLE)


def logged_sql(record: FoldRecord) -> str:
    """Every log row of the table (the log's current snapshot: compaction keeps the rows, only Change Data Feed
    needs the commits)."""
    return (
        f"SELECT * FROM {delta_path(record.log)} WHERE source_name = {sql_string(record.source)} "
        f"AND db = {sql_string(record.db)} AND `table` = {sql_string(record.table)}"
    )


def fold_with_history(job: FoldJob, layout: Layout) -> Folded:
    """The layout's fold of the state, and the history's step, from one read of the pending changes (as
    versions: the state's newest change per key is the newest version)."""
    spark, record = job.spark, job.record
    versions = spark.sql(versions_sql(pending_sql(record, record.folded_version + 1, job.version))).persist()
    name = f"cdcflow_versions_{uuid.uuid4().hex}"
    versions.createOrReplaceTempView(name)
    try:
        folded = layout.fold(dataclasses.replace(job, changes=f"SELECT * FROM {name}"))
        if folded.changes or not record.history_seeded:
            fold_history(job, f"SELECT * FROM {name}")
        return folded
    finally:
        spark.catalog.dropTempView(name)
        versions.unpersist()


def fold_history(job: FoldJob, versions: str) -> None:
    """Merge `versions` (a query of `versions.versions_sql` rows: the fold's changes) into the table's history.
    The first fold that keeps history for a table (`record.history_seeded` false) takes every version the log
    holds instead."""
    spark, path = job.spark, history_path(job.path)
    seeding = not job.record.history_seeded
    if seeding:
        versions = versions_sql(logged_sql(job.record))
    fresh = not DeltaTable.isDeltaTable(spark, path)
    table = f"cdcflow_history_{uuid.uuid4().hex}"
    new = spark.sql(versions).drop("_changes").persist()
    new.createOrReplaceTempView(table)
    try:
        new_truncates = [(list(r["pos"]), r["source_ts_ms"]) for r in new.where(f"key = {_EMPTY}").collect()]
        stored_truncates = []
        if not fresh:
            stored = spark.sql(f"SELECT pos, source_ts_ms FROM ({stored_sql(path)}) WHERE key = {_EMPTY}").collect()
            stored_truncates = [(list(r["pos"]), r["source_ts_ms"]) for r in stored]
        truncates = truncates_literal([*stored_truncates, *new_truncates])
        if fresh:
            ensure_table(spark, path, HISTORY, job.state_properties())
            rows = valid_to_sql(
                f"SELECT *, {NO_END} FROM {table} WHERE key != {_EMPTY}",
                following_version(), truncates,
            )  # fmt: skip
            truncate_rows = f"SELECT *, {NO_END} FROM {table} WHERE key = {_EMPTY}"
            columns = ", ".join(f.name for f in HISTORY.fields)
            spark.sql(f"SELECT {columns} FROM ({rows}) UNION ALL SELECT {columns} FROM ({truncate_rows})").write.format(
                "delta"
            ).mode("append").save(path)
            return
        # A truncate ends versions of every key; so does a history that starts now (the stored rows may be a
        # seed that was cut short).
        every_key = seeding or bool(new_truncates)
        existing = f"SELECT * FROM ({stored_sql(path)}) WHERE key != {_EMPTY}"
        if not every_key:
            existing = (
                f"SELECT h.* FROM ({existing}) h LEFT SEMI JOIN (SELECT DISTINCT key FROM {table}) n ON h.key = n.key"
            )
        both = (
            "SELECT key, after, op, pos, source_ts_ms, valid_to_pos AS _stored_to_pos, "
            f"valid_to_ts_ms AS _stored_to_ts, true AS _stored FROM ({existing}) UNION ALL "
            f"SELECT key, after, op, pos, source_ts_ms, NULL, NULL, false FROM {table} WHERE key != {_EMPTY}"
        )
        rows = valid_to_sql(
            f"SELECT *, {NO_END} FROM ({one_per_transaction_sql(both, '_stored')})",
            following_version(), truncates,
        )  # fmt: skip
        changed = (
            f"SELECT key, after, op, pos, source_ts_ms, valid_to_pos, valid_to_ts_ms FROM ({rows}) WHERE NOT _stored "
            "OR NOT (valid_to_pos <=> _stored_to_pos) OR NOT (valid_to_ts_ms <=> _stored_to_ts) "
            f"UNION ALL SELECT key, after, op, pos, source_ts_ms, {NO_END} FROM {table} WHERE key = {_EMPTY}"
        )
        source = job.hooks.merge_source(path, spark.sql(changed))

        def merge() -> None:
            (
                DeltaTable.forPath(spark, path).alias("t")
                .merge(source.alias("s"), "t.key = s.key AND t.pos[0] = s.pos[0]")
                .whenMatchedUpdateAll(condition=f"s.key != {_EMPTY}")
                .whenNotMatchedInsertAll()
                .execute()
            )  # fmt: skip

        merge_guarded(job.sink, path, merge)
    finally:
        spark.catalog.dropTempView(table)
        new.unpersist()
