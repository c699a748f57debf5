"""The pipeline's shared first steps on real Spark: `envelope.parse` (one from_json per record,
the reason a record is unusable) and `envelope.dedupe` (duplicates collapse, malformed records
never do), on records written out by hand."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from cdcflow.events.heartbeats import heartbeat_record
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline.envelope import OVERSIZE, batch_value, dedupe, events_of, heartbeat_ts, malformed_of, parse
from cdcflow.pipeline.session import build_session

KAFKA = "key binary, value binary, topic string, partition int, offset long"


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-envelope")


def event(pos: list[int], **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": SCHEMA_ID, "op": "c", "ts_ms": 5, "key": {"row": "cjE="},
        "source": {"connector": "hbase", "name": "it", "cluster_id": "c1", "db": "default", "table": "t",
                   "region": "r1", "pos": pos, "ts_ms": 4},
        "cells": [{"family": "Zg==", "qualifier": "cQ==", "ts": 3, "type": "Put", "value": "dg=="}],
    }  # fmt: skip
    for name, value in changes.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    return doc


def kafka_frame(spark: SparkSession, values: list[bytes]) -> DataFrame:
    return spark.createDataFrame([(b"k", v, "t1", 0, i) for i, v in enumerate(values)], KAFKA)


def test_parse_names_the_problem_of_each_unusable_record_and_keeps_only_their_bytes(spark: SparkSession) -> None:
    good = json.dumps(event([1, 2])).encode()
    bad = {
        b"not json": "not a JSON object",
        b"[1, 2]": "not a JSON object",
        json.dumps(event([1], schema="other")).encode(): f"schema is not {SCHEMA_ID}",
        json.dumps(event([1], op="x")).encode(): "op is not one of c, u, d, r, t",
        json.dumps(event([1], source={"name": "it", "pos": [1]})).encode(): "source.connector missing",
        json.dumps(event([])).encode(): "source.pos must be a non-empty array of non-negative integers",
        json.dumps(event([3, -1])).encode(): "source.pos must be a non-empty array of non-negative integers",
        json.dumps(event([3, None])).encode(): "source.pos must be a non-empty array of non-negative integers",
        json.dumps(event([1], cells=None)).encode(): "hbase event without cells",
        json.dumps(event([1], oversize={"topic": "big", "id": "x1"})).encode():
            "oversize change: values left out here, the whole event is in topic big under key x1 (the marker "
            "does not say at which offsets)",
    }  # fmt: skip
    parsed = parse(kafka_frame(spark, [good, *bad]))
    rows = {r["offset"]: r for r in parsed.collect()}
    assert rows[0]["problem"] is None and rows[0]["raw"] is None
    assert rows[0]["source"]["pos"] == [1, 2] and rows[0]["cells"][0]["value"] == "dg=="
    assert json.loads(rows[0]["key"]) == {"row": "cjE="}  # table-shaped objects stay JSON text
    for offset, (value, problem) in enumerate(bad.items(), start=1):
        assert (rows[offset]["problem"], bytes(rows[offset]["raw"])) == (problem, value)
    assert "_corrupt" not in parsed.columns
    assert events_of(parsed).count() == 1 and malformed_of(parsed).count() == len(bad)


def test_the_parse_checks_hold_no_lambda(spark: SparkSession) -> None:
    """Only from_json keeps the parse out of whole-stage code generation: a lambda in the checks (`exists(pos,
    ...)`) would keep the projection above it out too, and every task would generate that wide projection's code
    again (the tests run interpreted, so the plan's text is what is checked)."""
    plan = parse(kafka_frame(spark, [json.dumps(event([1, 2])).encode()]))._jdf.queryExecution().executedPlan()
    assert "lambdafunction" not in plan.toString()


def test_an_oversized_delete_and_a_truncate_are_usable_events(spark: SparkSession) -> None:
    """A delete needs its key and position only, which its oversize marker keeps: the sinks apply it. An update's
    marker lacks the values: put back together from the parts it locates (OVERSIZE: neither an event nor a
    dead letter), or dead-lettered when it does not say where they are. A truncate (op t) is an event too."""
    marker = {"topic": "big", "id": "x1", "parts": 2, "bytes": 10, "sha256": "0", "columns": ["before.blob"]}
    located = {**marker, "partition": 0, "offsets": [7, 8]}
    delete = json.dumps(event([1, 4], op="d", oversize=marker)).encode()
    update = json.dumps(event([1, 5], op="u", oversize=marker)).encode()
    update_located = json.dumps(event([1, 5], op="u", oversize=located)).encode()
    truncate = json.dumps(event([1, 6], op="t", key={}, cells=None, source={
        "connector": "mysql", "name": "it", "db": "d", "table": "t", "pos": [1, 6], "ts_ms": 4},
        truncate={"cause": "drop", "ddl": "DROP TABLE t"})).encode()  # fmt: skip
    frame = parse(kafka_frame(spark, [delete, update, truncate, update_located]))
    parsed = frame.collect()
    assert [r["problem"] for r in parsed] == [
        None,
        "oversize change: values left out here, the whole event is in topic big under key x1 (the marker does not "
        "say at which offsets)",
        None,
        OVERSIZE,
    ]
    assert parsed[2]["truncate"]["cause"] == "drop"
    assert parsed[3]["oversize"]["offsets"] == [7, 8] and bytes(parsed[3]["raw"]) == update_located
    assert events_of(frame).count() == 2 and malformed_of(frame).count() == 1


def test_dedupe_collapses_repeated_changes_but_never_malformed_records(spark: SparkSession) -> None:
    first, second = json.dumps(event([1, 2])).encode(), json.dumps(event([1, 3])).encode()
    other_source = json.dumps(event([1, 2], source={**event([1])["source"], "name": "other", "pos": [1, 2]})).encode()
    values = [first, first, second, other_source, other_source, b"garbage", b"garbage"]
    kept = dedupe(parse(kafka_frame(spark, values))).collect()
    usable = sorted((r["source"]["name"], tuple(r["source"]["pos"])) for r in kept if r["problem"] is None)
    assert usable == [("it", (1, 2)), ("it", (1, 3)), ("other", (1, 2))]
    assert sorted(r["offset"] for r in kept if r["problem"] is not None) == [5, 6]
    assert not [c for c in kept[0].asDict() if c.startswith("_d_")]


def test_parse_in_a_second_session_of_the_same_process(spark: SparkSession) -> None:
    """The parse's columns are built once per JVM; a new session over the same JVM reuses them."""
    again = spark.newSession()
    rows = parse(kafka_frame(again, [json.dumps(event([7])).encode(), b"{"])).collect()
    assert [r["problem"] for r in rows] == [None, "not a JSON object"]


def test_heartbeat_records_are_neither_events_nor_dead_letters_and_carry_their_source_time(
    spark: SparkSession,
) -> None:
    position = {"gtid_state": "0-1-7", "file": "mariadb-bin.000002", "pos": 4567}
    beats = [heartbeat_record("mysql", "m1", position, 1_700_000_000_123, 1_700_000_000_500)[1],
             heartbeat_record("mysql", "m1", {}, 1_700_000_000_900, 1_700_000_001_000)[1],
             heartbeat_record("mysql", "m1", position, None, 1_700_000_001_500)[1]]  # fmt: skip
    parsed = parse(kafka_frame(spark, [json.dumps(event([1, 2])).encode(), *beats, b"garbage"]))
    assert [r["offset"] for r in events_of(parsed).collect()] == [0]
    assert [r["offset"] for r in malformed_of(parsed).collect()] == [4]
    assert parsed.agg(heartbeat_ts().alias("ts")).first()["ts"] == 1_700_000_000_900  # type: ignore[index]
    without = parse(kafka_frame(spark, [json.dumps(event([1, 2])).encode()]))
    assert without.agg(heartbeat_ts().alias("ts")).first()["ts"] is None  # type: ignore[index]


def test_the_batch_id_column_generates_the_same_code_in_every_batch(spark: SparkSession) -> None:
    """A long literal is written into the generated class: with `F.lit(batch_id)` every batch's stage was a new
    class for Janino to compile. `batch_value` keeps the id out of the code, with the type `F.lit` gives."""

    def code(column: Column) -> str:
        frame = spark.range(3).select(column.alias("batch_id"), (F.col("id") * 2).alias("twice"))
        generated = frame._jdf.queryExecution().debug().codegenToSeq()
        return "\n".join(str(generated.apply(i)._2()) for i in range(generated.size()))

    generated = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}
    previous = {key: spark.conf.get(key) for key in generated}  # the tests run interpreted otherwise
    for key, value in generated.items():
        spark.conf.set(key, value)
    try:
        assert code(F.lit(5)) != code(F.lit(6))  # what the literal did
        assert code(batch_value(5)) == code(batch_value(6)) != ""
    finally:
        for key, value in previous.items():
            spark.conf.set(key, value)
    rows = spark.range(2).select(batch_value(7).alias("b"), F.lit(7).alias("lit")).collect()
    assert [r["b"] for r in rows] == [7, 7]
    types = spark.range(1).select(batch_value(7).alias("a"), F.lit(7).alias("b"), batch_value(2**31).alias("c"),
                                  F.lit(2**31).alias("d")).schema  # fmt: skip
    assert [f.dataType for f in types[:2]] == [types[1].dataType] * 2 and types[2].dataType == types[3].dataType
