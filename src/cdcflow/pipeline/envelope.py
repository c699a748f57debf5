"""The change-event envelope as a Spark schema, and the split into valid events and dead letters."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdcflow.errors import ConfigError
from cdcflow.events.heartbeats import HEARTBEAT_SCHEMA_ID
from cdcflow.events.json_codec import SCHEMA_ID, json_schema


def spark_type(node: dict[str, Any]) -> DataType:
    """A JSON Schema node as the Spark type `from_json` parses it into. Objects with declared
    properties become structs (fields in declaration order); objects whose shape depends on the
    source table (key, before, after: no declared properties) stay raw JSON strings."""
    kind = node.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    kinds.discard("null")
    if "properties" in node and kinds <= {"object", None}:
        return StructType([StructField(name, spark_type(sub)) for name, sub in node["properties"].items()])
    if kinds == {"array"}:
        return ArrayType(spark_type(node.get("items", {})))
    if kinds == {"integer"}:
        return LongType()
    if kinds == {"boolean"}:
        return BooleanType()
    if kinds <= {"string", "object", None}:  # strings, enums, consts, and table-shaped objects
        return StringType()
    raise ConfigError(f"the change-event JSON Schema has a node Spark cannot hold: {node}")


# The envelope as Spark parses it, derived from the JSON Schema (cdcflow/events/schema/), plus the
# column from_json (PERMISSIVE) fills with the raw text when a value is not valid JSON.
def envelope_schema() -> StructType:
    derived = spark_type(json_schema())
    if not isinstance(derived, StructType):
        raise ConfigError("the change-event JSON Schema does not describe an object")
    return StructType([*derived.fields, StructField("_corrupt", StringType())])


ENVELOPE = envelope_schema()
TRANSCODE_ERROR = "_transcode_error"
# A record another reader already made into ENVELOPE's struct (debezium_avro.py): parsed as it is, not from JSON.
PREPARSED = "_envelope"
# The `problem` of a marker whose parts hold the whole change (events/oversize.py): not applied as it is,
# not a dead letter; put back together after the sink's pass (pipeline/oversize.py).
OVERSIZE = "oversize"
# The `problem` of a heartbeat record (events/heartbeats.py): neither an event nor a dead letter; its source.ts_ms
# counts towards the sink's progress (runner.py).
HEARTBEAT = "heartbeat"


def _problem(e: Column) -> Column:
    """Why a parsed record is not a usable event (null when it is)."""
    # A heartbeat's source fields differ from an event's, so from_json may leave it corrupt: its schema id is
    # read from the text then (only for records that have no schema field parsed: the rare ones).
    schema_id = F.coalesce(e["schema"], F.get_json_object(e["_corrupt"], "$.schema"))
    # The position's smallest part, a null part sorting first. Not `exists(pos, p -> ...)`: a lambda has no
    # generated code, and one in the projection keeps the whole parse out of whole-stage code generation (each
    # task then generates the wide projection's code again).
    smallest = F.get(F.sort_array(e["source"]["pos"]), 0)
    return (
        F.when(schema_id == HEARTBEAT_SCHEMA_ID, F.lit(HEARTBEAT))
        .when(e.isNull() | e["_corrupt"].isNotNull(), F.lit("not a JSON object"))
        .when(e["schema"].isNull() | (e["schema"] != SCHEMA_ID), F.lit(f"schema is not {SCHEMA_ID}"))
        .when(~e["op"].isin("c", "u", "d", "r", "t"), F.lit("op is not one of c, u, d, r, t"))
        .when(e["source"].isNull() | e["source"]["connector"].isNull(), F.lit("source.connector missing"))
        .when(
            e["source"]["pos"].isNull() | (F.size(e["source"]["pos"]) == 0) | smallest.isNull() | (smallest < 0),
            F.lit("source.pos must be a non-empty array of non-negative integers"),
        )
        .when((e["source"]["connector"] == "hbase") & e["cells"].isNull(), F.lit("hbase event without cells"))
        # A delete's marker keeps all it needs (key, position): applied as it is. The others are put back
        # together from their parts (pipeline/oversize.py) when the marker says where they are.
        .when(
            e["oversize"].isNotNull() & (e["op"] != "d") & (F.size(e["oversize"]["offsets"]) > 0),
            F.lit(OVERSIZE),
        )
        .when(
            e["oversize"].isNotNull() & (e["op"] != "d"),
            F.concat(
                F.lit("oversize change: values left out here, the whole event is in topic "),
                F.coalesce(e["oversize"]["topic"], F.lit("?")),
                F.lit(" under key "),
                F.coalesce(e["oversize"]["id"], F.lit("?")),
                F.lit(" (the marker does not say at which offsets)"),
            ),
        )
    )


def parse(raw: DataFrame) -> DataFrame:
    """A Kafka DataFrame (key, value, topic, partition, offset, ...) parsed once: topic, partition,
    offset, kafka_key, the envelope's fields, `problem` (why the record is not a usable event; null
    when it is) and `raw` (the record's bytes, kept only when there is a problem: dead letters
    carry them).

    The `problem` column is made non-deterministic on purpose (a never-true partition test): Spark
    otherwise pushes a filter on it below the projection that parses, inlining `from_json` once per
    field the check reads (a dozen parses per record; measured 1.3 s per 100,000 events)."""
    e, fenced, fields = _parse_columns(raw, PREPARSED in raw.columns)
    # A record the debezium transcoder could not read (debezium_input.py) says why in `_transcode_error`.
    extra = [TRANSCODE_ERROR] if TRANSCODE_ERROR in raw.columns else []
    parsed = raw.select("topic", "partition", "offset", F.col("key").alias("kafka_key"), "value", *extra,
                        e.alias("e"))  # fmt: skip
    problem = F.coalesce(F.col(TRANSCODE_ERROR), fenced) if extra else fenced
    # Two projections in all: each DataFrame step is analysed on the driver, once per batch.
    return parsed.select(
        "topic", "partition", "offset", "kafka_key",
        F.when(problem.isNotNull(), F.col("value")).alias("raw"),
        problem.alias("problem"), *fields,
    )  # fmt: skip


# The parse's column expressions, built once per JVM: building them costs over a thousand Py4J
# calls (about 0.15 s of driver time), which every sink's every batch would pay again.
_PARSE_COLUMNS: dict[tuple[int, bool], tuple[Column, Column, list[Column]]] = {}


def _parse_columns(raw: DataFrame, preparsed: bool) -> tuple[Column, Column, list[Column]]:
    held = (id(raw.sparkSession.sparkContext._gateway), preparsed)
    if held not in _PARSE_COLUMNS:
        e = F.from_json(
            F.col("value").cast("string"), ENVELOPE, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
        )
        if preparsed:  # CASE evaluates from_json only for the records that have no struct yet
            e = F.when(F.col(PREPARSED).isNotNull(), F.col(PREPARSED)).otherwise(e)
        fenced = F.when(F.spark_partition_id() < 0, F.lit("unreachable")).otherwise(_problem(F.col("e")))
        fields = [F.col("e").getField(f.name).alias(f.name) for f in ENVELOPE.fields if f.name != "_corrupt"]
        _PARSE_COLUMNS[held] = (e, fenced, fields)
    return _PARSE_COLUMNS[held]


def events_of(parsed: DataFrame) -> DataFrame:
    """The usable events of a parsed (and perhaps deduplicated) batch, in the envelope's columns."""
    return parsed.where(F.col("problem").isNull()).drop("problem", "raw")


