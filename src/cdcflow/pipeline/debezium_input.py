"""Topics in the debezium format, read by the pipeline: each record turned into the cdcflow change event
before the parse (events/debezium/transcode.py), so the sinks do not know which format arrived.

Avro records of schemas Spark's Avro reader takes are read inside Spark (debezium_avro.py), straight into the
envelope's struct (column `_envelope`, which the parse takes as it is). Everything else:
a Spark `mapInArrow` step over the Kafka rows of a batch: records of the debezium topics get their value
replaced by the transcoded event; their tombstones (no value) are dropped; a record the transcoder cannot
read keeps its bytes and gets the reason in `_transcode_error`, so the parse dead-letters it as it arrived,
saying why. Other topics pass untouched. Avro writer
schemas come from the registry, once per schema id and Python worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from cdcflow.clients.registry import SchemaRegistry
from cdcflow.events.debezium.transcode import Transcoder
from cdcflow.events.json_codec import MalformedEvent
from cdcflow.pipeline.debezium_avro import decoded, event_envelope, writer_schemas
from cdcflow.pipeline.envelope import ENVELOPE, PREPARSED, TRANSCODE_ERROR

_TRANSCODERS: dict[str | None, Transcoder] = {}  # per registry, kept by the Python worker across batches


def _transcoder(registry_url: str | None) -> Transcoder:
    found = _TRANSCODERS.get(registry_url)
    if found is None:
        fetch = SchemaRegistry(registry_url).schema if registry_url else None
        found = _TRANSCODERS[registry_url] = Transcoder(fetch)
    return found


def transcode_batches(batches: Iterator[pa.RecordBatch], pattern: str, registry_url: str | None,
                      heartbeat_topics: frozenset[str] = frozenset()) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """The Arrow batches of Kafka rows with debezium-format values turned into cdcflow events (heartbeats of
    `heartbeat_topics` into cdcflow heartbeats)."""
    matches = re.compile(pattern).fullmatch
    transcoder = _transcoder(registry_url)
    for batch in batches:
        topics = batch.column("topic").to_pylist()
        keys = batch.column("key").to_pylist()
        values = batch.column("value").to_pylist()
        keep: list[bool] = []
        out: list[Any] = []
        errors: list[str | None] = []
        for topic, key, value in zip(topics, keys, values, strict=True):
            heartbeat = topic in heartbeat_topics
            if not heartbeat and not matches(topic):
                keep.append(True)
                out.append(value)
                errors.append(None)
                continue
            if value is None:  # a tombstone: for compaction only, nothing to apply
                keep.append(False)
                continue
            keep.append(True)
            try:
                out.append(transcoder.heartbeat(key, value) if heartbeat else transcoder.transcode(key, value))
                errors.append(None)
            except MalformedEvent as exc:
                out.append(value)  # dead-lettered as it arrived
                errors.append(f"debezium format: {exc}")
        kept = batch if all(keep) else batch.filter(pa.array(keep))
        index = kept.schema.get_field_index("value")
        kept = kept.set_column(index, kept.schema.field(index), pa.array(out, type=pa.binary()))
        yield kept.append_column(TRANSCODE_ERROR, pa.array(errors, type=pa.string()))


def transcoded(raw: DataFrame, sources: Sequence[tuple[str, str]], registry_url: str | None,
               heartbeat_topics: tuple[str, ...] = ()) -> DataFrame:  # fmt: skip
    """`raw` (Kafka rows) with the debezium-format topics' values as cdcflow change events. `sources`: (topic
    pattern, serialization) per source writing the debezium format. Avro sources are read inside Spark, in the
    same pass over the batch (debezium_avro.py); JSON ones, and Avro schemas Spark cannot take, through the
    Python transcoder (a second pass over the rows it needs), like the sources' `heartbeat_topics` (a few
    records)."""
    beats = frozenset(heartbeat_topics)
    schema = StructType([*raw.schema.fields, StructField(TRANSCODE_ERROR, StringType())])
    json_pattern = "|".join(f"(?:{p})" for p, serialization in sources if serialization != "avro")
    avro_pattern = "|".join(f"(?:{p})" for p, serialization in sources if serialization == "avro")

    def python(rows: DataFrame, pattern: str) -> DataFrame:
        return rows.mapInArrow(lambda batches: transcode_batches(batches, pattern, registry_url, beats), schema)

    if not avro_pattern or registry_url is None:
        return python(raw, "|".join(f"(?:{p})" for p, _ in sources))
    writers = writer_schemas(registry_url, avro_pattern)
    is_avro_topic = F.col("topic").rlike(f"^(?:{avro_pattern})$")
    schema_id = F.conv(F.hex(F.substring("value", 2, 4)), 16, 10).cast("long")
    wide = list(writers.too_wide)
    to_python = is_avro_topic & F.col("value").isNotNull() & schema_id.isin(wide) if wide else F.lit(False)
    if json_pattern:
        to_python = to_python | F.col("topic").rlike(f"^(?:{json_pattern})$")
    if beats:
        to_python = to_python | F.col("topic").isin(sorted(beats))
        is_avro_topic = is_avro_topic & ~F.col("topic").isin(sorted(beats))
    # tombstones are for compaction only; the rest of an Avro source's records are read here or dead-lettered
    native = raw.where(~to_python & ~(is_avro_topic & F.col("value").isNull()))
    readable = is_avro_topic & (F.hex(F.substring("value", 1, 1)) == "00") & schema_id.isin(list(writers.readable))
    # one projection decodes each record with its own schema, the next writes the event from it
    stage = native.select(
        *raw.columns, F.when(readable, schema_id).alias("_schema_id"),
        *(decoded(F.col("value"), schema_id, w).alias(f"_avro{w.schema_id}") for w in writers.readable.values()),
    )  # fmt: skip
    events = [event_envelope(F.col(f"_avro{w.schema_id}"), w) for w in writers.readable.values()]
    event = F.coalesce(*events) if events else F.lit(None).cast(ENVELOPE)
    error = F.when(F.col("_schema_id").isNull(), F.lit("debezium format: not an Avro record of a schema the registry "
                                                       "has for this topic"))  # fmt: skip
    error = error.otherwise(F.concat(F.lit("debezium format: an Avro record that schema "),
                                     F.col("_schema_id").cast("string"),
                                     F.lit(" does not read, or without source.cdcflow_pos")))  # fmt: skip
    out = stage.withColumn(PREPARSED, F.when(F.col("_schema_id").isNotNull(), event)).select(
        *raw.columns,  # the value stays the record's bytes: a dead letter carries them as they arrived
        F.when(is_avro_topic & F.col(PREPARSED).isNull(), error).alias(TRANSCODE_ERROR),
        PREPARSED,
    )  # fmt: skip
    if wide or json_pattern or beats:
        in_python = python(raw.where(to_python), "|".join(f"(?:{p})" for p, _ in sources))
        return out.unionByName(in_python.withColumn(PREPARSED, F.lit(None).cast(ENVELOPE)))
    return out
