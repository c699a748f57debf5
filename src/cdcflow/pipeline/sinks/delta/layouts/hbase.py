"""HBase-sourced state tables, per cell (`hbase_state.py`: the schema and the merge rules as SQL steps).

A fold groups the table's pending changes by row, reads the current state of just those rows, merges in Spark
SQL (`state_sql`: the rules of `row_state`, checked against it; pure, idempotent, independent of order and
batch boundaries), and MERGEs back only the rows that changed, each guarded by the state it was merged from: a
row another writer changed meanwhile is not overwritten, the MERGE's counts show it (or Delta refuses the
commit), and the table is merged again. The view applies the same steps to the pending changes in SQL.

What no change says is hidden by the view and removed by the fold: the cells older than the table's newest
truncate (the peer's op t events), and, in the view, the cells past their family's TTL.
"""

from __future__ import annotations

import logging
import time

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdcflow.errors import RetryableError
from cdcflow.pipeline import metrics
from cdcflow.pipeline.sinks.delta import log as change_log
from cdcflow.pipeline.sinks.delta.hbase_state import (
    CELL_STEPS,
    CELLS_BY_ROW,
    STORED_FOR_MERGE,
    cells_by_row,
    hbase_state_schema,
    merge_steps,
    merged_rows,
    stored_for_merge,
)
from cdcflow.pipeline.sinks.delta.layouts.base import Folded, FoldJob
from cdcflow.pipeline.sinks.delta.records import FoldRecord
from cdcflow.pipeline.sinks.delta.sql import delta_path, empty, pending_sql, quoted, steps, without_deleted
from cdcflow.pipeline.sinks.delta.state_sql import visible_cells_sql
from cdcflow.pipeline.sinks.delta.tables import CONFLICT_RETRIES, commit_conflict, ensure_table

log = logging.getLogger(__name__)


