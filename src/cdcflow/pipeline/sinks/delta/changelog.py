"""Delta Lake changelog sink: the change log of `log.py` on its own, with no state tables folded from it.

One design, not two (decision 0014): the `delta` sink's log at `<path>/_changes` and this sink's
table at `path` are the same kind of table, written the same way: one idempotent append per batch
(`txnAppId`/`txnVersion`), partitioned by source table. Read it with `log.changes(spark, path)` to
see each change once: a change the capture delivered twice in two batches is stored twice and
shown once.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from cdcflow.config.sinks import DeltaChangelogOptions
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta.log import IDENTITY, append, changelog_rows, changes, ensure_log

__all__ = ["IDENTITY", "DeltaChangelogSink", "changelog_rows", "changes"]


class DeltaChangelogSink(Sink):
    # One action over the batch (the append): the runner counts through it instead of persisting,
    # and skips its dedupe (readers see each change once: `changes()`).
    reads_events_once = True
    wants_deduplicated_events = False
    _ready = False

    def _path(self) -> str:
        assert isinstance(self.options, DeltaChangelogOptions)
        return self.options.path

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        self._append(events, batch_id, f"cdcflow-{self.name}-{self.query_id}")

    def apply_reassembled(self, events: DataFrame, batch_id: int) -> None:
        # A commit of its own: the batch's transaction id is taken by the batch's first pass.
        self._append(events, batch_id, f"cdcflow-{self.name}-{self.query_id}-reassembled")

    def _append(self, events: DataFrame, batch_id: int, app_id: str) -> None:
        rows = changelog_rows(events, batch_id)
        if not self._ready:
            ensure_log(events.sparkSession, self._path(), rows.schema)
            self._ready = True
        append(rows, self._path(), app_id, batch_id)
