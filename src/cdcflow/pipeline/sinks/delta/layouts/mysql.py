"""What the two MySQL layouts (typed, JSON) share: one row per key, guarded by position.

The rules, each written once and used by both the folds and the views:

- `newest_per_key_sql`: per key the newest change by position (truncates, op t, under the key WHOLE_TABLE);
- `surviving_sql`: less the changes older than their key's recorded delete, or not newer than the table's
  newest truncate, so that a change replayed later cannot bring a deleted row back;
- the state MERGE (and the view's union with the state table) takes a change only when its position is
  greater than the stored row's; a delete removes the row (Change Data Feed reports a delete) and keeps the
  key's position in the table's deletes (`records.deletes_path`).

(Tables folded before deletes were deletes kept deleted rows as tombstones, `deleted` true: those still
guard and are left out of the views.)
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from cdcflow.pipeline import metrics
from cdcflow.pipeline.sinks.delta.layouts.base import Folded, FoldJob
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import FoldRecord, deletes_path
from cdcflow.pipeline.sinks.delta.sql import delta_path, pending_sql, quoted, sql_string, without_deleted
from cdcflow.pipeline.sinks.delta.tables import append_creating, merge_guarded

log = logging.getLogger(__name__)

DELETED_KEYS = StructType(
    [StructField("key", StringType(), False), StructField("pos", ArrayType(LongType())),
     StructField("source_ts_ms", LongType())]
)  # fmt: skip
ROW_CHANGE = ("key", "after", "deleted", "op", "pos", "source_ts_ms")


def newest_per_key_sql(changes: str, counted: str = "count(*)") -> str:
    """Log rows (a query) reduced to one row per key, the newest by position, with `_changes` the number of
    changes of the key (`counted`: how to count them, from rows that stand for several) and `_deletes` the number
    of its rows that are deletes: key, after, deleted, op, pos, source_ts_ms, _changes, _deletes. Truncates (op t)
    are under the key WHOLE_TABLE (no row's key is empty), the newest of them kept."""
    newest = "named_struct('after', after, 'deleted', op = 'd', 'op', op, 'pos', pos, 'source_ts_ms', source_ts_ms)"
    return (
        "SELECT key, _newest.*, _changes, _deletes FROM (SELECT "
        f"CASE WHEN op = 't' THEN {sql_string(WHOLE_TABLE)} ELSE key END AS key, max_by({newest}, pos) AS _newest, "
        f"{counted} AS _changes, count_if(op = 'd') AS _deletes FROM ({changes}) GROUP BY 1)"
    )


def surviving_sql(newest: str, deletes: str | None, truncated_at: str) -> str:
    """The newest row changes per key (a `newest_per_key_sql` query) less the truncates, the changes older than
    their key's recorded delete (in the table `deletes`, None: none recorded) and those not newer than
    `truncated_at` (an SQL array of the table's newest truncate position). Strictly older than the delete: the
    delete itself, folded again after a kill, still applies."""
    rows = f"SELECT {', '.join(ROW_CHANGE)} FROM ({newest}) WHERE op != 't' AND pos > {truncated_at}"
    if deletes is None:
        return rows
    return (
        f"SELECT * FROM ({rows}) l WHERE NOT EXISTS (SELECT 1 FROM {deletes} d WHERE d.key = l.key AND d.pos > l.pos)"
    )


def position_sql(pos: list[int] | None) -> str:
    """A position as an SQL array (None: before every change)."""
    return f"array({', '.join(f'CAST({int(p)} AS BIGINT)' for p in (pos or [-1]))})"


class MySqlRows(ABC):
    """The fold and the view of a MySQL table; the layouts say how rows are stored (`_merge`, `_view_rows`)."""

    @abstractmethod
    def _merge(self, job: FoldJob, latest: DataFrame) -> None:
        """MERGE the newest surviving change per key into the state table, guarded by position."""

    @abstractmethod
    def _view_rows(self, record: FoldRecord, newest: str) -> tuple[list[str], str, list[str], str] | None:
        """The view's (columns, position column, key columns, rows of the pending changes as stored) from the
        surviving newest changes (a query); None when the table has no shape to show yet."""

    @abstractmethod
    def _refreshed_after_truncate(self, job: FoldJob) -> None:
        """A truncate may come with a new shape (a new key): what the layout knows of it read again."""

    # --- the fold ------------------------------------------------------------------------------
    def fold(self, job: FoldJob) -> Folded:
        """MERGE the newest change per key into the state table (deletes delete), then append the deletes'
        keys. Changes older than a recorded delete of their key, or than the table's newest truncate, are
        dropped first. A truncate is recorded first (so the view applies it however far the fold got) and then
        deletes every stored row older than it. A kill anywhere redoes it all: the state MERGE finds the rows
        already gone.

        The pending changes are read once: reduced to the newest per key and kept, then counted, merged and
        their deletes recorded from what was kept."""
        spark, record = job.spark, job.record
        if job.changes is not None:  # the changes as versions (history is kept): each stands for `_changes`
            newest = spark.sql(newest_per_key_sql(job.changes, "sum(_changes)")).persist()
        else:
            newest = spark.sql(newest_per_key_sql(pending_sql(record, record.folded_version + 1, job.version)))
            newest = newest.persist()
        kept = f"cdcflow_fold_{uuid.uuid4().hex}"  # the kept rows by name, for the rule's SQL
        newest.createOrReplaceTempView(kept)
        try:
            return self._fold_state(job, newest, kept)
        finally:
            spark.catalog.dropTempView(kept)
            newest.unpersist()

    def _fold_state(self, job: FoldJob, newest: DataFrame, kept: str) -> Folded:
        spark, record = job.spark, job.record
        counted = newest.agg(
            F.sum("_changes").alias("n"), F.count_if(F.col("op") == "d").alias("d"),
            F.max(F.when(F.col("op") == "t", F.col("pos"))).alias("t"),
            F.count_if(F.col("op") != "t").alias("rows"), F.sum("_deletes").alias("every_d"),
        ).first()  # fmt: skip
        changes = int(counted["n"] or 0) if counted else 0
        if not changes or counted is None:
            return Folded(0, None)
        job.started(changes)
        truncated_at = [int(p) for p in counted["t"]] if counted["t"] is not None else None
        deleted_keys = deletes_path(job.path)
        if truncated_at is not None:
            self._truncate(job, deleted_keys, truncated_at)
            self._refreshed_after_truncate(job)
        if not counted["rows"]:
            return Folded(changes, truncated_at)  # only truncates: nothing to merge (perhaps no shape yet)
        cut = max((t for t in (record.truncated_at, truncated_at) if t is not None), default=None)
        deletes = delta_path(deleted_keys) if DeltaTable.isDeltaTable(spark, deleted_keys) else None
        latest = spark.sql(surviving_sql(f"SELECT * FROM {kept}", deletes, position_sql(cut)))
        self._merge(job, latest)
        if job.changes is not None:
            # History kept: every delete, not only a key's newest change (a version delivered late, older than a
            # delete that ends no stored version, still ends there; `history/append.py`)
            if counted["every_d"]:
                every = spark.sql(f"SELECT key, op = 'd' AS deleted, pos, source_ts_ms FROM ({job.changes}) "
                                  f"WHERE op = 'd' AND key != {sql_string(WHOLE_TABLE)}")  # fmt: skip
                self._record_deletes(spark, deleted_keys, every)
        elif counted["d"]:
            self._record_deletes(spark, deleted_keys, latest)
        return Folded(changes, truncated_at)

    def _truncate(self, job: FoldJob, deleted_keys: str, truncated_at: list[int]) -> None:
        """A TRUNCATE in the fold's changes: recorded in the table's deletes (key WHOLE_TABLE), then every
        stored row older than it deleted (Change Data Feed reports the deletes)."""
        spark, path, record = job.spark, job.path, job.record
        position = F.array(*(F.lit(p).cast("bigint") for p in truncated_at))
        whole_table = spark.range(1).select(
            F.lit(WHOLE_TABLE).alias("key"), position.alias("pos"), F.lit(None).cast("bigint").alias("source_ts_ms")
        )
        append_creating(spark, deleted_keys, whole_table, DELETED_KEYS)
        if DeltaTable.isDeltaTable(spark, path):
            pos = self._position_column()
            merge_guarded(job.sink, path, lambda: DeltaTable.forPath(spark, path).delete(F.col(pos) < position))
        log.info("sink %s: %s: truncated at %s (%s/%s.%s): rows older than it deleted", job.sink, path,
                 truncated_at, record.source, record.db, record.table)  # fmt: skip
        metrics.TRUNCATES.labels(job.sink, f"{record.db}.{record.table}").inc()

    @abstractmethod
    def _position_column(self) -> str: ...

    def _record_deletes(self, spark: SparkSession, path: str, latest: DataFrame) -> None:
        """Append the fold's deletes (blind: no conflict with anyone, no read). A key deleted twice, or a fold
        redone after a kill, leaves several rows per key: readers ask whether *any* delete of the key is newer
        than a change, so the extra rows change nothing (and so do deletes older than the key's newest change,
        recorded when history is kept: the state's rule, a change older than a delete of its key is gone, holds
        for every delete)."""
        append_creating(spark, path, latest.where("deleted"), DELETED_KEYS)

    # --- the view ------------------------------------------------------------------------------
    def view_sql(self, spark: SparkSession, state_path: str, state: StructType | None, record: FoldRecord,
                 include_deleted: bool) -> str:  # fmt: skip
        pending = pending_sql(record, record.folded_version)
        # Truncates: the newest one recorded by a fold (the deletes table's WHOLE_TABLE row) or not folded yet.
        truncates = f"SELECT pos FROM ({pending}) WHERE op = 't'"
        deletes_table = deletes_path(state_path)
        deletes = delta_path(deletes_table) if DeltaTable.isDeltaTable(spark, deletes_table) else None
        if deletes is not None:
            truncates += f" UNION ALL SELECT pos FROM {deletes} WHERE key = {sql_string(WHOLE_TABLE)}"
        truncated_at = f"coalesce((SELECT max(pos) FROM ({truncates})), {position_sql(None)})"
        shown = self._view_rows(record, surviving_sql(newest_per_key_sql(pending), deletes, truncated_at))
        if shown is None:
            return f"SELECT NULL AS {quoted('_cdcflow_deleted')} WHERE false"
        names, pos, keys, rows = shown
        columns = ", ".join(quoted(n) for n in names)
        if state is None:
            return without_deleted(f"SELECT {columns} FROM ({rows})", names, include_deleted)
        have = {n.lower() for n in state.fieldNames()}
        from_state = ", ".join(quoted(n) if n.lower() in have else f"NULL AS {quoted(n)}" for n in names)
        both = f"SELECT {from_state} FROM {delta_path(state_path)} UNION ALL SELECT {columns} FROM ({rows})"
        partition = ", ".join(quoted(k) for k in keys)
        newest = (
            f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {partition} ORDER BY {quoted(pos)} "
            f"DESC) AS _n FROM ({both})) WHERE _n = 1 AND {quoted(pos)} > {truncated_at}"
        )
        return without_deleted(newest, names, include_deleted)


def first_fold(rows: DataFrame, path: str, deleted: str) -> None:
    """The fold into a state table this fold created: the newest rows appended, no MERGE (nothing to match:
    the table's snapshot, the MERGE's scan and its copy of the source are spared, a third of a large first
    fold). A fold killed after the append and before its record finds the table there and MERGEs again,
    which the position guard makes a no-op."""
    rows.where(~F.col(deleted)).write.format("delta").mode("append").save(path)