class HBaseCells:
    # --- the fold ------------------------------------------------------------------------------
    def fold(self, job: FoldJob) -> Folded:
        """Fold the table's pending cells (and a truncate among them)."""
        record = job.record
        pending = change_log.table_changes(
            job.spark, record.log, record.source, record.db, record.table, record.folded_version, job.version
        ).persist()
        try:
            counted = pending.agg(
                F.count("*").alias("n"), F.max(F.when(F.col("op") == "t", F.col("pos"))).alias("t")
            ).first()
            changes = int(counted["n"]) if counted else 0
            truncated_at = [int(p) for p in counted["t"]] if counted and counted["t"] is not None else None
            if not changes:
                return Folded(0, None)
            job.started(changes)
            emptied = max(record.emptied_before_ts or -1, truncated_at[0] if truncated_at else -1)
            cells = pending
            if emptied >= 0:  # cells older than the table's truncate are gone at the source
                cells = pending.withColumn("cells", F.filter("cells", lambda c: c["ts"] >= emptied))
            self._merge(job, cells_by_row(cells))
            if truncated_at and truncated_at[0] > (record.emptied_before_ts or -1):
                self._empty_before(job, truncated_at[0])
            return Folded(changes, truncated_at)
        finally:
            pending.unpersist()

    def _merge(self, job: FoldJob, batch: DataFrame) -> None:
        """Read the stored state of the batch's rows, merge in Spark SQL, and MERGE back the rows that changed,
        each guarded by the state it was merged from (a row another writer changed meanwhile shows in the MERGE's
        counts: the table is read and merged again, as when Delta refuses the commit for a conflict)."""
        spark, path, opts = job.spark, job.path, job.options
        schema = hbase_state_schema(opts.typed_columns)
        columns = [f.name for f in schema.fields]
        for attempt in range(CONFLICT_RETRIES + 1):
            target = ensure_table(spark, path, schema, job.state_properties())
            stored = stored_for_merge(target.toDF())
            joined = batch.join(stored.join(batch.select("row_key"), "row_key", "left_semi"), "row_key", "left")
            merged = merged_rows(joined, opts.kept_versions, opts.typed_columns).persist()
            started = time.perf_counter()
            try:
                expected = merged.where("changed").count()
                if not expected:
                    return  # a replay, or changes HBase itself would ignore: nothing to write
                source = job.hooks.merge_source(path, merged.where("changed"))
                try:
                    result = (
                        target.alias("t")
                        .merge(source.alias("s"), "t.row_key = s.row_key")
                        .whenMatchedUpdate(
                            condition="t.puts <=> s.old_puts AND t.tombstones <=> s.old_tombstones",
                            set={c: f"s.`{c}`" for c in columns},
                        )
                        .whenNotMatchedInsert(condition="s.old_puts IS NULL", values={c: f"s.`{c}`" for c in columns})
                        .execute()
                        .first()
                    )
                    applied = int(result["num_updated_rows"]) + int(result["num_inserted_rows"]) if result else 0
                    conflict = None if applied == expected else f"{expected - applied} rows changed meanwhile"
                except Exception as exc:
                    conflict = commit_conflict(exc)
                    if not conflict:
                        raise
            finally:
                merged.unpersist()
            log.info("sink %s: %s: %d rows merged in %.1f s", job.sink, path, expected, time.perf_counter() - started)
            if not conflict:
                return
            log.warning("sink %s: %s: another writer committed first (%s); merging again (%d)",
                        job.sink, path, conflict, attempt + 1)  # fmt: skip
            metrics.DELTA_CONFLICTS.labels(job.sink).inc()
            time.sleep(min(5.0, 0.2 * 2**attempt))
        raise RetryableError(
            f"sink {job.sink}: {path} kept changing under this batch "
            f"({CONFLICT_RETRIES} merges lost the race); the batch will be retried"
        )

    def _empty_before(self, job: FoldJob, before_ts: int) -> None:
        """The source table was truncated at `before_ts`: the state table rewritten without the cells older than
        it (a row left with none is gone). Recorded in the fold record afterwards, so a kill in between redoes
        it; the view applies it meanwhile."""
        if not DeltaTable.isDeltaTable(job.spark, job.path):
            return
        started = time.perf_counter()
        rows = job.spark.sql(emptied_rows_sql(job.path, before_ts, job.options.kept_versions,
                                              job.options.typed_columns))  # fmt: skip
        rows.write.format("delta").mode("overwrite").save(job.path)
        metrics.TRUNCATES.labels(job.sink, job.path).inc()
        log.info("sink %s: %s: source truncated at %d: cells older than it removed in %.1f s", job.sink, job.path,
                 before_ts, time.perf_counter() - started)  # fmt: skip

    # --- the view ------------------------------------------------------------------------------
    def view_sql(self, spark: SparkSession, state_path: str, state: StructType | None, record: FoldRecord,
                 include_deleted: bool) -> str:  # fmt: skip
        schema = hbase_state_schema(record.typed_columns)
        columns = ", ".join(quoted(f.name) for f in schema.fields)
        stored = f"SELECT {columns} FROM {delta_path(state_path)}" if state is not None else empty(schema)
        pending = pending_sql(record, record.folded_version)
        grouped = f"SELECT {', '.join(CELLS_BY_ROW)} FROM ({steps(pending, CELL_STEPS)}) GROUP BY row_key"
        joined = (
            f"SELECT g.row_key, g.new_cells, g.batch_ts_ms, s.old_puts, s.old_tombstones, s.old_source_ts_ms "
            f"FROM ({grouped}) g LEFT JOIN ({steps(stored, [STORED_FOR_MERGE])}) s ON g.row_key = s.row_key"
        )
        changed = steps(joined, [*merge_steps(record.kept_versions, record.typed_columns), [columns]])
        untouched = f"SELECT {columns} FROM ({stored}) s LEFT ANTI JOIN ({grouped}) g ON s.row_key = g.row_key"
        rows = _unexpired(f"{untouched} UNION ALL {changed}", record, columns)
        return without_deleted(rows, ["exists"], include_deleted)


LAYOUT = HBaseCells()


def _unexpired(rows: str, record: FoldRecord, columns: str) -> str:
    """HBase rows without the cells HBase no longer shows, neither of which any change says: the cells past
    their family's TTL at the time of the query (expiry writes nothing to the WAL), and those older than the
    table's newest truncate (folded, or still in the log: the peer's op t events)."""
    expired = " ".join(
        f"WHEN X'{family.encode().hex()}' THEN c.ts < unix_millis(current_timestamp()) - {int(ttl) * 1000}"
        for family, ttl in sorted(record.family_ttls.items())
    )
    truncates = f"SELECT max(pos[0]) FROM ({pending_sql(record, record.folded_version)}) WHERE op = 't'"
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
    return steps(live, [visible, merge_steps(kept_versions, typed_columns)[-1], [columns]])


def emptied_rows_sql(state_path: str, before_ts: int, kept_versions: int, typed_columns: dict[str, str]) -> str:
    """A state table as it is once every cell older than `before_ts` is gone (puts and delete markers; a row
    left with neither is gone too): what a fold writes for the source's truncate."""
    schema = hbase_state_schema(typed_columns)
    columns = ", ".join(quoted(f.name) for f in schema.fields)
    older = f"c.ts < {int(before_ts)}"
    rows = hiding(f"SELECT {columns} FROM {delta_path(state_path)}", older, kept_versions, typed_columns, columns,
                  f"filter(tombstones, c -> NOT ({older}))")  # fmt: skip
    return f"SELECT * FROM ({rows}) WHERE size(puts) > 0 OR size(tombstones) > 0"
