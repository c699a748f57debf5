"""Sinks that share one query (`group`, pipeline/groups.py): each batch read and parsed once for all of them; a
sink whose part fails falls behind and catches up on its own while the others go on; a sink added later catches
up from where it stood. Real HBase, peer, Kafka and Spark; every sink compared with the source row by row."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import ColumnFamily, Put, PutBuilder
from cdcflow.config import SinkConfig
from cdcflow.pipeline import groups, metrics
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.sinks.delta.views import current_view
from cdcflow.verify.hbase import verify_hbase

from .hbase_capture import PeerSetup
from .test_pipeline_delta import history_record, mysql_event
from .test_pipeline_hbase import captured_table, pipeline_for, wait_for_topic_rows
from .test_pipeline_offsets import cli

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def _put(i: int) -> PutBuilder:
    return Put(b"r%04d" % i).add(b"cf", b"c", b"v%d" % i, 100 + i)


def _wait(what: str, check: Callable[[], bool], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return
        except Exception:  # a table or folder not there yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(1)


def _equal(client: HBaseClient, source: str, copy: str, rows: int) -> bool:
    report = verify_hbase(client, source, client, copy)
    return report.clean and report.rows_compared == rows


def _changelog_keys(pipeline: Pipeline, path: Path) -> list[str]:
    assert pipeline.spark is not None
    return [r["key"] for r in pipeline.spark.read.parquet(str(path)).select("key").collect()]


def test_a_sink_failing_in_a_group_falls_behind_while_the_others_apply_then_catches_up_and_joins(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup)
    hbase_client.mutate_batch(source, [_put(i) for i in range(200)])
    wait_for_topic_rows(kafka, topic, 200)
    k.produce_sync(kafka["bootstrap_servers"], topic, [(b"g1", b"\xff not json")])  # dead-lettered once
    # a target without the source's families: every write of the sink fails (NoSuchColumnFamilyException)
    broken = f"{source}_not_fixed_yet"
    hbase_client.create_table(broken, [ColumnFamily("other")])
    changelog = tmp_path / "changelog"
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="broken", type="hbase", group="g", options={"table_suffix": "_not_fixed_yet"}),
        SinkConfig(name="changelog", type="parquet", group="g", options={"path": str(changelog)}),
        trigger_seconds=1, retry_backoff_max_s=1.0,
    )  # fmt: skip
    failures_before = metrics.FAILURES.labels("broken")._value.get()
    pipeline = Pipeline(cfg, context, checkpoints)
    stop = threading.Event()
    result: dict[str, str] = {}
    runner = threading.Thread(target=lambda: result.update(pipeline.run(stop=stop)))
    runner.start()
    try:
        # the healthy sink applies the group's batches while the broken one fails
        _wait("the changelog holds the first 200 changes", lambda: len(_changelog_keys(pipeline, changelog)) == 200)
        ledger = groups.load_ledger(checkpoints, "broken")
        assert ledger is not None and not ledger.joined and ledger.episode >= 1, ledger
        assert "its part of group batch" in ledger.reason
        assert read_progress(checkpoints)["broken"]["error"]
        hbase_client.mutate_batch(source, [_put(i) for i in range(200, 300)])
        _wait("the changelog holds 300 changes", lambda: len(_changelog_keys(pipeline, changelog)) == 300)
        still = groups.load_ledger(checkpoints, "broken")
        assert still is not None and not still.joined  # still failing: still behind

        hbase_client.delete_table(broken)  # the cause is fixed: the sink creates the table as it should be
        hbase_client.mutate_batch(source, [_put(i) for i in range(300, 400)])
        _wait("the broken sink caught up", lambda: _equal(hbase_client, source, broken, 400))
        # the next group batch starts where its catch-up ended: it joins that batch
        hbase_client.mutate_batch(source, [_put(i) for i in range(400, 450)])
        _wait("the broken sink joined its group again",
              lambda: (groups.load_ledger(checkpoints, "broken") or ledger).joined
              and _equal(hbase_client, source, broken, 450))  # fmt: skip
        _wait("the changelog holds 450 changes", lambda: len(_changelog_keys(pipeline, changelog)) == 450)
    finally:
        stop.set()
        runner.join(120)
    assert result == {"broken": "done", "changelog": "done"}
    assert metrics.FAILURES.labels("broken")._value.get() > failures_before  # the failure path ran
    keys = _changelog_keys(pipeline, changelog)
    assert len(keys) == len(set(keys)) == 450  # the healthy sink: each change once, none lost
    letters = k.consume(kafka["bootstrap_servers"], f"{peer_setup.name}-dead-letter", expected=2, timeout_s=10)
    assert [json.loads(r.value or b"{}")["error"] for r in letters] == ["not a JSON object"]  # once for the group
    ledger = groups.load_ledger(checkpoints, "broken")
    assert ledger is not None and ledger.joined and ledger.pending is None


def test_sinks_added_to_a_group_later_catch_up_from_where_they_stood_and_join(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup)
    hbase_client.mutate_batch(source, [_put(i) for i in range(200)])
    wait_for_topic_rows(kafka, topic, 200)
    changelog = tmp_path / "changelog"
    in_group = SinkConfig(name="changelog", type="parquet", group="g", options={"path": str(changelog)})
    copy = SinkConfig(name="copy", type="hbase", options={"create_tables": True})
    cfg, context, checkpoints = pipeline_for(peer_setup, kafka, hbase, tmp_path / "checkpoints", in_group, copy)
    assert Pipeline(cfg, context, checkpoints).run(available_now=True) == {"changelog": "done", "copy": "done"}
    assert _equal(hbase_client, source, f"{source}_copy", 200)

    hbase_client.mutate_batch(source, [_put(i) for i in range(200, 300)])
    wait_for_topic_rows(kafka, topic, 300)
    cfg, context, checkpoints = pipeline_for(peer_setup, kafka, hbase, checkpoints, in_group)  # without `copy`
    assert Pipeline(cfg, context, checkpoints).run(available_now=True) == {"changelog": "done"}
    # `copy` moves from a query of its own into the group (its query stands 100 changes behind the group's);
    # `copy2` is new
    moved = copy.model_copy(update={"group": "g"})
    new = SinkConfig(name="copy2", type="hbase", group="g", options={"table_suffix": "_copy2", "create_tables": True})
    cfg, context, checkpoints = pipeline_for(peer_setup, kafka, hbase, checkpoints, in_group, moved, new)
    pipeline = Pipeline(cfg, context, checkpoints)
    assert pipeline.run(available_now=True) == {"changelog": "done", "copy": "done", "copy2": "done"}
    assert _equal(hbase_client, source, f"{source}_copy", 300) and _equal(hbase_client, source, f"{source}_copy2", 300)
    ledgers = {name: groups.load_ledger(checkpoints, name) for name in ("copy", "copy2")}
    assert all(ledger is not None and ledger.episode == 1 and "added to group g" in ledger.reason
               for ledger in ledgers.values()), ledgers  # fmt: skip
    progress = read_progress(checkpoints)
    # copy caught up from its own query's position (the 100 new changes), copy2 from the topic's start
    assert (progress["copy"]["total_rows"], progress["copy2"]["total_rows"]) == (300, 300)

    hbase_client.mutate_batch(source, [_put(i) for i in range(300, 350)])
    wait_for_topic_rows(kafka, topic, 350)
    pipeline = Pipeline(cfg, context, checkpoints)
    assert pipeline.run(available_now=True) == {"changelog": "done", "copy": "done", "copy2": "done"}
    for name, table in (("copy", f"{source}_copy"), ("copy2", f"{source}_copy2")):
        ledger = groups.load_ledger(checkpoints, name)
        assert ledger is not None and ledger.joined, ledger  # the group's next batch started where they stood
        assert _equal(hbase_client, source, table, 350)
    keys = _changelog_keys(pipeline, changelog)
    assert len(keys) == len(set(keys)) == 350


def test_one_sink_of_a_group_rewound_replays_alone_and_stays_exact(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, peer_setup: PeerSetup
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    topic, history = f"{peer_setup.name}.shop.orders", f"{peer_setup.name}-history"
    k.create_topic(bootstrap, topic, partitions=2)
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [history_record("shop", "orders", [("id", "INT"), ("qty", "INT")])])
    events = [mysql_event("shop", "orders", "c", i, [1, 10 + i, 0], {"id": i, "qty": i}) for i in range(20)]
    events += [mysql_event("shop", "orders", "u", i, [2, i, 0], {"id": i, "qty": 100 + i}) for i in range(10)]
    events += [mysql_event("shop", "orders", "d", i, [3, i, 0], None) for i in range(5)]
    k.produce_sync(bootstrap, topic, [(b'{"id":%d}' % (i % 20), v) for i, v in enumerate(events)])
    checkpoints = tmp_path / "checkpoints"

    def delta(name: str) -> SinkConfig:
        return SinkConfig(name=name, type="delta", group="g", options={
            "path": str(tmp_path / name), "schema_history_topic": history, "register_in_catalog": False})  # fmt: skip

    cfg, context, _ = pipeline_for(peer_setup, kafka, hbase, checkpoints, delta("a"), delta("b"))
    config = tmp_path / "cdcflow.yaml"
    config.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap},
                                      "pipeline": {**json.loads(cfg.model_dump_json()),
                                                   "checkpoint_dir": str(checkpoints)}}))  # fmt: skip
    first = Pipeline(cfg, context, checkpoints)
    assert first.run(available_now=True) == {"a": "done", "b": "done"}
    spark = first.spark
    assert spark is not None
    expected = sorted([(i, 100 + i) for i in range(5, 10)] + [(i, i) for i in range(10, 20)])

    def view(name: str) -> list[tuple[int, int]]:
        assert spark is not None
        return sorted(
            (r["id"], r["qty"]) for r in current_view(spark, str(tmp_path / name / "db1/shop/orders")).collect()
        )

    assert view("a") == view("b") == expected
    shown = cli(config, "show")
    assert shown.returncode == 0 and "(group g's query group.g)" in shown.stdout, shown.stdout + shown.stderr
    rewound = cli(config, "reset", "b", "--to", "earliest")
    assert rewound.returncode == 0 and f"-{len(events)} records" in rewound.stdout, rewound.stdout + rewound.stderr
    assert "b: in group g, BEHIND (offsets reset to earliest)" in cli(config, "show").stdout

    second = Pipeline(cfg, context, checkpoints)
    assert second.run(available_now=True) == {"a": "done", "b": "done"}
    progress = read_progress(checkpoints)
    assert (progress["a"]["total_rows"], progress["b"]["total_rows"]) == (len(events), 2 * len(events))
    assert view("a") == view("b") == expected  # b read every change again and ignored what it held
    ledger = groups.load_ledger(checkpoints, "b")
    assert ledger is not None and ledger.episode == 1 and not ledger.joined  # joins at the group's next batch
