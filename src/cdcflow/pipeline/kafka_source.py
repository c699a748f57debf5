"""The streaming read of cdcflow's Kafka topics, as every pipeline query (and a user's job) makes it."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from cdcflow.clients.kafka.java import java_client_options
from cdcflow.pipeline.context import Endpoints

# A batch's Kafka reads end at the topics' end, where the consumer's next fetch waits for new records
# up to fetch.max.wait.ms (500 by default) before the task that read the batch can finish: measured
# 0.76 s → 0.29 s per task for the last batch of a backlog, every batch of a stream that keeps up.
# The broker still answers at once when records are there, so reads of a backlog lose nothing.
FETCH_MAX_WAIT_MS = 10


def kafka_options(endpoints: Endpoints) -> dict[str, str]:
    """`kafka.properties` (SASL, TLS) as Spark's Kafka options: the pipeline connects like the captures."""
    return {f"kafka.{k}": v for k, v in java_client_options(endpoints.kafka_properties).items()}


def read_records(
    spark: SparkSession,
    endpoints: Endpoints,
    topics: str,
    max_offsets_per_trigger: int | None,
    starting_offsets: str = "earliest",
) -> DataFrame:
    """A streaming DataFrame of the Kafka records of the topics matching `topics` (a Java regex, whole names)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", endpoints.bootstrap_servers)
        .option("subscribePattern", topics)
        .option("startingOffsets", starting_offsets)
        .option("kafka.metadata.max.age.ms", "5000")
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .options(**kafka_options(endpoints))
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    return reader.load()
