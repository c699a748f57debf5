"""Delta Lake changelog sink: the change log of `log.py` on its own, with no state tables folded from it.

One design, not two (decision 0014): the `delta` sink's log at `<path>/_changes` and this sink's
table at `path` are the same kind of table, written the same way: one idempotent append per batch
(`log.BatchLog`), partitioned by source table. Read it with `log.changes(spark, path)` to
see each change once: a change the capture delivered twice in two batches is stored twice and
shown once.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from cdcflow.config.sinks import DeltaChangelogOptions
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta.log import IDENTITY, BatchLog, changelog_rows, changes, ensure_log

__all__ = ["IDENTITY", "DeltaChangelogSink", "changelog_rows", "changes"]


class DeltaChangelogSink(Sink):
    # One action over the batch (the append): the runner counts through it instead of persisting,
    # and skips its dedupe (readers see each change once: `changes()`).
    reads_events_once = True
    wants_deduplicated_events = False

    def _path(self) -> str:
        assert isinstance(self.options, DeltaChangelogOptions)
        return self.options.path

    _batches: BatchLog | None = None

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        self._append(events, batch_id, reassembled=False)

    def apply_reassembled(self, events: DataFrame, batch_id: int) -> None:
        # A commit of its own, kept apart from the batch's first pass by the log's batch marks.
        self._append(events, batch_id, reassembled=True)

    def _append(self, events: DataFrame, batch_id: int, reassembled: bool) -> None:
        rows = changelog_rows(events, batch_id)
        spark = events.sparkSession
        if self._batches is None:
            ensure_log(spark, self._path(), rows.schema)
            self._batches = BatchLog(self._path(), self.name)
            self._batches.open(spark)
        self._batches.append(spark, rows, self.query_id or "", batch_id, reassembled)
