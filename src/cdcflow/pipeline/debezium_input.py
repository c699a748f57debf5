"""Topics in the debezium format, read by the pipeline: each record turned into the cdcflow change event
before the parse (events/debezium/transcode.py), so the sinks do not know which format arrived.

A Spark `mapInArrow` step over the Kafka rows of a batch: records of the debezium topics get their value
replaced by the transcoded event; their tombstones (no value) are dropped; a record the transcoder cannot
read keeps its bytes and gets the reason in `_transcode_error`, so the parse dead-letters it as it arrived,
saying why. Other topics pass untouched. Avro writer
schemas come from the registry, once per schema id and Python worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import StringType, StructField, StructType

from cdcflow.clients.registry import SchemaRegistry
from cdcflow.events.debezium.transcode import Transcoder
from cdcflow.events.json_codec import MalformedEvent
from cdcflow.pipeline.envelope import TRANSCODE_ERROR

_TRANSCODERS: dict[str | None, Transcoder] = {}  # per registry, kept by the Python worker across batches


def _transcoder(registry_url: str | None) -> Transcoder:
    found = _TRANSCODERS.get(registry_url)
    if found is None:
        fetch = SchemaRegistry(registry_url).schema if registry_url else None
        found = _TRANSCODERS[registry_url] = Transcoder(fetch)
    return found


def transcode_batches(batches: Iterator[pa.RecordBatch], pattern: str, registry_url: str | None,
                      ) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """The Arrow batches of Kafka rows with debezium-format values turned into cdcflow events."""
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
            if not matches(topic):
                keep.append(True)
                out.append(value)
                errors.append(None)
                continue
            if value is None:  # a tombstone: for compaction only, nothing to apply
                keep.append(False)
                continue
            keep.append(True)
            try:
                out.append(transcoder.transcode(key, value))
                errors.append(None)
            except MalformedEvent as exc:
                out.append(value)  # dead-lettered as it arrived
                errors.append(f"debezium format: {exc}")
        kept = batch if all(keep) else batch.filter(pa.array(keep))
        index = kept.schema.get_field_index("value")
        kept = kept.set_column(index, kept.schema.field(index), pa.array(out, type=pa.binary()))
        yield kept.append_column(TRANSCODE_ERROR, pa.array(errors, type=pa.string()))


def transcoded(raw: DataFrame, pattern: str, registry_url: str | None) -> DataFrame:
    """`raw` (Kafka rows) with the debezium-format topics' values as cdcflow change events."""
    schema = StructType([*raw.schema.fields, StructField(TRANSCODE_ERROR, StringType())])
    return raw.mapInArrow(lambda batches: transcode_batches(batches, pattern, registry_url), schema)
