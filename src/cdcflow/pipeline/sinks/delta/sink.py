"""Delta Lake current-state sink, merge-on-read (decision 0014): every batch is one append to the
sink's change log (`log.py`, all tables in one commit); each source table's changes are folded into
its current-state table behind it (`fold_service.py`, scheduled by `folds.py`: when `fold_rows` changes
are pending or the oldest is `fold_interval_s` old, in a background thread that folds at most
`fold_time_share` of the time); `views.current_view` reads a table exactly as of the last applied batch
(the state plus the changes not folded yet).

State tables are at <path>/<source name>/<db>/<table> (two sources with the same db.table stay apart), each
with its fold record beside it (`records.py`), in one of three layouts (`layouts/`): HBase cells, typed MySQL
rows, or MySQL rows as JSON.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from cdcflow.clients.kafka import KafkaEndpoint
from cdcflow.config.sinks import DeltaStateOptions, SinkOptions
from cdcflow.errors import ConfigError
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta import log as change_log
from cdcflow.pipeline.sinks.delta.cut.tracker import CutTracker, TransactionSource
from cdcflow.pipeline.sinks.delta.fold_service import FoldService
from cdcflow.pipeline.sinks.delta.folds import FoldScheduler
from cdcflow.pipeline.sinks.delta.layouts.base import FoldHooks
from cdcflow.pipeline.sinks.delta.source_shapes import SourceShapes
from cdcflow.pipeline.sinks.delta.tables import refuse_old_layout
from cdcflow.pipeline.sinks.delta.views import current_view
from cdcflow.pipeline.sinks.naming import mapped_table
from cdcflow.pipeline.sinks.table_events import under_policy

log = logging.getLogger(__name__)

# Tables folded at the same time (HBase- and MySQL-sourced alike).
MERGE_THREADS = 4


class DeltaStateSink(Sink):
    """Options: cdcflow.config.sinks.DeltaStateOptions. `hooks`: points inside the folds where a test steps in."""

    def __init__(self, name: str, options: SinkOptions, context: Endpoints, hooks: FoldHooks | None = None) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, DeltaStateOptions)
        options = with_default_path(options, context.data_dir)
        self.opts = options
        self.options = options
        if options.log_path:
            self.log_path = options.log_path
        elif options.path:
            self.log_path = f"{options.path.rstrip('/')}/_changes"
        else:
            raise ConfigError(f"sink {name}: set path (the change log goes to <path>/_changes) or log_path")
        self._checked_paths: set[str] = set()
        self._log_ready = False
        self.batches = change_log.BatchLog(self.log_path, name)
        self.cuts = cut_tracker(name, options, self.log_path, context)
        self.service = FoldService(name, options, self.log_path, SourceShapes(name, options, context),
                                   hooks or FoldHooks(), self.cuts)  # fmt: skip
        self.folds = FoldScheduler(
            name, self.service.fold, options.fold_rows, options.fold_interval_s, MERGE_THREADS,
            self.service.housekeeping, options.fold_time_share,
        )  # fmt: skip

    def table_path(self, source: str, db: str, table: str) -> str:
        return table_path(self.name, self.opts, source, db, table)

    @property
    def topics(self) -> str | None:
        return self._topics

    @topics.setter
    def topics(self, pattern: str | None) -> None:
        self._topics = pattern
        cuts = getattr(self, "cuts", None)  # (set by Sink.__init__ before the tracker exists)
        if cuts is not None:  # the tables the sink takes: those a transaction must have whole here
            cuts.topics_pattern = pattern

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
        self.service.log_version = self.batches.version
        logged: dict[str, int] = {}
        for (connector, source, db, table), count in tables.items():  # registered once logged
            path = self._checked_path(spark, source, db, table)
            self.service.register(spark, path, connector, source, db, table)
            logged[path] = logged.get(path, 0) + count
        log.info("sink %s: batch %d: %d changes of %d table(s) logged in %.2f s", self.name, batch_id,
                 sum(logged.values()), len(logged), time.perf_counter() - started)  # fmt: skip
        self.folds.logged(logged)

    def _open_log(self, spark: SparkSession) -> None:
        """Pick up an existing change log: its version, and the fold thread told of every table it
        has fed (an earlier process may have logged changes it did not fold or name)."""
        self.batches.open(spark)
        self.service.opened(spark, self.batches.version)
        self._log_ready = True
        self.folds.sized_to(spark.sparkContext.defaultParallelism)
        self.folds.start(self.service.registered_tables(spark))

    def open(self, spark: SparkSession) -> None:
        if not self._log_ready and DeltaTable.isDeltaTable(spark, self.log_path):
            self._open_log(spark)

    def flush(self, spark: SparkSession) -> None:
        """Fold every table with pending changes now (an --available-now run's last step), also
        when this run applied no batch: a killed run may have logged changes it never folded."""
        self.open(spark)
        if self._log_ready:  # else nothing was ever logged
            self.folds.fold_all()
            self.service.update_cut(force=True)

    def close(self) -> None:
        self.folds.stop()

    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = {"tables": self.folds.status()}
        if self.cuts is not None:
            status["consistent_cuts"] = self.cuts.status()
        return status

    def current_view(self, spark: SparkSession, source: str, db: str, table: str) -> DataFrame:
        """A table's current rows, exact as of the last applied batch (tombstones left out)."""
        return current_view(spark, self.table_path(source, db, table))


def cut_tracker(sink: str, options: DeltaStateOptions, log_path: str, context: Endpoints) -> CutTracker | None:
    """The consistent cut's tracker, when the options ask for one; refused when no source writes the transaction
    records it needs."""
    if not options.consistent_cut:
        return None
    if not context.transaction_topics:
        raise ConfigError(
            f"sink {sink}: consistent_cut needs a MySQL source that writes transaction records: set "
            "mysql.output.transaction_topic (in a job of your own: Endpoints.transaction_topics)"
        )
    sources = [TransactionSource(*t) for t in context.transaction_topics]
    bootstrap = KafkaEndpoint.of(context.bootstrap_servers, context.kafka_properties)
    return CutTracker(sink, log_path, sources, bootstrap, context.schema_registry_url,
                      options.consistent_cut_interval_s)  # fmt: skip


def with_default_path(options: DeltaStateOptions, data_dir: str | None) -> DeltaStateOptions:
    """The options with their default path, beside the checkpoints (<data_dir>/delta), when they name none."""
    if options.path or not data_dir:
        return options
    return options.model_copy(update={"path": f"{data_dir}/delta"})


def table_path(sink: str, options: DeltaStateOptions, source: str, db: str, table: str) -> str:
    """Where a source table's state table is: its table_map entry, else <path>/<source>/<db>/<table>."""
    mapped = mapped_table(options.table_map, db, table, source)
    if mapped:
        return mapped
    if not options.path:
        raise ConfigError(f"sink {sink}: no table_map entry for {source}/{db}.{table} and no path")
    return f"{options.path.rstrip('/')}/{source}/{db}/{table}"
