"""Kafka → Spark → Delta current-state tables, against the real stack (HBase, Kafka, Spark, Delta)."""

from __future__ import annotations

import functools
import json
import random
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.sinks import DeltaChangelogOptions, DeltaStateOptions
from cdcflow.dev.testing import soak_size
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta import fold_service
from cdcflow.pipeline.sinks.delta.changelog import DeltaChangelogSink, changes
from cdcflow.pipeline.sinks.delta.layouts.base import FoldHooks
from cdcflow.pipeline.sinks.delta.records import deletes_path, read_record
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.delta.views import current_view, hbase_state_rows
from cdcflow.verify.hbase import compare_rows, rows_of

from .hbase_capture import PeerSetup, wait_until_replicated
from .test_hbase_capture import SPLITS, workload
from .test_pipeline_hbase import captured_table, pipeline_for
from .test_sink_interleavings import events_frame, hbase_event, random_change

# sinks made directly, outside a pipeline: Kafka is not read by what these tests do with them
NO_ENDPOINTS = Endpoints(bootstrap_servers="unused:9092")


def test_delta_state_table_equals_the_hbase_source_version_by_version(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup, split_keys=SPLITS)
    workload(hbase_client, source, random.Random(5))  # every delete type, versions, a 5 MB value
    wait_until_replicated(hbase_client, kafka["bootstrap_servers"], source, topic, [b"", *SPLITS])
    root = tmp_path / "state"
    sink = SinkConfig(
        name="state",
        type="delta",
        options={"path": str(root), "max_versions": 1000, "typed_columns": {"cf:n": "long", "cf:batch": "utf8"}},
    )
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints", sink, max_offsets_per_trigger=1000
    )  # one batch: batch boundaries are test_sink_interleavings.py's subject
    pipeline = Pipeline(cfg, context, checkpoints)
    assert pipeline.run(available_now=True)["state"] == "done"
    spark = pipeline.spark
    assert spark is not None
    path = str(root / "it" / "default" / source)  # <path>/<source name>/<ns>/<table>

    for versions in (1000, 1):
        report = compare_rows(
            rows_of(hbase_client.scan(source, max_versions=versions)), hbase_state_rows(spark, path, versions)
        )
        assert report.clean and report.rows_compared > 50, report.summary() + "\n" + "\n".join(report.examples)

    table = spark.read.format("delta").load(path)
    counter = table.where("row_key = X'10636F756E746572'").first()  # b"\x10counter"
    assert counter is not None
    [hbase_counter] = [c for c in hbase_client.scan(source) if c.row == b"\x10counter"]
    assert counter["cf_n"] == struct.unpack(">q", hbase_counter.value)[0]
    assert table.where("cf_batch IS NOT NULL").count() == 40 - 5  # 5 rows had cf:batch deleted
    assert table.where("NOT exists").count() >= 1  # the whole-row delete left a tombstone row

    # Replaying the whole topic from scratch commits nothing: every row is already in that state.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
    assert Pipeline(cfg, context, tmp_path / "checkpoints-2").run(available_now=True)["state"] == "done"
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() == history


def mysql_event(db: str, table: str, op: str, key: int, pos: list[int], after: dict[str, Any] | None) -> bytes:
    """A MySQL-sourced change in the envelope (what `cdcflow mysql` emits)."""
    return json.dumps(
        {
            "schema": SCHEMA_ID,
            "op": op,
            "key": {"id": key},
            "before": None,
            "after": after,
            "source": {
                "connector": "mysql",
                "name": "db1",
                "db": db,
                "table": table,
                "ts_ms": 1_700_000_000_000,
                "snapshot": False,
                "pos": pos,
            },
            "ts_ms": 1_700_000_000_000,
        }
    ).encode()


def history_record(db: str, table: str, columns: list[tuple[str, str]], key: str = "id") -> tuple[bytes, bytes]:
    """A `kind: table` schema-history record as the MySQL capture writes it (source db1)."""
    cols = [{"name": n, "type": t.split("(")[0], "sql_type": t, "nullable": n != key, "key": n == key,
             "key_order": 0 if n == key else None} for n, t in columns]  # fmt: skip
    return b"db1", json.dumps({"kind": "table", "source": "db1", "db": db, "table": table, "columns": cols}).encode()