def is_malformed(problem: Column) -> Column:
    return problem.isNotNull() & ~problem.isin(HEARTBEAT, OVERSIZE)


def malformed_of(parsed: DataFrame) -> DataFrame:
    """The records of a parsed batch that are not usable events (with raw bytes and problem); heartbeats and
    oversize markers with their parts' offsets are neither."""
    return parsed.where(is_malformed(F.col("problem")))


def batch_value(batch_id: int) -> Column:
    """`batch_id` as a column of every row, typed as `F.lit(batch_id)` is (int, long from 2^31: the change log's
    column was made that way), whose generated code is the same in every batch.

    Code generation writes a long literal into the generated class, so `F.lit(batch_id)` made each batch's
    stage a class of its own, compiled again (Janino, on the driver and in the tasks). A string literal is
    kept out of the code (a reference); the empty string made from the partition id, which is not known before
    the rows run, keeps the optimizer from folding the cast back into a number in the code."""
    unknown_empty = F.substring(F.spark_partition_id().cast("string"), 1, 0)
    return F.concat(F.lit(str(batch_id)), unknown_empty).cast("int" if batch_id < 2**31 else "long")


def heartbeat_ts(among: Column | None = None) -> Column:
    """The newest source time the heartbeat records of a parsed batch (those `among` marks) vouch for (an
    aggregate; null without any)."""
    source_ts = F.get_json_object(F.col("raw").cast("string"), "$.source.ts_ms").cast("long")
    beat = F.col("problem") == F.lit(HEARTBEAT)
    return F.max(F.when(beat if among is None else beat & among, source_ts))


_IDENTITY = {
    "_d_connector": "source.connector", "_d_name": "source.name", "_d_cluster": "source.cluster_id",
    "_d_db": "source.db", "_d_table": "source.table", "_d_region": "source.region", "_d_pos": "source.pos",
}  # fmt: skip


def dedupe(events: DataFrame) -> DataFrame:
    """One row per change identity (source name and cluster, table, row key, region, pos):
    duplicates from at-least-once delivery collapse here; two sources never do. The changes of one
    row key end up in one partition. Records with a
    `problem` (if the frame has that column) are never collapsed: each keeps its Kafka position."""
    identity = {alias: F.col(column) for alias, column in _IDENTITY.items()}
    if "problem" in events.columns:
        identity["_d_malformed"] = F.when(F.col("problem").isNotNull(), F.struct("topic", "partition", "offset"))
    # one projection (a withColumn per column would analyse the whole plan again each time)
    events = events.select("*", *(column.alias(alias) for alias, column in identity.items()))
    # Partitioned by the row alone (the one shuffle: it satisfies dropDuplicates' clustering too), so
    # every change of a row stays in one partition, where a sink can apply them in position order.
    return events.repartition("kafka_key").dropDuplicates(["kafka_key", *identity]).drop(*identity)


def newest_per_key(rows: DataFrame, keys: list[str], pos: str = "pos") -> DataFrame:
    """The row with the greatest position per key (positions order by source commit order): what a
    current-state sink applies from a batch. Every sink that keeps current state picks its rows here."""
    columns = [c for c in rows.columns if c not in keys]
    return (
        rows.select(*keys, F.struct(*columns).alias("_newest"))
        .groupBy(*keys)
        .agg(F.max_by("_newest", F.col(f"_newest.{pos}")).alias("_newest"))
        .select(*keys, "_newest.*")
    )
