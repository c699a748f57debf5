"""Changes too large for one Kafka record reach every sink: the capture publishes a marker naming where its
parts are, and the pipeline puts the change back together and applies it (pipeline/oversize.py). A marker
whose parts are gone is dead-lettered and counted per sink and table, never applied half."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as k
from cdcflow.clients.mysql import execute
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.dev.testing import ServiceHarness, unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, source_config
from cdcflow.events.oversize import reassemble
from cdcflow.pipeline import metrics
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.runner import Pipeline
from cdcflow.verify.delta import verify_mysql_delta
from cdcflow.verify.mysql import source_rows
from cdcflow.verify.phoenix import verify_mysql_phoenix

SINKS = ("big-delta", "big-phoenix", "big-parquet")


def _applied(sink: str) -> float:
    return float(metrics.OVERSIZE_APPLIED.labels(sink)._value.get())


def _unapplied(sink: str, table: str) -> float:
    return float(metrics.UNAPPLIED.labels(sink, table)._value.get())


def test_oversized_inserts_updates_and_deletes_reach_every_sink(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_big")
    admin = admin_endpoint(mariadb)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, b LONGBLOB, v VARCHAR(20))")
    # Records over 256 KiB are split: a 400 KB value makes an event of ~540 KB (base64), three parts.
    name = unique_name("big")
    source = source_config(name, [db], max_record_bytes=256 * 1024, oversize_topic=f"{name}-oversize")
    topic = f"{source.topic_prefix}.{db}.t"
    big = [os.urandom(400_000) for _ in range(3)]
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        execute(admin, f"INSERT INTO {db}.t VALUES (1, 'a', 'one'), (2, 'b', 'two'), (3, 'c', 'three')")
        execute(admin, f"INSERT INTO {db}.t VALUES (4, X'{big[0].hex()}', 'four')")  # insert: oversize
        execute(admin, f"UPDATE {db}.t SET b = X'{big[1].hex()}', v = 'TWO' WHERE id = 2")  # update: oversize
        execute(admin, f"UPDATE {db}.t SET v = 'THREE' WHERE id = 3")
        execute(admin, f"DELETE FROM {db}.t WHERE id = 4")  # delete of an oversize row: a marker too
        execute(admin, f"INSERT INTO {db}.t VALUES (5, X'{big[2].hex()}', 'five')")
        records = k.consume(bootstrap, topic, expected=8, timeout_s=90)
        assert len(records) == 8
    finally:
        capture.stop()
    markers = [json.loads(r.value or b"{}") for r in records]
    markers = [m for m in markers if m.get("oversize")]
    assert sorted((m["op"], m["key"]["id"]) for m in markers) == [("c", 4), ("c", 5), ("d", 4), ("u", 2)]
    for m in markers:  # the capture says where the parts are, and they make the whole change
        info = m["oversize"]
        parts = k.read_at(bootstrap, info["topic"], info["partition"], info["offsets"])
        assert len(parts) == info["parts"] >= 2
        whole = json.loads(reassemble(v or b"" for v in parts.values()))
        assert whole["op"] == m["op"] and whole["source"]["pos"] == m["source"]["pos"] and "oversize" not in whole

    history = source.schema_history_topic
    state = tmp_path / "state"
    cfg = PipelineConfig(
        topics=source.topic_prefix.replace(".", "\\.") + "\\..*", dead_letter_topic=f"{source.name}-dead",
        sinks=(
            SinkConfig(name="big-delta", type="delta", options={"path": str(state), "schema_history_topic": history}),
            SinkConfig(name="big-phoenix", type="phoenix", options={
                "url": services.endpoints("phoenix")["jdbc_url"], "create_tables": True,
                "schema_history_topic": history}),
            SinkConfig(name="big-parquet", type="parquet", options={"path": str(tmp_path / "parquet")}),
        ),
    )  # fmt: skip
    table = f"{db}.t"
    applied_before = {s: _applied(s) for s in SINKS}
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}
    pipeline = Pipeline(cfg, context, tmp_path / "checkpoints")
    assert set(pipeline.run(available_now=True, max_failures=1).values()) == {"done"}
    # every sink put the three oversize inserts and updates together (the delete's marker is applied as it is)
    assert {s: _applied(s) - applied_before[s] for s in SINKS} == dict.fromkeys(SINKS, 3)
    spark = pipeline.spark
    assert spark is not None
    held = {json.loads(key)["id"]: row["v"] for key, row in source_rows(admin, db, "t").items()}
    assert held == {1: "one", 2: "TWO", 3: "THREE", 5: "five"}
    path = str(state / source.name / db / "t")
    delta = verify_mysql_delta(admin, db, "t", spark, path)
    assert delta.clean and delta.rows_compared == 4, delta.summary() + str(delta.examples)
    phoenix = verify_mysql_phoenix(admin, db, "t", phoenix_jvm, source=source.name)
    assert phoenix.clean and phoenix.rows_compared == 4, phoenix.summary() + str(phoenix.examples)
    logged = spark.read.parquet(str(tmp_path / "parquet")).where("op != 'd'").select("key").collect()
    assert sorted(json.loads(r["key"])["id"] for r in logged) == [1, 2, 2, 3, 3, 4, 5]
    assert k.end_offsets(bootstrap, f"{source.name}-dead") in ({}, {0: 0})  # nothing dead-lettered

    # A marker whose parts are gone (the oversize topic's retention): dead-lettered once, counted per sink
    # and table, the sinks left as they were.
    gone = next(m for m in markers if m["op"] == "u")
    gone["oversize"]["offsets"] = [10**12 + i for i in range(len(gone["oversize"]["offsets"]))]
    k.produce_sync(bootstrap, topic, [(json.dumps(gone["key"]).encode(), json.dumps(gone).encode())])
    unapplied_before = {s: _unapplied(s, table) for s in SINKS}
    assert set(Pipeline(cfg, context, tmp_path / "checkpoints").run(available_now=True, max_failures=1).values()) == {
        "done"
    }
    assert {s: _unapplied(s, table) - unapplied_before[s] for s in SINKS} == dict.fromkeys(SINKS, 1)
    letters = [json.loads(r.value or b"{}") for r in k.consume(bootstrap, f"{source.name}-dead", expected=1)]
    assert [(d["sink"], d["topic"]) for d in letters] == [("big-delta", topic)]
    assert "parts are no longer in" in letters[0]["error"]
    progress = read_progress(tmp_path / "checkpoints")
    assert {s: progress[s].get("unapplied") for s in SINKS} == {s: {table: 1} for s in SINKS}
    assert verify_mysql_delta(admin, db, "t", spark, path).clean
    assert verify_mysql_phoenix(admin, db, "t", phoenix_jvm, source=source.name).clean
