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


# Read tasks per core, at most, for a batch of many topic partitions (see `in_few_tasks`).
READ_TASKS_PER_CORE = 2


def in_few_tasks(records: DataFrame) -> DataFrame:
    """A batch of Kafka records read by at most `READ_TASKS_PER_CORE` tasks per core of the session.

    Spark's Kafka source plans one task per topic partition of the batch. A pipeline reads one topic per source table
    (two partitions each by default), so a batch over 100 tables was 200 tasks of a few dozen records each, whose fixed
    costs outweighed the parse: 10,000 changes over 100 tables took 5.5-6.1 s per batch in a Delta sink, against
    0.63-0.70 s over one table. Merged without a shuffle (each task reads its partitions one after another), the
    same batches took 2.7-3.2 s, and one table's the same. A batch with fewer partitions is left as it is."""
    cores = records.sparkSession.sparkContext.defaultParallelism
    return records.coalesce(READ_TASKS_PER_CORE * max(1, cores))