def test_mysql_rows_apply_by_position_deletes_delete_and_tables_have_names(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, peer_setup: PeerSetup
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    topic, history = f"{peer_setup.name}.shop.orders", f"{peer_setup.name}-history"
    k.create_topic(bootstrap, topic, partitions=1)
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [history_record("shop", "orders", [("id", "INT"), ("qty", "INT")])])
    first = [
        mysql_event("shop", "orders", "c", 1, [1, 100, 0], {"id": 1, "qty": 1}),
        mysql_event("shop", "orders", "c", 2, [1, 110, 0], {"id": 2, "qty": 5}),
        mysql_event("shop", "orders", "u", 1, [1, 120, 0], {"id": 1, "qty": 2}),
        mysql_event("shop", "orders", "u", 1, [1, 120, 1], {"id": 1, "qty": 3}),  # same statement, next row image
        mysql_event("shop", "orders", "d", 2, [2, 4, 0], None),  # position in the next binlog file
        mysql_event("shop", "orders", "c", 3, [2, 9, 0], {"id": 3, "qty": 7}),
    ]
    k.produce_sync(bootstrap, topic, [(b'{"id":%d}' % i, v) for i, v in enumerate(first)])
    # Later batches replay old positions: none may win over what is applied.
    stale = [first[0], first[1], first[2], mysql_event("shop", "orders", "u", 3, [1, 999, 0], {"id": 3, "qty": 0})]
    k.produce_sync(bootstrap, topic, [(b"k", v) for v in stale])
    typed_root, json_root = tmp_path / "state", tmp_path / "json-state"
    prefix = f"{peer_setup.name}_"
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="state", type="delta", options={"path": str(typed_root), "schema_history_topic": history,
                                                        "catalog_database_prefix": prefix}),
        SinkConfig(name="json_state", type="delta", options={"path": str(json_root), "mysql_layout": "json",
                                                             "register_in_catalog": False}),
        max_offsets_per_trigger=3,
    )  # fmt: skip
    pipeline = Pipeline(cfg, context, checkpoints)
    assert pipeline.run(available_now=True) == {"state": "done", "json_state": "done"}
    spark = pipeline.spark
    assert spark is not None

    # Typed: the source's columns; the deleted row is gone, its key's delete position kept beside.
    path = str(typed_root / "db1" / "shop" / "orders")
    rows = {r["id"]: r.asDict() for r in spark.read.format("delta").load(path).collect()}
    assert {i: (r["qty"], r["_cdcflow_deleted"], r["_cdcflow_op"], r["_cdcflow_pos"]) for i, r in rows.items()} == {
        1: (3, False, "u", [1, 120, 1]), 3: (7, False, "c", [2, 9, 0])}  # fmt: skip
    deleted = spark.read.format("delta").load(deletes_path(path)).collect()
    assert [(json.loads(r["key"]), r["pos"]) for r in deleted] == [({"id": 2}, [2, 4, 0])]
    view = {r["id"]: r["qty"] for r in current_view(spark, path).collect()}
    assert view == {1: 3, 3: 7}
    # By name in the session's catalog: the view and the state table beside it.
    assert {r["id"]: r["qty"] for r in spark.table(f"{prefix}shop.orders").collect()} == view
    assert spark.table(f"{prefix}shop.orders_state").count() == 2

    # The JSON layout, kept as an option: key and row image as JSON text.
    json_path = str(json_root / "db1" / "shop" / "orders")
    rows = {json.loads(r["key"])["id"]: r for r in spark.read.format("delta").load(json_path).collect()}
    assert json.loads(rows[1]["after"]) == {"id": 1, "qty": 3} and rows[1]["pos"] == [1, 120, 1]
    assert json.loads(rows[3]["after"]) == {"id": 3, "qty": 7} and set(rows) == {1, 3}  # [1, 999] sorts before [2, 9]
    assert not spark.catalog.tableExists("shop.orders")  # register_in_catalog: false

    # A later run: row 1 deleted, row 2's old create and row 3's old update replayed. The view shows it
    # before the fold (by name as well), and the fold's Change Data Feed reports the delete as a delete.
    newest = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()
    assert newest is not None
    later = [mysql_event("shop", "orders", "d", 1, [3, 1, 0], None), first[1], stale[3]]
    k.produce_sync(bootstrap, topic, [(b"k", v) for v in later])
    second = Pipeline(cfg, context, checkpoints)
    sink = next(s for s in second.sinks if s.name == "state")
    folded: list[list[Any]] = []
    fold_all = sink.flush
    sink.flush = lambda s: folded.append(s.table(f"{prefix}shop.orders").collect()) or fold_all(s)  # type: ignore[method-assign,func-returns-value]
    assert second.run(available_now=True) == {"state": "done", "json_state": "done"}
    assert {r["id"]: r["qty"] for r in folded[0]} == {3: 7}  # the view before the final fold
    assert {r["id"]: r["qty"] for r in spark.read.format("delta").load(path).collect()} == {3: 7}
    assert {r["id"]: r["qty"] for r in spark.table(f"{prefix}shop.orders").collect()} == {3: 7}
    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", newest["version"] + 1)
    assert [(r["_change_type"], r["id"]) for r in feed.load(path).collect()] == [("delete", 1)]


