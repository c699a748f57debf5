"""The MySQL capture against Kafka shaped like production: three KRaft nodes, every topic replicated three times
with min.insync.replicas=2 (`cdcflow stack up kafka-cluster`). make soak only (three more Kafka JVMs)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdcflow.clients.kafka import end_offsets, topic_config
from cdcflow.clients.kafka.client import consume
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing import soak_size, unique_name
from cdcflow.dev.testing.kafka_cluster import KafkaNodes
from cdcflow.dev.testing.mysql import (
    WORKLOAD_TABLES,
    CaptureThread,
    MySqlWorkload,
    admin_endpoint,
    server_position,
    source_config,
)
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not soak_size(0, 1), reason="make soak only (three Kafka JVMs more than make test's stack)"),
]


def test_a_broker_killed_under_the_mysql_capture_loses_nothing_and_keeps_row_order(
    mariadb: dict[str, Any], tmp_path: Path
) -> None:
    """The leader of the busiest table's partition is SIGKILLed mid-workload and kept down 15 s (the two others
    hold the in-sync quorum, so writes go on), then comes back. Afterwards: every cdcflow topic has three
    replicas, the tables rebuilt from Kafka equal SELECT *, and each row's positions never go backwards."""
    cluster = Stack(tmp_path / "kafka-cluster")
    cluster.up(["kafka-cluster"])
    try:
        endpoints = cluster.endpoints("kafka-cluster")
        bootstrap = endpoints["bootstrap_servers"]
        nodes = KafkaNodes(endpoints)
        admin = admin_endpoint(mariadb)
        db = unique_name("kcluster")
        workload = MySqlWorkload(admin, db, seed=11, account_ids=300)
        workload.create()
        cfg = source_config(unique_name("kcsrc"), [db])
        capture = CaptureThread(cfg, mariadb, bootstrap).start()
        stop = threading.Event()

        def write() -> None:
            while not stop.is_set():
                workload.transaction()
                time.sleep(0.02)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            time.sleep(5)
            topic = f"{cfg.topic_prefix}.{db}.accounts"
            killed = nodes.leader(topic)
            at_kill = workload.transactions
            old_pid = nodes.kill(killed)
            time.sleep(15)
            moved_to = nodes.leader(topic)  # Kafka's own account: another replica leads meanwhile
            nodes.release(killed, old_pid)
            time.sleep(5)
        finally:
            stop.set()
            writer.join(60)
        workload.close()
        capture.wait_for_checkpoint(server_position(admin), timeout_s=180)
        stats = capture.stop()
        assert moved_to in nodes.nodes and moved_to != killed, (killed, moved_to)  # a live replica took over
        assert workload.transactions > at_kill + 50, at_kill

        topics = [f"{cfg.topic_prefix}.{db}.{t}" for t in WORKLOAD_TABLES]
        for name in [*topics, cfg.offsets_topic, cfg.schema_history_topic]:
            assert nodes.replicas(name) == [3] * len(nodes.replicas(name)), name
        assert topic_config(bootstrap, topics[0], "min.insync.replicas") == "2"

        values: list[bytes] = []
        for name in topics:
            expected = sum(end_offsets(bootstrap, name).values())
            values += [r.value for r in consume(bootstrap, name, expected=expected, timeout_s=120) if r.value]
        rebuilt, malformed = rebuild(values)
        assert malformed == 0
        for table in WORKLOAD_TABLES:
            report = compare_tables(source_rows(admin, db, table), rebuilt.get((db, table), {}))
            assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
        # Per row, in the order Kafka holds its changes: positions only increase, or repeat (a replay).
        last: dict[tuple[str, bytes], list[int]] = {}
        regressions = 0
        for value in values:
            event = orjson.loads(value)
            key = (event["source"]["table"], orjson.dumps(event["key"]))
            pos = event["source"]["pos"]
            if key in last and pos < last[key]:
                regressions += 1
            last[key] = pos
        assert regressions == 0
        print(f"kafka cluster: node {killed} killed (leader moved to {moved_to}), {workload.transactions} "
              f"transactions, {stats.events} events, {stats.restarts} capture restarts, {len(last)} rows")  # fmt: skip
    finally:
        cluster.down()
