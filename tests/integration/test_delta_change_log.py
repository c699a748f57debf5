"""The change log's appends (real Spark and Delta, the local file system): one commit per batch, its row counts
per table read back from the commit itself, and column statistics only where something reads them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.log import BatchLog, changelog_rows, ensure_log

KAFKA = StructType([
    StructField("key", BinaryType()), StructField("value", BinaryType()), StructField("topic", StringType()),
    StructField("partition", IntegerType()), StructField("offset", LongType()),
])  # fmt: skip


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-change-log")


def _event(table: str, pos: int) -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": "c", "ts_ms": 5, "key": {"id": pos}, "before": None,
        "after": {"id": pos, "v": "x" * 40},
        "source": {"connector": "mysql", "name": "src", "db": "shop", "table": table, "ts_ms": 4, "pos": [1, pos, 0]},
    }).encode()  # fmt: skip


def test_a_batch_is_one_commit_with_its_row_counts_and_statistics_on_the_batch_id_only(
    spark: SparkSession, tmp_path: Path
) -> None:
    values = [_event("a", p) for p in range(5)] + [_event("b", p) for p in range(5, 8)]
    raw = spark.createDataFrame([(b"k", v, "t1", 0, i) for i, v in enumerate(values)], KAFKA)
    rows = changelog_rows(events_of(parse(raw)), 3)
    path = str(tmp_path / "log")
    ensure_log(spark, path, rows.schema)
    log = BatchLog(path, "sink")
    log.open(spark)

    commit = log.append(spark, rows, "q1", 3)

    assert commit is not None
    assert commit.tables == {("mysql", "src", "shop", "a"): 5, ("mysql", "src", "shop", "b"): 3}
    assert log.append(spark, rows, "q1", 3) is None  # the same batch again: nothing written
    adds = [json.loads(line)["add"] for line in (Path(path) / "_delta_log" / f"{commit.version:020d}.json")
            .read_text().splitlines() if "add" in json.loads(line)]  # fmt: skip
    stats = [json.loads(a["stats"]) for a in adds]
    assert sum(s["numRecords"] for s in stats) == 8
    assert all(set(s["minValues"]) == {"batch_id"} and s["minValues"]["batch_id"] == 3 for s in stats)
    assert [r["batch_id"] for r in spark.read.format("delta").load(path).collect()] == [3] * 8


def test_a_batch_over_many_tables_after_one_writes_a_file_per_table(spark: SparkSession, tmp_path: Path) -> None:
    """Rows of many tables spread over the batch's tasks would be a file per table and task; once a batch held more
    tables than the session has cores, the next ones give each table's rows to one task."""
    tables = [f"t{i:02d}" for i in range(12)]
    assert len(tables) > spark.sparkContext.defaultParallelism
    path = str(tmp_path / "log")
    log = BatchLog(path, "sink")
    files: list[int] = []
    for batch in range(3):
        values = [_event(t, 1000 * batch + 10 * i + n) for i, t in enumerate(tables) for n in range(8)]
        raw = spark.createDataFrame([(b"k", v, "t1", 0, i) for i, v in enumerate(values)], KAFKA).repartition(4)
        rows = changelog_rows(events_of(parse(raw)), batch)
        if batch == 0:
            ensure_log(spark, path, rows.schema)
            log.open(spark)
        commit = log.append(spark, rows, "q1", batch)
        assert commit is not None and sum(commit.tables.values()) == len(values)
        commit_file = Path(path) / "_delta_log" / f"{commit.version:020d}.json"
        files.append(sum(1 for line in commit_file.read_text().splitlines() if "add" in json.loads(line)))
    assert files[0] > len(tables) and files[1:] == [len(tables)] * 2, files  # (the first: the tables not known yet)
    assert spark.read.format("delta").load(path).count() == 3 * 8 * len(tables)
