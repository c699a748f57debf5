"""Delta Lake current-state sink, merge-on-read (decision 0014): every batch is one append to the
sink's change log (`log.py`, all tables in one commit); each source table's changes are folded into
its current-state table behind it (`folds.py`: when `fold_rows` changes are pending or the oldest
is `fold_interval_s` old, in a background thread); `views.current_view` reads a table exactly as of
the last applied batch (the state plus the changes not folded yet).

State tables are at <path>/<source name>/<db>/<table> (two sources with the same db.table stay
apart), each with its fold record beside it (`records.py`).

HBase-sourced tables are per cell (`hbase_state.py`). A fold groups the table's pending changes by
row, reads the current state of just those rows, merges in Spark SQL (`state_sql`: the rules of
`row_state`, checked against it; pure, idempotent, independent of order and batch boundaries), and
MERGEs back only the rows that changed, each guarded by the state it was merged from: a row another
writer changed meanwhile is not overwritten, the MERGE's counts show it (or Delta refuses the
commit), and the table is merged again.

MySQL-sourced tables are per row, guarded by position: typed (`mysql_typed.py`) or, with
`mysql_layout: json`:

    key string (the primary-key columns as JSON), after string (row image as JSON), deleted
    boolean, pos array<bigint>, op string, source_ts_ms bigint

The newest change per key wins, and MERGE updates a row only when the incoming position is greater
than the stored one. A delete removes the row (Change Data Feed reports a delete) and keeps the
key's position in the table's deletes (`records.deletes_path`): a fold and a view drop every change
older than its key's delete, so an older create replayed later cannot bring the row back. (Tables
folded before this kept deleted rows as tombstones, `deleted` true: those still guard and are left
out of the views.)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.hbase.admin import family_ttl
from cdcflow.clients.kafka.client import KafkaEndpoint
from cdcflow.config.sinks import DeltaStateOptions, SinkOptions
from cdcflow.errors import CdcflowError, ConfigError, RetryableError, TerminalError
from cdcflow.pipeline import metrics
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta import catalog
from cdcflow.pipeline.sinks.delta import log as change_log
from cdcflow.pipeline.sinks.delta import mysql_typed as mt
from cdcflow.pipeline.sinks.delta.folds import FoldScheduler
from cdcflow.pipeline.sinks.delta.hbase_state import (
    cells_by_row,
    hbase_state_schema,
    merged_rows,
    stored_for_merge,
)
from cdcflow.pipeline.sinks.delta.records import (
    FoldRecord,
    Layout,
    deletes_path,
    read_record,
    read_text,
    write_record,
    write_text,
)
from cdcflow.pipeline.sinks.delta.tables import commit_conflict, ensure_table, refuse_old_layout
from cdcflow.pipeline.sinks.delta.views import current_view, emptied_rows_sql, hbase_state_rows
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn, latest_table_record, mysql_columns
from cdcflow.pipeline.sinks.naming import mapped_table
from cdcflow.pipeline.sinks.table_events import under_policy

__all__ = ["DeltaStateSink", "hbase_state_rows"]

log = logging.getLogger(__name__)
# Typed MySQL tables: Change Data Feed for downstream readers, type widening for MODIFY COLUMN.
TYPED_TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableTypeWidening": "true"}

MYSQL_STATE = StructType(
    [
        StructField("key", StringType(), False),
        StructField("after", StringType()),
        StructField("deleted", BooleanType()),
        StructField("op", StringType()),
        StructField("pos", ArrayType(LongType())),
        StructField("source_ts_ms", LongType()),
    ]
)
DELETED_KEYS = StructType(
    [StructField("key", StringType(), False), StructField("pos", ArrayType(LongType())),
     StructField("source_ts_ms", LongType())]
)  # fmt: skip


# Raised inside a typed MySQL table's MERGE by a row that does not fit the table's known shape.
UNFIT_MARK = "cdcflow: the row does not fit the typed table's known shape"
# How often a batch runs a table's MERGE again after another writer committed first.
CONFLICT_RETRIES = 8
FOLD_POOL = "cdcflow-folds"
VACUUM_EVERY_OPTIMIZES = 10
# A state table (and its deletes) is compacted after this many folds wrote to it (Delta's own
# auto-compaction waits for 50 small files).
COMPACT_EVERY_FOLDS = 25
RETENTION_HOURS = 168  # Delta's default deletedFileRetentionDuration, which the log keeps
# Tables folded at the same time (HBase- and MySQL-sourced alike).
MERGE_THREADS = 4


class DeltaStateSink(Sink):
    """Options: cdcflow.config.sinks.DeltaStateOptions."""

    def __init__(self, name: str, options: SinkOptions, context: dict[str, Any]) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, DeltaStateOptions)
        if not options.path and context.get("data_dir"):
            # default: beside the checkpoints, <stack home>/pipeline/delta
            options = options.model_copy(update={"path": f"{context['data_dir']}/delta"})
        self.opts = options
        self.options = options
        if options.log_path:
            self.log_path = options.log_path
        elif options.path:
            self.log_path = f"{options.path.rstrip('/')}/_changes"
        else:
            raise ConfigError(f"sink {name}: set path (the change log goes to <path>/_changes) or log_path")
        self._checked_paths: set[str] = set()
        self._mysql_shapes: dict[tuple[str, str, str], list[MySqlColumn]] = {}
        self._records: dict[str, FoldRecord] = {}  # state path → its fold record, as last written
        self._records_lock = threading.Lock()
        self._folds_since_compaction: dict[str, int] = {}  # state path → folds that wrote since its compaction
        self._catalog_lock = threading.Lock()
        self._unnamed: set[str] = set()  # state paths registered since the last housekeeping
        self._named: set[str] = set()  # state paths whose view and state table this process named
        self._log_ready = False
        self.batches = change_log.BatchLog(self.log_path, name)
        self._log_version = -1  # the newest log version this sink knows of
        self._spark: SparkSession | None = None
        self._optimized_version = -1  # the log version after which the log was last compacted
        self._optimizations = 0  # compactions by this sink object (VACUUM follows every tenth)
        self.folds = FoldScheduler(
            name, self._fold, options.fold_rows, options.fold_interval_s, MERGE_THREADS, self._housekeeping
        )

    def table_path(self, source: str, db: str, table: str) -> str:
        mapped = mapped_table(self.opts.table_map, db, table, source)
        if mapped:
            return mapped
        if not self.opts.path:
            raise ConfigError(f"sink {self.name}: no table_map entry for {source}/{db}.{table} and no path")
        return f"{self.opts.path.rstrip('/')}/{source}/{db}/{table}"

    def _checked_path(self, spark: SparkSession, source: str, db: str, table: str) -> str:
        path = self.table_path(source, db, table)
        if path not in self._checked_paths:
            if self.opts.path and not mapped_table(self.opts.table_map, db, table, source):
                refuse_old_layout(spark, self.name, f"{self.opts.path.rstrip('/')}/{db}/{table}", path)
            self._checked_paths.add(path)
        return path

    # --- the append path: one commit per batch ---------------------------------------------
    # One action over the batch (the append): the runner counts through it instead of persisting,
    # and skips its dedupe (folds and views apply a change stored twice once).
    reads_events_once = True
    wants_deduplicated_events = False

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        self._log_batch(events, batch_id, reassembled=False)

    def apply_reassembled(self, events: DataFrame, batch_id: int) -> None:
        # A commit of its own, kept apart from the batch's first pass by the log's batch marks.
        self._log_batch(events, batch_id, reassembled=True)

    def _log_batch(self, events: DataFrame, batch_id: int, reassembled: bool) -> None:
        spark = events.sparkSession
        rows = change_log.changelog_rows(under_policy(events, self.opts.on_drop), batch_id)
        if not self._log_ready:
            change_log.ensure_log(spark, self.log_path, rows.schema)
            self._open_log(spark)
        started = time.perf_counter()
        commit = self.batches.append(spark, rows, self.query_id or "", batch_id, reassembled)
        if commit is None:
            # A batch replayed after a crash, committed before. The crash may have come before its
            # tables were registered, so they are (from the batch itself).
            tables = {
                (r["connector"], r["source_name"], r["db"], r["table"]): int(r["count"])
                for r in rows.groupBy(*change_log.PARTITIONS).count().collect()
            }
            log.info("sink %s: batch %d was logged before (a replay); %d table(s)", self.name, batch_id, len(tables))
        else:
            tables = commit.tables
        self._log_version = self.batches.version
        logged: dict[str, int] = {}
        for (connector, source, db, table), count in tables.items():  # registered once logged
            path = self._registered(spark, connector, source, db, table)
            logged[path] = logged.get(path, 0) + count
        log.info("sink %s: batch %d: %d changes of %d table(s) logged in %.2f s", self.name, batch_id,
                 sum(logged.values()), len(logged), time.perf_counter() - started)  # fmt: skip
        self.folds.logged(logged)

    def _open_log(self, spark: SparkSession) -> None:
        """Pick up an existing change log: its version, and the fold thread told of every table it
        has fed (an earlier process may have logged changes it did not fold or name)."""
        self._spark = spark
        self.batches.open(spark)
        self._log_version = self.batches.version
        self._optimized_version = self._log_version
        self._log_ready = True
        self.folds.start(self._registered_tables(spark))

    def open(self, spark: SparkSession) -> None:
        if not self._log_ready and DeltaTable.isDeltaTable(spark, self.log_path):
            self._open_log(spark)

    def flush(self, spark: SparkSession) -> None:
        """Fold every table with pending changes now (an --available-now run's last step), also
        when this run applied no batch: a killed run may have logged changes it never folded."""
        self.open(spark)
        if self._log_ready:  # else nothing was ever logged
            self.folds.fold_all()

    def close(self) -> None:
        self.folds.stop()

    def status(self) -> dict[str, Any]:
        return {"tables": self.folds.status()}

    def current_view(self, spark: SparkSession, source: str, db: str, table: str) -> DataFrame:
        """A table's current rows, exact as of the last applied batch (tombstones left out)."""
        return current_view(spark, self.table_path(source, db, table))

    def _registered(self, spark: SparkSession, connector: str, source: str, db: str, table: str) -> str:
        """The table's state path, its fold record written if it has none. Right after the first log
        commit holding the table's changes: until then a view of the path finds no record (a table
        that does not exist yet); a crash in between replays the batch, which registers it."""
        path = self._checked_path(spark, source, db, table)
        if path in self._records:
            return path
        record = read_record(spark, path)
        if record is None or record.log != self.log_path:
            layout: Layout = "hbase" if connector == "hbase" else self.opts.mysql_layout
            if record is not None:
                log.warning("sink %s: %s was fed by the change log %s; continuing it from %s", self.name, path,
                            record.log, self.log_path)  # fmt: skip
            record = FoldRecord(
                log=self.log_path, source=source, db=db, table=table, layout=layout,
                kept_versions=self.opts.kept_versions, typed_columns=dict(self.opts.typed_columns),
                mysql_columns=self._shape_doc(source, db, table) if layout == "typed" else [],
                family_ttls=(self._family_ttls(db, table) or {}) if layout == "hbase" else {},
            )  # fmt: skip
            write_record(spark, path, record)
            self._write_table_index(spark, path)
        with self._records_lock:
            self._records[path] = record
            self._unnamed.add(path)  # named by the fold thread (a catalog call per new table is slow)
        return path

    def _register_names(self, spark: SparkSession, path: str, record: FoldRecord) -> None:
        """The table's view and state table by name in the session's catalog (after each fold: the
        view names the folded version). A catalog that fails costs the names, never the data."""
        if not self.opts.register_in_catalog:
            return
        try:
            with self._catalog_lock:
                # Once both names are ours (the state table exists), later folds only replace the view.
                prefix, known = self.opts.catalog_database_prefix, path in self._named
                named = catalog.register(spark, path, prefix, record.db, record.table, known)
                if named and DeltaTable.isDeltaTable(spark, path):
                    self._named.add(path)
        except Exception as exc:
            log.warning("sink %s: %s: could not register %s.%s in the Spark catalog (%s); it stays readable by "
                        "path (cdcflow.pipeline.sinks.delta.views.current_view)", self.name, path, record.db,
                        record.table, exc)  # fmt: skip

    def _state_properties(self) -> dict[str, str]:
        """Properties of a new state table. Deletion vectors: a fold's MERGE marks the rows it
        replaces instead of rewriting their files, so its cost follows the changes, not the table
        (measured: a fold of 100k updates into 5M rows 9.5 s with them, 20.3 s without; 50k rows 5.0
        vs 5.2 s; benchmarks/delta_table_size.py)."""
        return {"delta.enableDeletionVectors": "true"} if self.opts.deletion_vectors else {}

    def _shape_doc(self, source: str, db: str, table: str) -> list[dict[str, Any]]:
        """The table's columns as the fold record keeps them; none for a table the schema history has no record of
        (its changes so far are truncates: a table dropped or renamed away before a row event described it)."""
        try:
            return [vars(c) for c in self._mysql_columns(source, db, table, refresh=False)]
        except NoTableRecord:
            return []

    def _family_ttls(self, db: str, table: str) -> dict[str, int] | None:
        """The source HBase table's families that have a TTL (seconds); None when the source cannot be read now."""
        zk = self.context.get("zk_quorum")
        if not zk or zk == "unused":
            return None
        name = table if db == "default" else f"{db}:{table}"
        try:
            client = NativeHBaseClient(str(zk), op_timeout_s=10.0)
            try:
                ttls = {fam: family_ttl(attrs) for fam, attrs in client.family_attributes(name).items()}
            finally:
                client.close()
        except (CdcflowError, OSError, ValueError) as exc:
            log.info("sink %s: the TTLs of HBase table %s cannot be read now (%s)", self.name, name, exc)
            return None
        return {fam: ttl for fam, ttl in ttls.items() if ttl is not None}

    def _shape_doc_refreshed(self, source: str, db: str, table: str) -> None:
        try:
            self._mysql_columns(source, db, table, refresh=True)
        except NoTableRecord:
            pass

    def _index_path(self) -> str:
        return f"{self.log_path.rstrip('/')}/_cdcflow_tables"

    def _registered_tables(self, spark: SparkSession) -> list[str]:
        """State paths this log has fed (an index kept in the log's folder), so a restart finds
        tables with changes not yet folded."""
        text = read_text(spark, self._index_path())
        return [line for line in (text or "").splitlines() if line]

    def _write_table_index(self, spark: SparkSession, path: str) -> None:
        known = self._registered_tables(spark)
        if path not in known:
            write_text(spark, self._index_path(), "\n".join([*known, path]) + "\n")

    # --- folds: pending changes into the state tables ----------------------------------------
    def _fold(self, path: str) -> int:
        """Fold the table's logged changes not yet in its state table; the number of changes read.

        The log version is fixed first, so the fold and its record agree on what was folded; the
        record is written only after the MERGE committed (a kill in between redoes the same fold)."""
        spark = self._spark
        assert spark is not None
        # The fold's jobs share the cores with the batches' in a pool of their own (FAIR scheduling,
        # session.py), so a long fold slows the appends instead of stopping them.
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
        # (Delta's merge.materializeSource=none, which saves a copy of the MERGE's source, fails here:
        # DELTA_MERGE_SOURCE_CACHED_DURING_EXECUTION once the batches' thread caches meanwhile.)
        with self._records_lock:
            record = self._records.get(path)
        record = record or read_record(spark, path)
        if record is None:
            return 0
        started = time.perf_counter()
        version = self._log_version  # every batch logged so far (the log's newest version after a start)
        if record.folded_version >= version:
            if path not in self._named:  # folded by an earlier process that ended before naming it
                self._register_names(spark, path, record)
            return 0
        pending = change_log.table_changes(
            spark, self.log_path, record.source, record.db, record.table, record.folded_version, version
        )
        if record.layout == "hbase":
            changes, truncated_at = self._fold_hbase(spark, path, record, pending, version)
        else:
            changes, truncated_at = self._fold_mysql(spark, path, record, pending, version)
        folded_truncate = truncated_at
        self._merged_before_record(path)
        took_ms = int((time.perf_counter() - started) * 1000)
        shape = self._shape_doc(record.source, record.db, record.table) if record.layout == "typed" else []
        done = record.folded(version, int(time.time() * 1000), took_ms, changes)
        if shape:
            done = dataclasses.replace(done, mysql_columns=shape)
        if record.layout == "hbase":
            if folded_truncate is not None and folded_truncate[0] > (record.emptied_before_ts or -1):
                done = dataclasses.replace(done, emptied_before_ts=folded_truncate[0])
        elif folded_truncate is not None and (record.truncated_at is None or folded_truncate > record.truncated_at):
            done = dataclasses.replace(done, truncated_at=folded_truncate)
        if record.layout == "hbase":  # a TTL changed at the source shows in the views from this fold on
            ttls = self._family_ttls(record.db, record.table)
            if ttls is not None:
                done = dataclasses.replace(done, family_ttls=ttls)
        write_record(spark, path, done)
        with self._records_lock:
            self._records[path] = done
            if changes:
                self._folds_since_compaction[path] = self._folds_since_compaction.get(path, 0) + 1
        self._register_names(spark, path, done)
        log.info("sink %s: %s: folded %d changes up to log version %d in %.1f s", self.name, path, changes,
                 version, took_ms / 1000)  # fmt: skip
        return changes

    def _housekeeping(self) -> None:
        """The fold thread's round after its folds: names for new tables, then the log's compaction."""
        spark = self._spark
        with self._records_lock:
            unnamed = [(p, self._records[p]) for p in self._unnamed]
            self._unnamed.clear()
        for path, record in unnamed:
            if spark is not None:
                self._register_names(spark, path, record)
        self._compact_if_due()
        self._optimize_log_if_due()

    def _compact_if_due(self) -> None:
        """Compact each state table (and its deletes) after every COMPACT_EVERY_FOLDS folds that wrote to it:
        each fold adds a file or two."""
        spark = self._spark
        with self._records_lock:
            due = [p for p, n in self._folds_since_compaction.items() if n >= COMPACT_EVERY_FOLDS]
        for path in due if spark is not None else ():
            assert spark is not None
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
            started = time.perf_counter()
            for table in (path, deletes_path(path)):
                if DeltaTable.isDeltaTable(spark, table):
                    spark.sql(f"OPTIMIZE delta.`{table}`").collect()
            with self._records_lock:
                self._folds_since_compaction[path] = 0
            log.info("sink %s: %s compacted (OPTIMIZE) in %.1f s", self.name, path, time.perf_counter() - started)

    def _optimize_log_if_due(self) -> None:
        """Compact the log's small files (one or more per table per batch) every `log_optimize_every`
        versions, in the fold thread, then VACUUM what compaction left behind. OPTIMIZE commits no
        data change: the appends, which only add files, never conflict with it, and the folds' Change
        Data Feed reads skip it."""
        every, spark = self.opts.log_optimize_every, self._spark
        if not every or spark is None or self._log_version - self._optimized_version < every:
            return
        version = self._log_version
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", FOLD_POOL)
        started = time.perf_counter()
        spark.sql(f"OPTIMIZE delta.`{self.log_path}`").collect()
        self._optimized_version = version
        log.info("sink %s: change log %s compacted (OPTIMIZE, up to version %d) in %.1f s", self.name, self.log_path,
                 version, time.perf_counter() - started)  # fmt: skip
        # VACUUM lists every file of the log: after the first compaction of a run, then every tenth.
        if self._optimizations % VACUUM_EVERY_OPTIMIZES == 0:
            self._vacuum_log(spark)
        self._optimizations += 1

    def _vacuum_log(self, spark: SparkSession) -> None:
        """Delete the log files compaction replaced, but never one a fold still needs: the folds read
        the files the commits after their table's folded version added (Change Data Feed), which
        OPTIMIZE unreferenced. VACUUM keeps files for the log's retention (Delta's week; Delta 4
        ignores a RETAIN shorter or longer than it, and changing the property would be a metadata
        commit that fails the appends in flight), so it runs only while every table's oldest
        unfolded commit is younger than that, with a day of margin."""
        needed = [r.folded_version + 1 for p in self._registered_tables(spark) if (r := read_record(spark, p))]
        oldest_ms = change_log.commit_time_ms(spark, self.log_path, min(needed, default=self._log_version))
        if not vacuum_is_safe(int(time.time() * 1000), oldest_ms):
            log.warning("sink %s: change log %s not vacuumed: a table has changes not folded since %s (older than "
                        "the log's retention less a day)", self.name, self.log_path, oldest_ms)  # fmt: skip
            return
        started = time.perf_counter()
        spark.sql(f"VACUUM delta.`{self.log_path}`").collect()
        log.info("sink %s: change log %s vacuumed (files unreferenced for over %d hours) in %.1f s", self.name,
                 self.log_path, RETENTION_HOURS, time.perf_counter() - started)  # fmt: skip

    def _merged_before_record(self, path: str) -> None:
        """Between a fold's MERGE and its record (tests die here: the next fold must redo it)."""

    def _folding(self, path: str, changes: int, record: FoldRecord, version: int) -> None:
        log.info("sink %s: %s: folding %d changes (log versions %d to %d)", self.name, path, changes,
                 record.folded_version + 1, version)  # fmt: skip

    def _fold_hbase(
        self, spark: SparkSession, path: str, record: FoldRecord, pending: DataFrame, version: int
    ) -> tuple[int, list[int] | None]:
        """Fold an HBase table's pending cells (and a truncate among them); (changes read, the newest truncate)."""
        pending = pending.persist()
        try:
            counted = pending.agg(
                F.count("*").alias("n"), F.max(F.when(F.col("op") == "t", F.col("pos"))).alias("t")
            ).first()
            changes = int(counted["n"]) if counted else 0
            truncated_at = [int(p) for p in counted["t"]] if counted and counted["t"] is not None else None
            if not changes:
                return 0, None
            self._folding(path, changes, record, version)
            emptied = max(record.emptied_before_ts or -1, truncated_at[0] if truncated_at else -1)
            cells = pending
            if emptied >= 0:  # cells older than the table's truncate are gone at the source
                cells = pending.withColumn("cells", F.filter("cells", lambda c: c["ts"] >= emptied))
            self._merge_hbase_table(spark, path, cells_by_row(cells))
            if truncated_at and truncated_at[0] > (record.emptied_before_ts or -1):
                self._empty_hbase_before(spark, path, truncated_at[0])
            return changes, truncated_at
        finally:
            pending.unpersist()

    def _fold_mysql(
        self, spark: SparkSession, path: str, record: FoldRecord, pending: DataFrame, version: int
    ) -> tuple[int, list[int] | None]:
        """MERGE the newest change per key into the state table (deletes delete), then append the
        deletes' keys; (changes read, the newest truncate). Changes older than a recorded delete of their
        key, or than the table's newest truncate, are dropped first. A truncate is recorded first (so the
        view applies it however far the fold got) and then deletes every stored row older than it. A kill
        anywhere redoes it all: the state MERGE finds the rows already gone.

        The pending changes are read once: reduced to the newest per key (truncates under one key of their
        own) and kept, then counted, merged and their deletes recorded from what was kept."""
        newest = change_log.newest_per_key_counted(pending).persist()
        try:
            counted = newest.agg(
                F.sum("_changes").alias("n"), F.count_if(F.col("op") == "d").alias("d"),
                F.max(F.when(F.col("op") == "t", F.col("pos"))).alias("t"),
                F.count_if(F.col("op") != "t").alias("rows"),
            ).first()  # fmt: skip
            changes = int(counted["n"] or 0) if counted else 0
            if not changes or counted is None:
                return 0, None
            self._folding(path, changes, record, version)
            truncated_at = [int(p) for p in counted["t"]] if counted["t"] is not None else None
            deleted_keys = deletes_path(path)
            if truncated_at is not None:
                self._truncate(spark, path, record, deleted_keys, truncated_at)
                if record.layout == "typed":  # a truncate may come with a new key (rekey): the shape as it is now
                    self._shape_doc_refreshed(record.source, record.db, record.table)
            if not counted["rows"]:
                return changes, truncated_at  # only truncates: nothing to merge (and perhaps no shape to merge with)
            latest = newest.where(F.col("op") != "t").drop("_changes")
            cut = max((t for t in (record.truncated_at, truncated_at) if t is not None), default=None)
            stored = (
                spark.read.format("delta").load(deleted_keys) if DeltaTable.isDeltaTable(spark, deleted_keys) else None
            )
            if stored is not None or cut is not None:
                latest = change_log.after_deletes(latest, stored, cut)
            if record.layout == "json":
                self._merge_guarded(path, functools.partial(self._mysql_json_merge, spark, path, latest))
            else:
                self._merge_mysql_typed(spark, path, latest, record.source, record.db, record.table)
            if counted["d"]:
                self._record_deletes(spark, deleted_keys, latest)
            return changes, truncated_at
        finally:
            newest.unpersist()

    def _truncate(
        self, spark: SparkSession, path: str, record: FoldRecord, deleted_keys: str, truncated_at: list[int]
    ) -> None:
        """A TRUNCATE in the fold's changes: recorded in the table's deletes (key WHOLE_TABLE), then every
        stored row older than it deleted (Change Data Feed reports the deletes)."""
        ensure_table(spark, deleted_keys, DELETED_KEYS)
        position = F.array(*(F.lit(p).cast("bigint") for p in truncated_at))
        spark.range(1).select(
            F.lit(change_log.WHOLE_TABLE).alias("key"),
            position.alias("pos"),
            F.lit(None).cast("bigint").alias("source_ts_ms"),
        ).write.format("delta").mode("append").save(deleted_keys)
        if DeltaTable.isDeltaTable(spark, path):
            pos = "pos" if record.layout == "json" else mt.POS
            self._merge_guarded(path, lambda: DeltaTable.forPath(spark, path).delete(F.col(pos) < position))
        log.info("sink %s: %s: truncated at %s (%s/%s.%s): rows older than it deleted", self.name, path,
                 truncated_at, record.source, record.db, record.table)  # fmt: skip
        metrics.TRUNCATES.labels(self.name, f"{record.db}.{record.table}").inc()

    def _record_deletes(self, spark: SparkSession, path: str, latest: DataFrame) -> None:
        """Append the fold's deletes (blind: no conflict with anyone, no read). A key deleted twice,
        or a fold redone after a kill, leaves several rows per key: readers ask whether *any* delete
        of the key is newer than a change, so the extra rows change nothing."""
        ensure_table(spark, path, DELETED_KEYS)
        rows = latest.where("deleted").select("key", "pos", "source_ts_ms")
        rows.write.format("delta").mode("append").save(path)

    # --- HBase: per cell -------------------------------------------------------------------
    def _empty_hbase_before(self, spark: SparkSession, path: str, before_ts: int) -> None:
        """The source table was truncated at `before_ts`: the state table rewritten without the cells older than
        it (a row left with none is gone). Recorded in the fold record afterwards, so a kill in between redoes
        it; the current view applies it meanwhile."""
        if not DeltaTable.isDeltaTable(spark, path):
            return
        started = time.perf_counter()
        rows = spark.sql(emptied_rows_sql(path, before_ts, self.opts.kept_versions, self.opts.typed_columns))
        rows.write.format("delta").mode("overwrite").save(path)
        metrics.TRUNCATES.labels(self.name, path).inc()
        log.info("sink %s: %s: source truncated at %d: cells older than it removed in %.1f s", self.name, path,
                 before_ts, time.perf_counter() - started)  # fmt: skip

    def _merge_hbase_table(self, spark: SparkSession, path: str, batch: DataFrame) -> None:
        """Read the stored state of the batch's rows, merge in Spark SQL (`state_sql`), and MERGE
        back the rows that changed, each guarded by the state it was merged from: a row another
        writer changed meanwhile is not overwritten, the MERGE's counts show it, and the table is
        read and merged again (as when Delta refuses the commit for a conflict)."""
        schema = hbase_state_schema(self.opts.typed_columns)
        columns = [f.name for f in schema.fields]
        for attempt in range(CONFLICT_RETRIES + 1):
            target = ensure_table(spark, path, schema, self._state_properties())
            stored = stored_for_merge(target.toDF())
            joined = batch.join(stored.join(batch.select("row_key"), "row_key", "left_semi"), "row_key", "left")
            merged = merged_rows(joined, self.opts.kept_versions, self.opts.typed_columns).persist()
            started = time.perf_counter()
            try:
                expected = merged.where("changed").count()
                if not expected:
                    return  # a replay, or changes HBase itself would ignore: nothing to write
                source = self._merge_source(path, merged.where("changed"))
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
            log.info("sink %s: %s: %d rows merged in %.1f s", self.name, path, expected, time.perf_counter() - started)
            if not conflict:
                return
            log.warning("sink %s: %s: another writer committed first (%s); merging again (%d)",
                        self.name, path, conflict, attempt + 1)  # fmt: skip
            metrics.DELTA_CONFLICTS.labels(self.name).inc()
            time.sleep(min(5.0, 0.2 * 2**attempt))
        raise RetryableError(
            f"sink {self.name}: {path} kept changing under this batch "
            f"({CONFLICT_RETRIES} merges lost the race); the batch will be retried"
        )

    def _merge_source(self, path: str, batch: DataFrame) -> DataFrame:
        """The MERGE's source rows for one table (tests wrap it, to land another writer's commit
        while the MERGE runs)."""
        return batch

    # --- MySQL: per row, guarded by position ------------------------------------------------
    def _merge_mysql_typed(
        self, spark: SparkSession, path: str, batch: DataFrame, source: str, db: str, table: str
    ) -> None:
        """The MERGE checks inside its own pass that every value fits the table's known shape
        (UNFIT_MARK raised from the source rows; a failed MERGE commits nothing). Only a batch that
        does not fit pays for the separate check: the schema history is read again, the table
        evolved, or the batch refused with the columns and values named."""
        try:
            self._merge_guarded(path, self._mysql_typed_merge(spark, path, batch, source, db, table, checked=False))
        except Exception as exc:
            if UNFIT_MARK not in str(exc):
                raise
            log.info("sink %s: %s: the batch holds columns or values the known shape of %s/%s.%s does not fit; "
                     "checking it against the schema history", self.name, path, source, db, table)  # fmt: skip
            metrics.DELTA_SHAPE_CHECKS.labels(self.name).inc()
            self._merge_guarded(path, self._mysql_typed_merge(spark, path, batch, source, db, table, checked=True))

    def _merge_guarded(self, path: str, merge: Callable[[], None]) -> None:
        """Run a MERGE whose guard is inside it; when Delta refuses the commit because another
        writer committed first, run it again (it re-reads the table)."""
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                merge()
                return
            except Exception as exc:
                if not commit_conflict(exc) or attempt == CONFLICT_RETRIES:
                    raise
                log.warning("sink %s: %s: another writer committed first (%s); merging again",
                            self.name, path, commit_conflict(exc))  # fmt: skip
                metrics.DELTA_CONFLICTS.labels(self.name).inc()
                time.sleep(min(5.0, 0.2 * 2**attempt))

    def _mysql_json_merge(self, spark: SparkSession, path: str, batch: DataFrame) -> None:
        fresh = not DeltaTable.isDeltaTable(spark, path)
        target = ensure_table(spark, path, MYSQL_STATE, self._state_properties())
        if fresh:
            _first_fold(batch, path)
            return
        (
            target.alias("t")
            .merge(batch.alias("s"), "t.key = s.key")
            .whenMatchedDelete(condition="s.deleted AND s.pos > t.pos")
            .whenMatchedUpdateAll(condition="s.pos > t.pos")
            .whenNotMatchedInsertAll(condition="NOT s.deleted")
            .execute()
        )

    def _mysql_typed_merge(
        self, spark: SparkSession, path: str, batch: DataFrame, source: str, db: str, table: str, checked: bool
    ) -> Callable[[], None]:
        """Convert the batch to the table's columns (the newest shape in the schema history),
        evolve the table (new columns, widened types), and return the guarded MERGE.

        Unchecked, with the shape known so far, the MERGE itself fails with UNFIT_MARK on a row
        that carries a column the shape lacks or a value that does not convert. Checked, a job of
        its own looks first, and the schema history is read again when the events do not fit."""
        label = f"{source}/{db}.{table}"
        if checked:
            columns, rows = self._fitting_shape(batch, source, db, table)
        else:
            columns = self._mysql_columns(source, db, table, refresh=False)
            rows = mt.typed_rows(batch, columns)
            # In the column every MERGE clause reads for every source row (the guard; inserted),
            # so a row that does not fit fails the MERGE before it commits.
            known = F.array(*(F.lit(c.name) for c in columns))
            unfit = (F.size("_misfits") > 0) | (F.size(F.array_except("_event_columns", known)) > 0)
            rows = rows.withColumn(mt.POS, F.when(unfit, F.raise_error(F.lit(UNFIT_MARK))).otherwise(F.col(mt.POS)))
        keys = mt.key_columns(columns)
        if not keys:
            raise ConfigError(
                f"sink {self.name}: MySQL table {label} has no primary key in its schema history: a typed Delta "
                "table needs one to match rows; set mysql_layout: json for this sink (or map the table elsewhere)"
            )
        schema = mt.table_schema(columns)
        fresh = not DeltaTable.isDeltaTable(spark, path)
        target = ensure_table(spark, path, schema, {**TYPED_TABLE_PROPERTIES, **self._state_properties()})
        if fresh:
            rows = rows.drop("_misfits", "_event_columns")
            return lambda: _first_fold(rows, path, mt.DELETED)
        current = target.toDF().schema
        if mt.POS not in current.fieldNames():
            raise ConfigError(
                f"sink {self.name}: {path} holds {label} in the JSON layout (key, after); set mysql_layout: json "
                "for this sink, or move the table away so the typed one is built from the topics"
            )
        widen, refuse = mt.type_changes(current, schema)
        shape_names = {f.name.lower() for f in (*schema.fields, *mt.META_FIELDS)}
        dropped = [f.name for f in current.fields if f.name.lower() not in shape_names]
        if refuse or dropped:
            self._reshape(spark, path, schema, {c.split(": ", 1)[0].lower() for c in refuse}, dropped, label)
            current = DeltaTable.forPath(spark, path).toDF().schema
            widen = []
        have = {n.lower() for n in current.fieldNames()}
        previous = None
        for field in schema.fields:  # columns added in MySQL, placed where MySQL has them
            if field.name.lower() not in have:
                where = f"AFTER {_quoted(previous)}" if previous else "FIRST"
                log.info("sink %s: %s: adding column %s %s", self.name, path, field.name, field.dataType.simpleString())
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({_quoted(field.name)} "
                          f"{field.dataType.simpleString()} {where})")  # fmt: skip
            previous = field.name
        for change in widen:
            column, wanted = change.split(": ", 1)[0], schema[change.split(": ", 1)[0]].dataType.simpleString()
            log.info("sink %s: %s: widening column %s", self.name, path, change)
            spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {_quoted(column)} TYPE {wanted}")
        source_rows = rows.drop("_misfits", "_event_columns")
        on = " AND ".join(f"t.{_quoted(k)} <=> s.{_quoted(k)}" for k in keys)

        def merge() -> None:
            # The position guard is inside the MERGE, so Delta's conflict detection covers it.
            (
                DeltaTable.forPath(spark, path).alias("t")
                .merge(source_rows.alias("s"), on)
                .whenMatchedDelete(condition=f"s.{mt.DELETED} AND s.{mt.POS} > t.{mt.POS}")
                .whenMatchedUpdateAll(condition=f"s.{mt.POS} > t.{mt.POS}")
                .whenNotMatchedInsertAll(condition=f"NOT s.{mt.DELETED}")
                .execute()
            )  # fmt: skip

        return merge

    def _reshape(
        self, spark: SparkSession, path: str, schema: StructType, retyped: set[str], dropped: list[str], label: str
    ) -> None:
        """The source dropped or renamed columns, or changed a type in a way Delta cannot widen in place: the table
        is rewritten in the source's shape (one overwrite; a DDL like this rewrites the MySQL table too). A retyped
        column starts empty: the capture reads the table again after such a DDL (mysql.snapshot.on_ddl), and those
        rows, newer than every stored one, fill it."""
        stored = spark.read.format("delta").load(path)
        have = {n.lower(): n for n in stored.columns}
        columns = [
            (F.col(mt.quoted(have[f.name.lower()])).cast(f.dataType) if f.name.lower() in have and f.name.lower()
             not in retyped else F.lit(None).cast(f.dataType)).alias(f.name)
            for f in schema.fields
        ]  # fmt: skip
        log.warning("sink %s: %s: %s dropped column(s) %s and changed %s: rewriting the table in its new shape",
                    self.name, path, label, dropped or "none", sorted(retyped) or "no type")  # fmt: skip
        stored.select(*columns).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
        metrics.DELTA_RESHAPES.labels(self.name).inc()

    def _fitting_shape(self, batch: DataFrame, source: str, db: str, table: str) -> tuple[list[MySqlColumn], DataFrame]:
        """The table's shape that every event of the batch fits (the known one, else the schema
        history's newest), and the batch converted to it; refused naming what does not fit."""
        for refresh in (False, True):
            columns = self._mysql_columns(source, db, table, refresh)
            rows = mt.typed_rows(batch, columns)
            found = rows.agg(
                F.array_distinct(F.flatten(F.collect_set("_misfits"))).alias("misfits"),
                F.array_distinct(F.flatten(F.collect_set("_event_columns"))).alias("columns"),
            ).first()
            misfits = sorted(found["misfits"] or []) if found else []
            unknown = sorted(set(found["columns"] or []) - {c.name for c in columns}) if found else []
            if not misfits and not unknown:
                return columns, rows
            if refresh and not misfits:
                # Columns the source has dropped or renamed since these changes: nothing holds them now (the
                # capture reads the table again after such a DDL, so newer rows follow).
                log.info("sink %s: %s/%s.%s: the changes carry column(s) %s the table no longer has; left out",
                         self.name, source, db, table, unknown)  # fmt: skip
                return columns, rows
        why = []
        if unknown:
            why.append(f"the events carry column(s) {unknown} that its newest schema-history record lacks")
        if misfits:
            why.append(f"values of column(s) {misfits} do not fit the types of its schema-history record")
        raise TerminalError(f"sink {self.name}: MySQL table {source}/{db}.{table}: {'; '.join(why)} "
                            f"(history topic {self._history_topic()})")  # fmt: skip

    def _history_topic(self) -> str:
        topic = self.opts.schema_history_topic or self.context.get("mysql_schema_history_topic")
        if not topic:
            raise ConfigError(
                f"sink {self.name}: typed Delta tables for MySQL sources are built from the capture's schema "
                "history: set the sink's schema_history_topic (or mysql.schema_history_topic), or mysql_layout: json"
            )
        return str(topic)

    def _mysql_columns(self, source: str, db: str, table: str, refresh: bool) -> list[MySqlColumn]:
        cached = self._mysql_shapes.get((source, db, table))
        if cached is not None and not refresh:
            return cached
        kafka = KafkaEndpoint.of(self.context["bootstrap_servers"], self.context.get("kafka_properties"))
        record = latest_table_record(kafka, self._history_topic(), source, db, table)
        if record is None:
            raise NoTableRecord(
                f"sink {self.name}: the schema history ({self._history_topic()}) has no record of {source}/{db}.{table}"
                " to build its typed Delta table from"
            )
        columns = mysql_columns(record["columns"])
        self._mysql_shapes[(source, db, table)] = columns
        return columns


class NoTableRecord(TerminalError):
    """The schema history has no record of a MySQL table a typed Delta table is to be built for."""


def _first_fold(rows: DataFrame, path: str, deleted: str = "deleted") -> None:
    """The fold into a state table this fold created: the newest rows appended, no MERGE (nothing to match:
    the table's snapshot, the MERGE's scan and its copy of the source are spared, a third of a large first
    fold). A fold killed after the append and before its record finds the table there and MERGEs again,
    which the position guard makes a no-op."""
    rows.where(~F.col(deleted)).write.format("delta").mode("append").save(path)


def vacuum_is_safe(now_ms: int, oldest_needed_ms: int | None) -> bool:
    """Whether VACUUM at the log's retention keeps every file a fold still needs: the oldest commit
    some table has not folded yet is younger than the retention, less a day of margin."""
    return oldest_needed_ms is None or now_ms - oldest_needed_ms < (RETENTION_HOURS - 24) * 3_600_000


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"
