"""The change-event envelope as a Spark schema, and the split into valid events and dead letters."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdcflow.events.json_codec import SCHEMA_ID

CELL = StructType(
    [
        StructField("family", StringType()),
        StructField("qualifier", StringType()),
        StructField("ts", LongType()),
        StructField("type", StringType()),
        StructField("value", StringType()),
        StructField("tags", StringType()),
    ]
)
SOURCE = StructType(
    [
        StructField("connector", StringType()),
        StructField("name", StringType()),
        StructField("db", StringType()),
        StructField("table", StringType()),
        StructField("ts_ms", LongType()),
        StructField("snapshot", BooleanType()),
        StructField("pos", ArrayType(LongType())),
        StructField("region", StringType()),
        StructField("cluster_id", StringType()),
    ]
)
# Objects whose shape depends on the source table (key, before, after) stay raw JSON strings.
ENVELOPE = StructType(
    [
        StructField("schema", StringType()),
        StructField("op", StringType()),
        StructField("key", StringType()),
        StructField("before", StringType()),
        StructField("after", StringType()),
        StructField("source", SOURCE),
        StructField("cells", ArrayType(CELL)),
        StructField("ts_ms", LongType()),
        # Filled by from_json (PERMISSIVE) with the raw text when the value is not valid JSON.
        StructField("_corrupt", StringType()),
    ]
)


def _problem(e: Column) -> Column:
    """Why a parsed record is not a usable event (null when it is)."""
    return (
        F.when(e.isNull() | e["_corrupt"].isNotNull(), F.lit("not a JSON object"))
        .when(e["schema"].isNull() | (e["schema"] != SCHEMA_ID), F.lit(f"schema is not {SCHEMA_ID}"))
        .when(~e["op"].isin("c", "u", "d", "r"), F.lit("op is not one of c, u, d, r"))
        .when(e["source"].isNull() | e["source"]["connector"].isNull(), F.lit("source.connector missing"))
        .when(
            e["source"]["pos"].isNull()
            | (F.size(e["source"]["pos"]) == 0)
            | F.exists(e["source"]["pos"], lambda p: p.isNull() | (p < 0)),
            F.lit("source.pos must be a non-empty array of non-negative integers"),
        )
        .when((e["source"]["connector"] == "hbase") & e["cells"].isNull(), F.lit("hbase event without cells"))
    )


def split(raw: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(events, dead letters) from a Kafka DataFrame (key, value, topic, partition, offset, ...)."""
    parsed = raw.select(
        "topic",
        "partition",
        "offset",
        F.col("key").alias("kafka_key"),
        F.col("value").alias("raw"),
        F.from_json(
            F.col("value").cast("string"), ENVELOPE, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
        ).alias("e"),
    ).withColumn("problem", _problem(F.col("e")))
    events = (
        parsed.where(F.col("problem").isNull())
        .select("topic", "partition", "offset", "kafka_key", "e.*")
        .drop("_corrupt")
    )
    dead = parsed.where(F.col("problem").isNotNull()).select(
        "topic", "partition", "offset", "kafka_key", "raw", F.col("problem").alias("error")
    )
    return events, dead


def dedupe(events: DataFrame) -> DataFrame:
    """One row per (row key, region, pos): duplicates from at-least-once delivery collapse here."""
    return (
        events.withColumn("_d_region", F.col("source.region"))
        .withColumn("_d_pos", F.col("source.pos"))
        .dropDuplicates(["kafka_key", "_d_region", "_d_pos"])
        .drop("_d_region", "_d_pos")
    )