def typed_mysql_pipeline(
    peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, table: str
) -> tuple[str, str, PipelineConfig, dict[str, Any], Path]:
    """A delta sink with typed MySQL tables over this test's topic for shop.<table>, with its own
    schema-history topic: (topic, history topic, config, context, checkpoints)."""
    bootstrap = kafka["bootstrap_servers"]
    topic, history = f"{peer_setup.name}.shop.{table}", f"{peer_setup.name}-history"
    k.create_topic(bootstrap, topic, partitions=1)
    k.create_topic(bootstrap, history, partitions=1)
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="state", type="delta", options={"path": str(tmp_path), "schema_history_topic": history}),
    )  # fmt: skip
    return topic, history, cfg, context, checkpoints


def test_typed_mysql_tables_follow_add_and_modify_column_and_refuse_the_rest(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, peer_setup: PeerSetup
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    topic, history, cfg, context, checkpoints = typed_mysql_pipeline(peer_setup, kafka, hbase, tmp_path, "items")
    path = str(tmp_path / "db1" / "shop" / "items")

    def step(shape: list[tuple[str, str]], *events: bytes) -> dict[str, str]:
        k.produce_sync(bootstrap, history, [history_record("shop", "items", shape)])
        k.produce_sync(bootstrap, topic, [(b"k", e) for e in events])
        return Pipeline(cfg, context, checkpoints).run(available_now=True, max_failures=1)

    assert step([("id", "INT"), ("qty", "INT")], mysql_event("shop", "items", "c", 1, [1, 1, 0], {"id": 1, "qty": 1}))[
        "state"] == "done"  # fmt: skip
    # ALTER TABLE items MODIFY qty BIGINT, ADD note VARCHAR(10): the column widens in place, the new one appears.
    result = step(
        [("id", "INT"), ("qty", "BIGINT"), ("note", "VARCHAR(10)")],
        mysql_event("shop", "items", "u", 1, [1, 2, 0], {"id": 1, "qty": 2**40, "note": "wide"}),
        mysql_event("shop", "items", "c", 2, [1, 3, 0], {"id": 2, "qty": 2, "note": None}),
    )
    assert result["state"] == "done", result
    spark = build_session("cdcflow-test")
    table = spark.read.format("delta").load(path)
    assert [(f.name, f.dataType.simpleString()) for f in table.schema.fields][:3] == [
        ("id", "int"), ("qty", "bigint"), ("note", "string")]  # fmt: skip
    assert sorted((r["id"], r["qty"], r["note"]) for r in table.collect()) == [(1, 2**40, "wide"), (2, 2, None)]
    # MODIFY qty VARCHAR(5): Delta cannot change bigint to string in place; the table is rewritten in the new
    # shape, the retyped column empty until the rows the capture reads again after the DDL fill it (here: id 2's
    # change); DROP COLUMN note with it: gone from the table.
    reshapes = metrics.DELTA_RESHAPES.labels("state")._value.get()
    result = step(
        [("id", "INT"), ("qty", "VARCHAR(5)")],
        mysql_event("shop", "items", "u", 2, [1, 4, 0], {"id": 2, "qty": "many"}),
    )
    assert result["state"] == "done", result
    table = spark.read.format("delta").load(path)
    assert [(f.name, f.dataType.simpleString()) for f in table.schema.fields][:2] == [("id", "int"), ("qty", "string")]
    assert "note" not in table.columns and metrics.DELTA_RESHAPES.labels("state")._value.get() == reshapes + 1
    assert sorted((r["id"], r["qty"]) for r in table.collect()) == [(1, None), (2, "many")]


def test_a_typed_mysql_batch_that_outgrows_the_known_shape_is_checked_then_merged_or_refused(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, peer_setup: PeerSetup
) -> None:
    """The typed MERGE checks its rows against the shape the sink knows inside its own pass
    (no separate check job per table and batch). One sink, so its known shape goes
    stale: a column added in MySQL fails that MERGE, the checked path reads the schema history
    again and merges; a value that fits no history fails it and is refused by name, with nothing
    written. Each time the checked path ran (its counter)."""
    bootstrap = kafka["bootstrap_servers"]
    topic, history, cfg, context, checkpoints = typed_mysql_pipeline(peer_setup, kafka, hbase, tmp_path, "parts")
    pipeline = Pipeline(cfg, context, checkpoints)  # one sink object across the runs below: its shape cache lives on
    path = str(tmp_path / "db1" / "shop" / "parts")

    def checks() -> float:
        return REGISTRY.get_sample_value("cdcflow_pipeline_delta_shape_checks_total", {"sink": "state"}) or 0.0

    def step(shape: list[tuple[str, str]] | None, *events: bytes) -> str:
        if shape:
            k.produce_sync(bootstrap, history, [history_record("shop", "parts", shape)])
        k.produce_sync(bootstrap, topic, [(b"k", e) for e in events])
        return pipeline.run(available_now=True, max_failures=1)["state"]

    before = checks()
    assert step([("id", "INT"), ("qty", "INT")], mysql_event("shop", "parts", "c", 1, [1, 1, 0], {"id": 1, "qty": 1})
                ) == "done"  # fmt: skip
    assert checks() == before  # the known shape fitted: no check of its own
    # ALTER TABLE parts ADD colour VARCHAR(8): the sink's shape lacks the column, the history has it.
    added = mysql_event("shop", "parts", "c", 2, [1, 2, 0], {"id": 2, "qty": 5, "colour": "red"})
    assert step([("id", "INT"), ("qty", "INT"), ("colour", "VARCHAR(8)")], added) == "done"
    assert checks() == before + 1
    spark = build_session("cdcflow-test")
    rows = sorted((r["id"], r["qty"], r["colour"]) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, 1, None), (2, 5, "red")]
    # A value no schema-history record fits: the batch is refused by name, nothing of it written.
    result = step(None, mysql_event("shop", "parts", "u", 1, [1, 3, 0], {"id": 1, "qty": "lots", "colour": "x"}))
    assert result.startswith("failed") and "values of column(s) ['qty'] do not fit" in result, result
    assert checks() == before + 2
    rows = sorted((r["id"], r["qty"], r["colour"]) for r in spark.read.format("delta").load(path).collect())
    assert rows == [(1, 1, None), (2, 5, "red")]


