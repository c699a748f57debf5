"""Writing records to the dead-letter topic: the malformed ones (each written by the first sink
query that reads its topic) and valid events a sink cannot apply (e.g. the HBase sink's events
for a table it may not create).

A dead letter keeps where the record came from (topic, partition, offset), so it can be read
again from Kafka, the bytes (or, for a parsed event, its JSON), the reason and the sink that
wrote it."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdcflow.clients.kafka.java import java_client_options
from cdcflow.pipeline.context import Endpoints


def write_dead_letters(
    records: DataFrame, raw: Column, error: Column, batch_id: int, context: Endpoints, sink: str
) -> None:
    """`records` has topic, partition, offset, kafka_key; `raw` the record's bytes, `error` why."""
    kafka_options = {f"kafka.{k}": v for k, v in java_client_options(context.kafka_properties or {}).items()}
    # the format the record was expected in: cdcflow's, or the debezium format of a MySQL source's topics
    debezium = "|".join(f"(?:{pattern})" for pattern, _ in context.debezium_topics or [])
    expected = F.when(F.col("topic").rlike(f"^(?:{debezium})$"), "debezium") if debezium else F.lit(None)
    out = records.select(
        F.col("kafka_key").alias("key"),
        F.to_json(
            F.struct(
                F.base64(raw).alias("raw_base64"), "topic", "partition", "offset", error.alias("error"),
                F.coalesce(expected, F.lit("cdcflow")).alias("format"), F.lit(batch_id).alias("batch_id"),
                F.lit(sink).alias("sink"),
            )
        ).alias("value"),
    )  # fmt: skip
    (
        out.write.format("kafka")
        .option("kafka.bootstrap.servers", context.bootstrap_servers)
        .option("topic", context.dead_letter_topic)
        .options(**kafka_options)
        .save()
    )
