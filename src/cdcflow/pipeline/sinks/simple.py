"""Debugging sinks: console (prints events) and parquet (an append-only changelog)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdcflow.config.sinks import ConsoleOptions, ParquetOptions
from cdcflow.pipeline.sinks.base import Sink


class ConsoleSink(Sink):
    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        events.select("op", "source.db", "source.table", "source.pos", "key", F.size("cells").alias("cells")).show(
            self.options.rows if isinstance(self.options, ConsoleOptions) else 20, truncate=False
        )


class ParquetChangelogSink(Sink):
    """Appends each batch under query=<checkpoint's query id>/batch_id=<n>/, replacing that folder
    on replay: idempotent per batch. The query id is new when the checkpoint is reset (its batch
    ids start at 0 again), so a reset never overwrites the folders of the earlier run."""

    reads_events_once = True  # one write
    # A change log like the Delta one: a change delivered twice is stored twice (as it is when the two
    # deliveries fall in two batches), which spares every batch the dedupe's shuffle (a second job).
    wants_deduplicated_events = False

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        self._write(events, batch_id, self.query_id or "unknown")

    def apply_reassembled(self, events: DataFrame, batch_id: int) -> None:
        # Beside the batch's folder, not in it: a replay of the batch's first pass replaces that folder.
        self._write(events, batch_id, f"{self.query_id or 'unknown'}-reassembled")

    def _write(self, events: DataFrame, batch_id: int, query: str) -> None:
        assert isinstance(self.options, ParquetOptions)
        path = f"{self.options.path.rstrip('/')}/query={query}/batch_id={batch_id}"
        events.write.mode("overwrite").parquet(path)