def test_the_change_log_holds_a_replayed_batch_once_and_shows_a_twice_delivered_change_once(tmp_path: Path) -> None:
    """The change log is one blind append per batch. A replayed batch (same query, same
    batch id) is skipped by the log's batch marks; a change the capture delivered again in a later
    batch is stored twice and read once through `changes()`."""
    spark = build_session("cdcflow-test")
    path = str(tmp_path / "changelog")
    sink = DeltaChangelogSink("log", DeltaChangelogOptions(path=path), NO_ENDPOINTS)
    sink.query_id = "q1"

    def batch(first: int, count: int) -> list[bytes]:
        return [hbase_event("w", "t", [Cell(b"r%d" % i, b"cf", b"a", 1, CellType.PUT, b"v")], i)
                for i in range(first, first + count)]  # fmt: skip

    for b in range(3):
        sink.apply_batch(events_frame(spark, batch(b * 50, 50)), b)
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
    sink.apply_batch(events_frame(spark, batch(100, 50)), 2)  # batch 2 replayed after a crash
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() == versions  # nothing committed
    assert spark.read.format("delta").load(path).count() == 150
    # batch 3 carries 10 changes of batch 2 again (a peer restart re-sent them) and 10 new ones
    sink.apply_batch(events_frame(spark, batch(140, 20)), 3)
    stored = spark.read.format("delta").load(path)
    assert stored.count() == 170  # the re-sent ten are stored twice ...
    shown = changes(spark, path)
    assert shown.count() == 160  # ... and shown once
    assert shown.select("event_key", "region", "pos").distinct().count() == 160
    assert shown.where("pos[0] >= 140 AND pos[0] < 150").select("batch_id").distinct().collect() == [(2,)]


