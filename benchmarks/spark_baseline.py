"""The baseline the pipeline benchmarks compare against: a plain Structured Streaming copy of the
raw Kafka records to Parquet (no parsing, no sink logic), in the benchmark's own Spark session."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession


def raw_kafka_to_parquet_seconds(
    spark: SparkSession, bootstrap: str, pattern: str, max_offsets: int, workdir: Path
) -> float:
    """Wall time to copy every record of the topics matching `pattern` (a Java regex)."""
    started = time.perf_counter()
    (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", pattern).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets)).load()
        .writeStream.format("parquet").option("path", str(workdir / "baseline"))
        .option("checkpointLocation", str(workdir / "baseline-checkpoint"))
        .trigger(availableNow=True).start().awaitTermination()
    )  # fmt: skip
    return time.perf_counter() - started


def foreach_batch_seconds(
    spark: SparkSession, bootstrap: str, pattern: str, max_offsets: int, checkpoint: Path,
    step: Callable[[DataFrame, int], None],
) -> float:  # fmt: skip
    """Wall time to run `step` over every record of the topics matching `pattern`, in the same batches as the
    raw copy (a foreachBatch query, trigger availableNow)."""
    started = time.perf_counter()
    (
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
        .option("subscribePattern", pattern).option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets)).load()
        .writeStream.foreachBatch(step).option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True).start().awaitTermination()
    )  # fmt: skip
    return time.perf_counter() - started
