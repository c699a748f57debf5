"""Creating Delta tables the way every cdcflow Delta sink wants them."""

from __future__ import annotations

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType


def ensure_table(spark: SparkSession, path: str, schema: StructType) -> DeltaTable:
    """The Delta table at `path`, created empty with `schema` if absent.

    Auto-compaction is on: streaming writes small files every batch, and Delta rewrites them
    into bigger ones after a commit once enough have piled up (no separate OPTIMIZE job).
    """
    if not DeltaTable.isDeltaTable(spark, path):
        (
            spark.createDataFrame([], schema)
            .write.format("delta")
            .option("delta.autoOptimize.autoCompact", "true")
            .mode("ignore")
            .save(path)
        )
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.autoOptimize.autoCompact' = 'true')")
    return DeltaTable.forPath(spark, path)