def test_a_batch_is_committed_once_per_query_and_pass_across_restarts(tmp_path: Path) -> None:
    """The log's batch marks: a batch replayed by a new process, and its oversize pass, are not committed
    again; a new query (a reset checkpoint) starts its own batches; a log whose last batch was committed
    with Delta's transaction ids (earlier cdcflow versions) is continued without committing it twice."""
    spark = build_session("cdcflow-test")
    path = str(tmp_path / "changelog")

    def sink(query: str) -> DeltaChangelogSink:  # a new process each time
        s = DeltaChangelogSink("log", DeltaChangelogOptions(path=path), NO_ENDPOINTS)
        s.query_id = query
        return s

    def frame(first: int) -> DataFrame:
        return events_frame(spark, [hbase_event("w", "t", [Cell(b"r%d" % first, b"cf", b"a", 1, CellType.PUT, b"v")],
                                                first)])  # fmt: skip

    def commits() -> int:
        return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count())

    first = sink("q1")
    for b in range(2):
        first.apply_batch(frame(b), b)
    first.apply_reassembled(frame(10), 1)
    before = commits()
    again = sink("q1")
    again.apply_batch(frame(1), 1)  # replayed after a crash
    again.apply_reassembled(frame(10), 1)
    assert commits() == before
    again.apply_batch(frame(2), 2)
    again.apply_reassembled(frame(11), 2)
    assert commits() == before + 2
    marks = [json.loads(m)["cdcflow_batch"] for (m,) in spark.sql(f"DESCRIBE HISTORY delta.`{path}`")
             .where("userMetadata IS NOT NULL").select("userMetadata").collect()]  # fmt: skip
    assert {"sink": "log", "query": "q1", "reassembled": True, "batch": 2} in marks
    sink("q2").apply_batch(frame(0), 0)  # a reset checkpoint: a new query from batch 0
    assert commits() == before + 3
    (spark.createDataFrame(spark.read.format("delta").load(path).limit(1).collect(), spark.read.format("delta")
     .load(path).schema).write.format("delta").mode("append").option("txnAppId", "cdcflow-log-q3")
     .option("txnVersion", 5).save(path))  # fmt: skip
    old = sink("q3")
    old.apply_batch(frame(5), 5)
    assert commits() == before + 4
    old.apply_batch(frame(6), 6)
    assert commits() == before + 5
    assert spark.read.format("delta").load(path).count() == before + 5 - 1  # one row per commit but the create


