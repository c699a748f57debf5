"""Debugging sinks: console (prints events) and parquet (an append-only changelog)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdcflow.pipeline.sinks.base import Sink


class ConsoleSink(Sink):
    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        events.select("op", "source.db", "source.table", "source.pos", "key", F.size("cells").alias("cells")).show(
            int(self.options.get("rows", 20)), truncate=False
        )


class ParquetChangelogSink(Sink):
    """Appends each batch under batch_id=<n>/, replacing that folder on replay: idempotent per batch."""

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        path = f"{self.options['path'].rstrip('/')}/batch_id={batch_id}"
        events.write.mode("overwrite").parquet(path)
