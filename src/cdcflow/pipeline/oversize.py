"""Oversized changes put back together: a marker's parts read from Kafka, applied as the change they make.

A change too large for one Kafka record reaches the pipeline as a marker naming the partition and offsets
of its parts (events/oversize.py). The sink's pass over a batch leaves markers out (their `problem` is
`OVERSIZE`) and counts them; a batch that had some is then given a second pass: the runner collects its
markers, reads their parts on the driver (the rare batch, a few records of 512 KiB each), and the sink
applies the whole events (`Sink.apply_reassembled`, idempotent on its own, so a crash between the passes
replays both). A marker whose change cannot be had (its parts gone with the topic's retention, or not
matching the digest) is dead-lettered with its position and counted per sink and table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from cdcflow.clients.kafka import KafkaEndpoint, read_at
from cdcflow.events.oversize import reassemble
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import OVERSIZE

log = logging.getLogger(__name__)

# The Kafka source's columns envelope.parse reads: the whole events go through the same parse.
RAW_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)


@dataclass(frozen=True)
class Unapplied:
    """A marker whose change could not be put back together."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    raw: bytes
    table: str  # db.table
    reason: str
    owned: bool  # this sink's query is the one that dead-letters the topic's records


def markers(parsed: DataFrame, owned: Column) -> list[Any]:
    """The markers of a parsed batch (the rare batch that has some), with what the second pass needs."""
    return (
        parsed.where(F.col("problem") == F.lit(OVERSIZE))
        .select("topic", "partition", "offset", "kafka_key", "raw", owned.alias("owned"))
        .collect()
    )


def put_together(rows: list[Any], context: Endpoints) -> tuple[list[tuple[Any, ...]], list[Unapplied]]:
    """(the whole events as Kafka source rows at their markers' places, the markers that stay unapplied).
    Raises ServiceUnavailable when Kafka does not answer (the batch is retried)."""
    endpoint = KafkaEndpoint.of(context.bootstrap_servers, context.kafka_properties)
    whole: list[tuple[Any, ...]] = []
    unapplied: list[Unapplied] = []
    for row in rows:
        raw = bytes(row["raw"])
        body = orjson.loads(raw)
        info = body["oversize"]
        source = body.get("source") or {}
        table = f"{source.get('db')}.{source.get('table')}"

        def missed(reason: str, row: Any = row, raw: bytes = raw, table: str = table) -> None:
            unapplied.append(Unapplied(row["topic"], row["partition"], row["offset"], row["kafka_key"], raw, table,
                                       reason, bool(row["owned"])))  # fmt: skip

        offsets = [int(o) for o in info["offsets"]]
        found = read_at(endpoint, info["topic"], int(info["partition"]), offsets)
        if len(found) < len(offsets):
            missed(f"oversize change {info['id']}: {len(offsets) - len(found)} of its {len(offsets)} parts are no "
                   f"longer in {info['topic']} partition {info['partition']} (the topic's retention?)")  # fmt: skip
            continue
        try:
            value = reassemble(v or b"" for v in found.values())
        except (ValueError, KeyError, orjson.JSONDecodeError) as exc:
            missed(f"oversize change {info['id']}: its parts do not make the change: {exc}")
            continue
        whole.append((row["kafka_key"], value, row["topic"], row["partition"], row["offset"]))
    return whole, unapplied


def as_kafka_rows(spark: SparkSession, whole: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(whole, RAW_SCHEMA)


def dead_letter_rows(spark: SparkSession, unapplied: list[Unapplied]) -> DataFrame:
    """The unapplied markers this sink dead-letters, as write_dead_letters takes them (raw, problem)."""
    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("kafka_key", BinaryType()),
            StructField("raw", BinaryType()),
            StructField("problem", StringType()),
        ]
    )
    rows = [(u.topic, u.partition, u.offset, u.key, u.raw, u.reason) for u in unapplied if u.owned]
    return spark.createDataFrame(rows, schema)