def test_a_state_table_is_compacted_after_every_few_folds_that_wrote_to_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not by Delta's auto-compaction (it compacts every table at its first commit in each process): the fold
    thread's housekeeping runs OPTIMIZE on a table after every COMPACT_EVERY_FOLDS folds that wrote to it."""
    monkeypatch.setattr(fold_service, "COMPACT_EVERY_FOLDS", 2)
    spark = build_session("cdcflow-test")
    rng = random.Random(21)
    events = [hbase_event("w", "t", random_change(rng, b"r%02d" % rng.randrange(8)), seq) for seq in range(1, 61)]
    sink = DeltaStateSink("compact", DeltaStateOptions(path=str(tmp_path / "state")), NO_ENDPOINTS)
    state = str(tmp_path / "state" / "w" / "default" / "t")

    def optimizes() -> int:
        history = spark.sql(f"DESCRIBE HISTORY delta.`{state}`").collect()
        return sum(1 for r in history if r["operation"] == "OPTIMIZE")

    seen = []
    for b in range(3):
        sink.apply_batch(events_frame(spark, events[b * 20 : (b + 1) * 20]), b)
        sink.flush(spark)
        sink.service.housekeeping()  # the fold thread's round after its folds
        seen.append(optimizes())
    sink.close()
    assert seen == [0, 1, 1]  # after the second fold, and not again after the third


class _DiesAfterTheMerge(FoldHooks):
    """Folds that die after their MERGE committed, before the fold record is written."""

    def merged(self, path: str) -> None:
        raise RuntimeError("killed inside the fold")


