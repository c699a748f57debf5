"""Delta Lake changelog sink: every change event exactly once, whatever is replayed.

Each batch is MERGEd into the table with "insert when not matched" on the event identity
(source name and cluster, source table, row key, region, pos): a replayed batch or a duplicate
delivery matches rows already there and inserts nothing, and two sources with the same db.table
and positions stay two changes. Tables written before the source columns existed gain them on
the first MERGE (schema evolution); their old rows hold null there. Auto-compaction keeps
streaming from leaving thousands of small files.

Why MERGE rather than a blind append with txnAppId/txnVersion: Delta's transaction ids make a
*replayed batch* idempotent, but at-least-once capture can deliver the same change in two
different batches (a peer restarted before HBase saw its acknowledgement). Matching on the
event identity absorbs both.

The join is bounded by time, so its cost does not grow with the history: a duplicate carries the
source time of the change it repeats, so the MERGE only needs the stored rows whose
`source_ts_ms` lies within the batch's range, and Delta skips every file whose min/max statistics
lie outside it (streaming writes files in time order). A batch with a change that has no source
time falls back to the whole table.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdcflow.config.sinks import DeltaChangelogOptions
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta.tables import ensure_table


class DeltaChangelogSink(Sink):
    def _path(self) -> str:
        assert isinstance(self.options, DeltaChangelogOptions)
        return self.options.path

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        spark = events.sparkSession
        rows = changelog_rows(events, batch_id)
        target = ensure_table(spark, self._path(), rows.schema)
        identity = " AND ".join(f"t.`{c}` {'<=>' if c in _NULLABLE else '='} s.`{c}`" for c in IDENTITY)
        (
            target.alias("t")
            .merge(rows.alias("s"), f"{time_bound(rows)}{identity}")
            .withSchemaEvolution()
            .whenNotMatchedInsertAll()
            .execute()
        )


def time_bound(rows: DataFrame) -> str:
    """A condition on the stored rows alone (Delta prunes files with it): their source time within
    the batch's. Empty when some change of the batch has no source time."""
    bounds = rows.agg(
        F.min("source_ts_ms").alias("lo"), F.max("source_ts_ms").alias("hi"),
        F.count_if(F.col("source_ts_ms").isNull()).alias("untimed"),
    ).first()  # fmt: skip
    if bounds is None or bounds["untimed"] or bounds["lo"] is None:
        return ""
    return f"t.source_ts_ms BETWEEN {int(bounds['lo'])} AND {int(bounds['hi'])} AND "


# The columns that identify one change: a stored row with the same values is the same change.
IDENTITY = ("event_key", "region", "pos", "db", "table", "connector", "source_name", "cluster_id")
_NULLABLE = ("source_name", "cluster_id")  # null in rows written before these columns existed


def changelog_rows(events: DataFrame, batch_id: int) -> DataFrame:
    """The changelog's row of each event of a batch."""
    return events.select(
        F.col("kafka_key").alias("event_key"),
        F.col("source.connector").alias("connector"),
        F.col("source.name").alias("source_name"),
        F.coalesce(F.col("source.cluster_id"), F.lit("")).alias("cluster_id"),
        F.col("source.db").alias("db"),
        F.col("source.table").alias("table"),
        F.coalesce(F.col("source.region"), F.lit("")).alias("region"),
        F.col("source.pos").alias("pos"),
        F.col("source.ts_ms").alias("source_ts_ms"),
        "op",
        "key",
        "before",
        "after",
        "cells",
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        F.lit(batch_id).alias("batch_id"),
    )
