"""The Delta sink's work behind the append path: each source table's pending changes folded into its state
table (`layouts`: one strategy per layout), the fold records, the tables' names in the catalog, and the
upkeep of the state tables and the change log (compaction, VACUUM). `FoldScheduler` (`folds.py`) decides when
each table is folded and runs the folds in a thread of their own.

A fold fixes the log version first, so the fold and its record agree on what was folded; the record is
written only after the MERGE committed (a kill in between redoes the same fold, which the layouts make a
no-op where it already applied).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.pipeline.sinks.delta import catalog
from cdcflow.pipeline.sinks.delta import log as change_log
from cdcflow.pipeline.sinks.delta.cut.tracker import CutTracker
from cdcflow.pipeline.sinks.delta.history.append import FORMAT as HISTORY_FORMAT
from cdcflow.pipeline.sinks.delta.history.append import keeps_by_appending
from cdcflow.pipeline.sinks.delta.history.fold import fold_with_history
from cdcflow.pipeline.sinks.delta.layouts import layout_of
from cdcflow.pipeline.sinks.delta.layouts.base import FoldHooks, FoldJob
from cdcflow.pipeline.sinks.delta.records import (
    FoldRecord,
    Layout,
    deletes_path,
    history_path,
    read_record,
    read_text,
    write_record,
    write_text,
)
from cdcflow.pipeline.sinks.delta.source_shapes import SourceShapes
from cdcflow.pipeline.sinks.delta.tables import table_size, turn_on_deletion_vectors

log = logging.getLogger(__name__)

FOLD_POOL = "cdcflow-folds"
VACUUM_EVERY_OPTIMIZES = 10
# A state table (and its deletes) is compacted after this many folds wrote to it (Delta's own
# auto-compaction waits for 50 small files).
COMPACT_EVERY_FOLDS = 25
RETENTION_HOURS = 168  # Delta's default deletedFileRetentionDuration, which the log keeps


class FoldService:
    def __init__(self, sink: str, options: DeltaStateOptions, log_path: str, shapes: SourceShapes,
                 hooks: FoldHooks, cuts: CutTracker | None = None) -> None:  # fmt: skip
        self.sink = sink
        self.cuts = cuts
        self.options = options
        self.log_path = log_path
        self.shapes = shapes
        self.hooks = hooks
        self.spark: SparkSession | None = None
        self.log_version = -1  # the newest log version the append path has committed (or found)
        self._records: dict[str, FoldRecord] = {}  # state path → its fold record, as last written
        self._records_lock = threading.Lock()
        self._folds_since_compaction: dict[str, int] = {}  # state path → folds that wrote since its compaction
        self._catalog_lock = threading.Lock()
        self._unnamed: set[str] = set()  # state paths registered since the last housekeeping
        self._named: set[str] = set()  # state paths whose view and state table this process named
        self._optimized_version = -1  # the log version after which the log was last compacted
        self._optimizations = 0  # compactions of the log by this process (VACUUM follows every tenth)
        self._with_deletion_vectors: set[str] = set()  # tables (state, history) found with deletion vectors on

    def opened(self, spark: SparkSession, log_version: int) -> None:
        self.spark = spark
        self.log_version = log_version
        self._optimized_version = log_version

    # --- the tables the log feeds --------------------------------------------------------------
    def register(self, spark: SparkSession, path: str, connector: str, source: str, db: str, table: str) -> None:
        """The table's fold record written if it has none. Right after the first log commit holding the table's
        changes: until then a view of the path finds no record (a table that does not exist yet); a crash in
        between replays the batch, which registers it."""
        if path in self._records:
            return
        record = read_record(spark, path)
        if record is None or record.log != self.log_path:
            layout: Layout = "hbase" if connector == "hbase" else self.options.mysql_layout
            history = self.options.history_of(source, db, table) if layout != "hbase" else None
            if record is not None:
                log.warning("sink %s: %s was fed by the change log %s; continuing it from %s", self.sink, path,
                            record.log, self.log_path)  # fmt: skip
            record = FoldRecord(
                log=self.log_path, source=source, db=db, table=table, layout=layout,
                kept_versions=self.options.kept_versions, typed_columns=dict(self.options.typed_columns),
                mysql_columns=self.shapes.shape_doc(source, db, table) if layout == "typed" else [],
                family_ttls=(self.shapes.family_ttls(db, table) or {}) if layout == "hbase" else {},
                history=history is not None,
                track_history_on=list(history.track_history_on) if history and history.track_history_on else None,
            )  # fmt: skip
            write_record(spark, path, record)
            self._write_table_index(spark, path)
        with self._records_lock:
            self._records[path] = record
            self._unnamed.add(path)  # named by the fold thread (a catalog call per new table is slow)

    def registered_tables(self, spark: SparkSession) -> list[str]:
        """State paths this log has fed (an index kept in the log's folder), so a restart finds tables with
        changes not yet folded."""
        text = read_text(spark, self._index_path())
        return [line for line in (text or "").splitlines() if line]

    def _index_path(self) -> str:
        return f"{self.log_path.rstrip('/')}/_cdcflow_tables"

    def _write_table_index(self, spark: SparkSession, path: str) -> None:
        known = self.registered_tables(spark)
        if path not in known:
            write_text(spark, self._index_path(), "\n".join([*known, path]) + "\n")

    def _register_names(self, spark: SparkSession, path: str, record: FoldRecord) -> None:
        """The table's view and state table by name in the session's catalog (after each fold: the view names
        the folded version). A catalog that fails costs the names, never the data."""
        if not self.options.register_in_catalog:
            return
        try:
            with self._catalog_lock:
                # Once both names are ours (the state table exists), later folds only replace the view.
                prefix, known = self.options.catalog_database_prefix, path in self._named
                named = catalog.register(spark, path, prefix, record.db, record.table, known)
                if named and DeltaTable.isDeltaTable(spark, path):
                    self._named.add(path)
                if record.history:
                    catalog.register_history(spark, path, prefix, record.db, record.table)
        except Exception as exc:
            log.warning("sink %s: %s: could not register %s.%s in the Spark catalog (%s); it stays readable by "
                        "path (cdcflow.pipeline.sinks.delta.views.current_view)", self.sink, path, record.db,
                        record.table, exc)  # fmt: skip

    # --- folds ---------------------------------------------------------------------------------
    def fold(self, path: str) -> int:
        """Fold the table's logged changes not yet in its state table; the number of changes read."""
        spark = self.spark
        assert spark is not None
        # The fold's jobs share the cores with the batches' in a pool of their own (FAIR scheduling,
        # session.py), so a long fold slows the appends instead of stopping them.
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
        # (Delta's merge.materializeSource=none, which skips its copy of the MERGE's source, fails with persisted
        # sources: DELTA_MERGE_SOURCE_CACHED_DURING_EXECUTION whenever the source plan is cached. With sources kept
        # as local checkpoints instead it ran, and saved nothing: benchmarks/README.md.)
        with self._records_lock:
            record = self._records.get(path)
        record = record or read_record(spark, path)
        if record is None:
            return 0
        started = time.perf_counter()
        version = self.log_version  # every batch logged so far (the log's newest version after a start)
        history = self.options.history_of(record.source, record.db, record.table) if record.layout != "hbase" else None
        if record.folded_version >= version and (history is None or record.history_seeded):
            if path not in self._named:  # folded by an earlier process that ended before naming it
                self._register_names(spark, path, record)
            return 0
        job = FoldJob(spark, self.sink, self.options, self.shapes, self.hooks, path, record, version, history)
        try:
            if history is None:
                folded = layout_of(record.layout).fold(job)
            else:
                folded = fold_with_history(job, layout_of(record.layout))
            self.hooks.merged(path)
        except BaseException:
            with self._records_lock:  # a history step may have written the record meanwhile: read it again
                self._records.pop(path, None)
            raise
        took_ms = int((time.perf_counter() - started) * 1000)
        done = record.folded(version, int(time.time() * 1000), took_ms, folded.changes)
        done = dataclasses.replace(
            done, history=history is not None, history_seeded=history is not None,
            track_history_on=list(history.track_history_on) if history and history.track_history_on else None,
            history_truncates=[list(t) for t in folded.history_truncates or []],
        )  # fmt: skip
        if history is not None:
            appended = keeps_by_appending(record)
            done = dataclasses.replace(
                done, history_format=HISTORY_FORMAT if appended else 1, history_appending=False,
                history_state_version=folded.history_state_version if appended else None,
                history_folded_seq=folded.history_folded_seq if appended else None,
            )  # fmt: skip
        truncate = folded.truncated_at
        if record.layout == "typed":
            shape = self.shapes.shape_doc(record.source, record.db, record.table)
            if shape:
                done = dataclasses.replace(done, mysql_columns=shape)
        if record.layout == "hbase":
            if truncate is not None and truncate[0] > (record.emptied_before_ts or -1):
                done = dataclasses.replace(done, emptied_before_ts=truncate[0])
            ttls = self.shapes.family_ttls(record.db, record.table)  # a TTL changed at the source shows from here on
            if ttls is not None:
                done = dataclasses.replace(done, family_ttls=ttls)
        elif truncate is not None and (record.truncated_at is None or truncate > record.truncated_at):
            done = dataclasses.replace(done, truncated_at=truncate)
        write_record(spark, path, done)
        with self._records_lock:
            self._records[path] = done
            if folded.changes:
                self._folds_since_compaction[path] = self._folds_since_compaction.get(path, 0) + 1
        self._register_names(spark, path, done)
        log.info("sink %s: %s: folded %d changes up to log version %d in %.1f s", self.sink, path, folded.changes,
                 version, took_ms / 1000)  # fmt: skip
        for table in (path, history_path(path)) if history is not None else (path,):
            self._deletion_vectors_when_large(spark, table)
        return folded.changes

    def _deletion_vectors_when_large(self, spark: SparkSession, path: str) -> None:
        """Deletion vectors turned on for a table a fold has grown past `deletion_vectors_from_bytes` (after the
        fold, so a table is left in its shape by the fold that grew it, and a replay that changes no row commits
        nothing); the next fold's MERGE marks rows. Only this sink's fold thread writes the table, so nothing
        conflicts; a failure costs the saving, never data (the next fold tries again)."""
        if not self.options.deletion_vectors or path in self._with_deletion_vectors:
            return
        size = table_size(spark, path)
        if size is None:
            return
        if not size.deletion_vectors:
            if size.bytes < self.options.deletion_vectors_from_bytes:
                return
            try:
                turn_on_deletion_vectors(spark, path)
            except Exception as exc:
                log.warning("sink %s: %s: deletion vectors not turned on (tried again at the next fold): %s",
                            self.sink, path, exc)  # fmt: skip
                return
            log.info("sink %s: %s: deletion vectors turned on (%d bytes, past deletion_vectors_from_bytes %d)",
                     self.sink, path, size.bytes, self.options.deletion_vectors_from_bytes)  # fmt: skip
        self._with_deletion_vectors.add(path)

    # --- upkeep ----------------------------------------------------------------------------------
    def housekeeping(self) -> None:
        """The fold thread's round after its folds: names for new tables, then the compactions due."""
        spark = self.spark
        with self._records_lock:
            unnamed = [(p, self._records[p]) for p in self._unnamed]
            self._unnamed.clear()
        for path, record in unnamed:
            if spark is not None:
                self._register_names(spark, path, record)
        self.compact_if_due()
        self._optimize_log_if_due()
        self.update_cut()

    def update_cut(self, force: bool = False) -> None:
        """The consistent cut moved to what the log holds now (when due, or `force`). It changes no data: a failure
        is logged, and the next round tries again."""
        if self.cuts is None or self.spark is None:
            return
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
        try:
            self.cuts.step(self.spark, self.log_version, force)
        except Exception as exc:
            log.warning("sink %s: the consistent cut was not updated (tried again in the next round): %s", self.sink,
                        exc)  # fmt: skip

    def compact_if_due(self) -> None:
        """Compact each state table (and its deletes and history) after every COMPACT_EVERY_FOLDS folds that wrote
        to it: each fold adds a file or two."""
        spark = self.spark
        with self._records_lock:
            due = [p for p, n in self._folds_since_compaction.items() if n >= COMPACT_EVERY_FOLDS]
        for path in due if spark is not None else ():
            assert spark is not None
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
            started = time.perf_counter()
            for table in (path, deletes_path(path), history_path(path)):
                if DeltaTable.isDeltaTable(spark, table):
                    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
            with self._records_lock:
                self._folds_since_compaction[path] = 0
            log.info("sink %s: %s compacted (OPTIMIZE) in %.1f s", self.sink, path, time.perf_counter() - started)

    def _optimize_log_if_due(self) -> None:
        """Compact the log's small files (one or more per table per batch) every `log_optimize_every` versions,
        in the fold thread, then VACUUM what compaction left behind. OPTIMIZE commits no data change: the
        appends, which only add files, never conflict with it, and the folds' Change Data Feed reads skip it."""
        every, spark = self.options.log_optimize_every, self.spark
        if not every or spark is None or self.log_version - self._optimized_version < every:
            return
        version = self.log_version
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
        started = time.perf_counter()
        spark.sql(f"OPTIMIZE delta.`{self.log_path}`").collect()
        self._optimized_version = version
        log.info("sink %s: change log %s compacted (OPTIMIZE, up to version %d) in %.1f s", self.sink, self.log_path,
                 version, time.perf_counter() - started)  # fmt: skip
        # VACUUM lists every file of the log: after the first compaction of a run, then every tenth.
        if self._optimizations % VACUUM_EVERY_OPTIMIZES == 0:
            self._vacuum_log(spark)
        self._optimizations += 1

    def _vacuum_log(self, spark: SparkSession) -> None:
        """Delete the log files compaction replaced, but never one a fold still needs: the folds read the files
        the commits after their table's folded version added (Change Data Feed), which OPTIMIZE unreferenced.
        VACUUM keeps files for the log's retention (Delta's week; Delta 4 ignores a RETAIN shorter or longer
        than it, and changing the property would be a metadata commit that fails the appends in flight), so it
        runs only while every table's oldest unfolded commit is younger than that, with a day of margin."""
        needed = [r.folded_version + 1 for p in self.registered_tables(spark) if (r := read_record(spark, p))]
        cut_reads = self.cuts.oldest_needed_version() if self.cuts is not None else None
        if cut_reads is not None and cut_reads >= 0:  # the consistent cut counts the changes of these versions
            needed.append(cut_reads)
        oldest_ms = change_log.commit_time_ms(spark, self.log_path, min(needed, default=self.log_version))
        if not vacuum_is_safe(int(time.time() * 1000), oldest_ms):
            log.warning("sink %s: change log %s not vacuumed: a table has changes not folded since %s (older than "
                        "the log's retention less a day)", self.sink, self.log_path, oldest_ms)  # fmt: skip
            return
        started = time.perf_counter()
        spark.sql(f"VACUUM delta.`{self.log_path}`").collect()
        log.info("sink %s: change log %s vacuumed (files unreferenced for over %d hours) in %.1f s", self.sink,
                 self.log_path, RETENTION_HOURS, time.perf_counter() - started)  # fmt: skip


def vacuum_is_safe(now_ms: int, oldest_needed_ms: int | None) -> bool:
    """Whether VACUUM at the log's retention keeps every file a fold still needs: the oldest commit some table
    has not folded yet is younger than the retention, less a day of margin."""
    return oldest_needed_ms is None or now_ms - oldest_needed_ms < (RETENTION_HOURS - 24) * 3_600_000
