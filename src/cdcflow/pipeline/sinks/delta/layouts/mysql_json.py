"""MySQL-sourced state tables with `mysql_layout: json`: one row per key, the row image as JSON.

key string (the primary-key columns as JSON), after string (row image as JSON), deleted
boolean, pos array<bigint>, op string, source_ts_ms bigint
"""

from __future__ import annotations

import functools

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import ArrayType, BooleanType, LongType, StringType, StructField, StructType

from cdcflow.pipeline.sinks.delta.layouts.base import FoldJob
from cdcflow.pipeline.sinks.delta.layouts.mysql import ROW_CHANGE, MySqlRows, first_fold
from cdcflow.pipeline.sinks.delta.records import FoldRecord
from cdcflow.pipeline.sinks.delta.tables import ensure_table, merge_guarded

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


class MySqlJson(MySqlRows):
    def _merge(self, job: FoldJob, latest: DataFrame) -> None:
        merge_guarded(job.sink, job.path, functools.partial(self._merge_once, job.spark, job, latest))

    def _merge_once(self, spark: SparkSession, job: FoldJob, batch: DataFrame) -> None:
        fresh = not DeltaTable.isDeltaTable(spark, job.path)
        target = ensure_table(spark, job.path, MYSQL_STATE, job.state_properties())
        if fresh:
            first_fold(batch, job.path, "deleted")
            return
        (
            target.alias("t")
            .merge(job.hooks.merge_source(job.path, batch).alias("s"), "t.key = s.key")
            .whenMatchedDelete(condition="s.deleted AND s.pos > t.pos")
            .whenMatchedUpdateAll(condition="s.pos > t.pos")
            .whenNotMatchedInsertAll(condition="NOT s.deleted")
            .execute()
        )

    def _position_column(self) -> str:
        return "pos"

    def _refreshed_after_truncate(self, job: FoldJob) -> None:
        pass  # nothing of the shape is kept

    def _view_rows(self, record: FoldRecord, newest: str) -> tuple[list[str], str, list[str], str] | None:
        return list(ROW_CHANGE), "pos", ["key"], newest


LAYOUT = MySqlJson()