def test_a_fold_killed_between_its_merge_and_its_record_is_redone_with_the_same_result(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fold that dies after its MERGE leaves the record behind the state table. The
    view meanwhile and the next fold apply those changes again: the state equals a clean run's."""
    spark = build_session("cdcflow-test")
    rng = random.Random(32)
    rows = [b"r%02d" % i for i in range(10)]
    events = [hbase_event("w", "t", random_change(rng, rng.choice(rows)), seq) for seq in range(1, 201)]

    def state(root: Path) -> str:
        return str(root / "w" / "default" / "t")

    clean = DeltaStateSink("clean", DeltaStateOptions(path=str(tmp_path / "clean")), NO_ENDPOINTS)
    for b in range(4):
        clean.apply_batch(events_frame(spark, events[b * 50 : (b + 1) * 50]), b)
    clean.flush(spark)
    expected = list(hbase_state_rows(spark, state(tmp_path / "clean"), 8))

    dying = DeltaStateSink(
        "dying", DeltaStateOptions(path=str(tmp_path / "dying")), NO_ENDPOINTS, hooks=_DiesAfterTheMerge()
    )
    for b in range(2):
        dying.apply_batch(events_frame(spark, events[b * 50 : (b + 1) * 50]), b)
    failures = metrics.DELTA_FOLD_FAILURES.labels("dying")._value.get()
    with caplog.at_level("ERROR", logger="cdcflow.pipeline.sinks.delta.folds"), pytest.raises(RuntimeError):
        dying.flush(spark)
    assert "fold failed" in caplog.text and metrics.DELTA_FOLD_FAILURES.labels("dying")._value.get() == failures + 1
    record = read_record(spark, state(tmp_path / "dying"))
    assert record is not None and record.folded_version == -1  # the MERGE committed, the record did not
    assert spark.read.format("delta").load(state(tmp_path / "dying")).count() > 0
    dying.close()

    restarted = DeltaStateSink("dying", DeltaStateOptions(path=str(tmp_path / "dying")), NO_ENDPOINTS)  # a new process
    for b in range(2, 4):
        restarted.apply_batch(events_frame(spark, events[b * 50 : (b + 1) * 50]), b)
    # before any fold: the view applies every logged change, the two batches folded once included
    assert list(hbase_state_rows(spark, state(tmp_path / "dying"), 8)) == expected
    restarted.flush(spark)
    record = read_record(spark, state(tmp_path / "dying"))
    assert record is not None and record.folded_version >= 3
    assert list(hbase_state_rows(spark, state(tmp_path / "dying"), 8)) == expected
    # the folded state table itself, without the view's pending changes: the same rows
    folded = {bytes(r["row_key"]) for r in spark.read.format("delta").load(state(tmp_path / "dying")).where("exists")
              .collect()}  # fmt: skip
    assert folded == {row for row, _cells in expected}


def test_a_restart_with_nothing_new_folds_and_names_what_a_killed_run_left(tmp_path: Path) -> None:
    """A process killed after logging batches but before folding them, then a run that gets no new
    batch (everything was committed in Spark's checkpoint): a running pipeline folds and names the
    tables within fold_interval_s, an --available-now run in its last step (a CI run caught the
    latter naming nothing)."""
    spark = build_session("cdcflow-test")
    rng = random.Random(36)
    rows = [b"r%02d" % i for i in range(10)]
    events = [hbase_event("idle", "idle_t", random_change(rng, rng.choice(rows)), seq) for seq in range(1, 121)]
    options = DeltaStateOptions(path=str(tmp_path / "state"), fold_interval_s=3600)  # no fold before the kill
    path = str(tmp_path / "state" / "idle" / "default" / "idle_t")

    def killed_after_logging(batch: int) -> None:
        killed = DeltaStateSink("idle", options, NO_ENDPOINTS)
        killed.apply_batch(events_frame(spark, events[batch * 60 : (batch + 1) * 60]), batch)
        killed.close()  # the process ends here: logged, not folded
        assert not spark.catalog.tableExists("default.idle_t")

    def folded_and_named() -> bool:
        record = read_record(spark, path)
        return record is not None and record.folded_version >= batch and spark.catalog.tableExists("default.idle_t")

    batch = 0
    killed_after_logging(batch)
    running = DeltaStateSink("idle", options.model_copy(update={"fold_interval_s": 1.0}), NO_ENDPOINTS)
    running.open(spark)  # what the pipeline does before starting the sink's query; no batch follows
    deadline = time.monotonic() + 120
    while not folded_and_named():
        assert time.monotonic() < deadline, "a running pipeline never folded what the killed run logged"
        time.sleep(0.5)
    running.close()
    assert spark.table("default.idle_t").count() == len(list(hbase_state_rows(spark, path, 1))) > 0

    spark.sql("DROP VIEW default.idle_t")
    batch = 1
    killed_after_logging(batch)
    restarted = DeltaStateSink("idle", options, NO_ENDPOINTS)  # --available-now: no batch, then flush
    restarted.open(spark)
    restarted.flush(spark)
    assert folded_and_named() and spark.catalog.tableExists("default.idle_t_state")
    assert spark.table("default.idle_t").count() == len(list(hbase_state_rows(spark, path, 1))) > 0
    restarted.close()


def operations(spark: Any, path: Path) -> list[str]:
    return [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()]


def test_the_change_log_is_compacted_by_the_fold_thread_and_reads_stay_exact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The log gets small files every batch; the sink OPTIMIZEs it every
    `log_optimize_every` versions in its fold thread, while batches go on, and nothing changes for readers."""
    spark = build_session("cdcflow-test")
    first_job = newest_job_id(spark) + 1
    rng = random.Random(33)
    rows = [b"r%02d" % i for i in range(10)]
    events = [hbase_event("w", "t", random_change(rng, rng.choice(rows)), seq) for seq in range(1, 81)]
    reference = DeltaStateSink("ref", DeltaStateOptions(path=str(tmp_path / "ref"), log_optimize_every=0), NO_ENDPOINTS)
    sink = DeltaStateSink("opt", DeltaStateOptions(path=str(tmp_path / "opt"), log_optimize_every=2), NO_ENDPOINTS)
    with caplog.at_level("INFO", logger="cdcflow.pipeline.sinks.delta"):
        for b in range(4):
            for s in (reference, sink):
                s.apply_batch(events_frame(spark, events[b * 20 : (b + 1) * 20]), b)
            time.sleep(1.2)  # the fold thread looks every second
        assert "OPTIMIZE" in operations(spark, tmp_path / "opt" / "_changes")
        assert "change log" in caplog.text and "compacted" in caplog.text
        for s in (reference, sink):
            s.flush(spark)  # waits for the fold thread's round in progress
        assert "vacuumed (files unreferenced for over 168 hours)" in caplog.text
    assert "OPTIMIZE" not in operations(spark, tmp_path / "ref" / "_changes")
    expected = list(hbase_state_rows(spark, str(tmp_path / "ref" / "w" / "default" / "t"), 8))
    assert expected and list(hbase_state_rows(spark, str(tmp_path / "opt" / "w" / "default" / "t"), 8)) == expected
    assert spark.read.format("delta").load(str(tmp_path / "opt" / "_changes")).count() == len(events)
    # Everything above, VACUUM included, in a few thousand tasks: VACUUM's file listing alone ran 70,000 at
    # Spark's default listing parallelism (session.py).
    assert tasks_since(spark, first_job) < 5_000


def newest_job_id(spark: Any) -> int:
    listed = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # newest first
    return int(listed.apply(0).jobId()) if listed.size() else -1


def tasks_since(spark: Any, first_job: int) -> int:
    """Tasks of the session's jobs from `first_job` on."""
    listed = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    jobs = [listed.apply(i) for i in range(listed.size())]
    return sum(int(j.numTasks()) for j in jobs if int(j.jobId()) >= first_job)


MANY_TABLES = 100


@pytest.mark.skipif(
    soak_size(0, 1) == 0,
    reason="make soak only (100 tables: about 5 minutes of folds on two cores); make test covers several tables "
    "per sink (the chain's three, two sources) and replayed older changes after deletes (the MySQL deletes test)",
)
def test_a_hundred_tables_in_one_sink_fold_and_read_exactly(tmp_path: Path) -> None:
    """One sink, 100 MySQL tables, changes spread over all of them in every batch, folds
    running beside the batches, then the first batch delivered again (older creates of rows deleted
    since): every state table after the final fold, and every view, equal the source's rows."""
    spark = build_session("cdcflow-test")
    rng = random.Random(100)
    tables = [f"t{i:03d}" for i in range(MANY_TABLES)]
    expected: dict[str, dict[int, int]] = {t: {} for t in tables}
    batches: list[list[bytes]] = []
    for b in range(4):
        values = []
        for seq in range(b * 1000 + 1, (b + 1) * 1000 + 1):
            table, key, op = rng.choice(tables), rng.randrange(15), rng.choice("cuud")
            after = None if op == "d" else {"id": key, "qty": seq}
            if after is None:
                expected[table].pop(key, None)
            else:
                expected[table][key] = seq
            values.append(mysql_event("shop", table, op, key, [1, seq, 0], after))
        batches.append(values)
    root = tmp_path / "state"
    fold_rows = 3000 // MANY_TABLES  # most tables become due in the third batch
    sink = DeltaStateSink(
        "many", DeltaStateOptions(path=str(root), mysql_layout="json", fold_rows=fold_rows), NO_ENDPOINTS
    )
    for b, values in enumerate([*batches, batches[0]]):
        sink.apply_batch(events_frame(spark, values), b)
    deadline = time.monotonic() + 300
    while not any(t["last_fold_ms"] for t in sink.status()["tables"].values()):  # folds run beside the batches
        assert time.monotonic() < deadline, "no fold ran in the background"
        time.sleep(0.5)
    sink.flush(spark)
    sink.close()

    def rows(frame: Callable[[str, str], Any]) -> dict[str, dict[int, int]]:
        """Every table's rows, read ten tables at a time: the plans of a hundred views held at once do not
        fit the test's 1 GB driver (each view reads the log's change feed), ten do."""
        found: dict[str, dict[int, int]] = {t: {} for t in tables}
        for start in range(0, len(tables), 10):
            frames = [frame(t, str(root / "db1" / "shop" / t)).select(F.lit(t).alias("table"), "key", "after")
                      for t in tables[start : start + 10]]  # fmt: skip
            for r in functools.reduce(lambda a, b: a.unionByName(b), frames).collect():
                found[r["table"]][json.loads(r["key"])["id"]] = json.loads(r["after"])["qty"]
        return found

    assert rows(lambda _t, path: spark.read.format("delta").load(path)) == expected
    assert rows(lambda _t, path: current_view(spark, path)) == expected
