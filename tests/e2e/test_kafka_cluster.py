"""The captures and the pipeline against Kafka shaped like production: three KRaft nodes, every topic replicated
three times with min.insync.replicas=2 (`cdcflow stack up kafka-cluster`), a node SIGKILLed under each and a
leader moved. make soak only (three more Kafka JVMs)."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from cdcflow.clients.hbase import HBaseClient
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

from .hbase_capture import PeerSetup, Rebuilder
from .test_hbase_faults import setup_tables, writes
from .test_mysql_phoenix import PipelineProcess

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not soak_size(0, 1), reason="make soak only (three Kafka JVMs more than make test's stack)"),
]


def test_a_broker_killed_under_the_mysql_capture_loses_nothing_and_keeps_row_order(
    mariadb: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The leader of the busiest table's partition is SIGKILLed mid-workload and kept down 15 s (the two others
    hold the in-sync quorum, so writes go on), then comes back. Afterwards: every cdcflow topic has three
    replicas, the tables rebuilt from Kafka equal SELECT *, and each row's positions never go backwards."""
    cluster = Stack(tmp_path / "kafka-cluster")
    cluster.up(["kafka-cluster"])
    capture: CaptureThread | None = None
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
        # The capture's own producer saw the node go (librdkafka's log, through cdcflow's logger).
        address = nodes.nodes[killed]["broker"]
        client_lines = [r.getMessage() for r in caplog.records if r.name == "cdcflow.clients.kafka.librdkafka"]
        assert any(address in line for line in client_lines), client_lines[-5:]

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
        if capture is not None:
            capture.stop_event.set()  # (a failed test leaves no capture running)
        cluster.down()


def test_a_broker_killed_under_the_running_pipeline_and_a_leader_moved_leave_the_delta_tables_exact(
    mariadb: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """The capture and `cdcflow pipeline run` (a Delta sink) on the three-node cluster while the workload writes:
    the leader of a table's partition is SIGKILLed and kept down 15 s under the pipeline's reads, then back;
    then Kafka's preferred-leader election moves the leadership back to it under the same reads, and a partition
    reassignment that leaves the leader's replica out moves it again (then the three replicas are restored). Afterwards
    `cdcflow verify mysql-delta` finds no difference in any table."""
    cluster = Stack(tmp_path / "kafka-cluster")
    cluster.up(["kafka-cluster"])
    pipeline: PipelineProcess | None = None
    capture: CaptureThread | None = None
    try:
        endpoints = cluster.endpoints("kafka-cluster")
        bootstrap = endpoints["bootstrap_servers"]
        nodes = KafkaNodes(endpoints)
        admin = admin_endpoint(mariadb)
        db = unique_name("kcpipe")
        workload = MySqlWorkload(admin, db, seed=12, account_ids=200)
        workload.create()
        source = source_config(unique_name("kcpsrc"), [db])
        capture = CaptureThread(source, mariadb, bootstrap).start()
        config_path = tmp_path / "cdcflow.yaml"
        config_path.write_text(yaml.safe_dump({
            "kafka": {"bootstrap_servers": bootstrap},
            "hbase": {"zk_quorum": hbase["zk_quorum"]},
            "mysql": {"name": source.name, "host": mariadb["host"], "port": mariadb["port"],
                      "user": mariadb["user"], "password": mariadb["password"],
                      "schema_history_topic": source.schema_history_topic},
            "pipeline": {"topics": source.topic_prefix.replace(".", "\\.") + "\\..*", "trigger_seconds": 1,
                         "checkpoint_dir": str(tmp_path / "checkpoints"), "dead_letter_topic": f"{source.name}-dead",
                         "sinks": [{"name": "delta", "type": "delta", "options": {
                             "path": str(tmp_path / "delta"), "register_in_catalog": False}}]},
        }))  # fmt: skip
        pipeline = PipelineProcess(config_path, tmp_path / "pipeline.log")
        stop = threading.Event()

        def write() -> None:
            while not stop.is_set():
                workload.transaction()
                time.sleep(0.05)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            pipeline.start()
            pipeline.wait_for_batches(3)
            topic = f"{source.topic_prefix}.{db}.accounts"
            killed = nodes.leader(topic)
            old_pid = nodes.kill(killed)
            time.sleep(15)
            during = nodes.leader(topic)
            nodes.release(killed, old_pid)
            pipeline.wait_for_batches(2)
            moved = nodes.elect_preferred(topic)  # the restarted node, first among the replicas, leads again
            pipeline.wait_for_batches(3)
            # A partition reassignment that takes the leader's replica away moves the lead; a second one gives
            # the partition its three replicas back.
            leading = nodes.leader(topic)
            others = [n for n in sorted(nodes.nodes) if n != leading]
            nodes.reassign(topic, 0, others)
            reassigned = nodes.leader(topic)
            pipeline.wait_for_batches(2)
            nodes.reassign(topic, 0, [*others, leading])
            pipeline.wait_for_batches(2)
        finally:
            stop.set()
            writer.join(60)
        workload.close()
        assert during in nodes.nodes and during != killed, (killed, during)
        assert moved == (during, killed), moved
        assert reassigned in others and nodes.replicas(topic)[0] == 3, (leading, reassigned, nodes.replicas(topic))
        # The pipeline's Kafka client (Spark's) saw the node go: it names the node's address in its log.
        port = nodes.nodes[killed]["broker"].rsplit(":", 1)[1]
        assert f":{port}" in pipeline.log.read_text(), "the pipeline never noticed the node was gone"
        capture.wait_for_checkpoint(server_position(admin), timeout_s=180)
        capture.stop()
        pipeline.kill()
        pipeline.start("--available-now")  # what is left after the capture's last checkpoint
        assert pipeline.wait(600) == 0, pipeline.log.read_text()[-4000:]
        tables = [f"{db}.{t}" for t in WORKLOAD_TABLES]
        result = subprocess.run(
            [sys.executable, "-m", "cdcflow.cli.main", "verify", "mysql-delta", *tables, "--config", str(config_path)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        found = dict(re.findall(rf"^mysql-delta ({db}\.\w+): no differences: (\d+) rows compared", result.stdout,
                                re.M))  # fmt: skip
        assert set(found) == set(tables) and int(found[f"{db}.accounts"]) > 50, result.stdout
        print(f"kafka cluster under the pipeline: node {killed} killed (leader {during} meanwhile), then leader "
              f"moved {moved[0]} -> {moved[1]} by election and {leading} -> {reassigned} by reassignment; "
              f"{workload.transactions} transactions; rows {found}")  # fmt: skip
    finally:
        if pipeline is not None and pipeline.proc is not None and pipeline.proc.poll() is None:
            pipeline.kill()  # (a failed test leaves no pipeline or capture running)
        if capture is not None:
            capture.stop_event.set()
        cluster.down()


def test_a_broker_killed_under_the_hbase_capture_loses_nothing_and_keeps_row_order(
    hbase_client: HBaseClient, peer_setup: PeerSetup, tmp_path: Path
) -> None:
    """The peer publishes HBase's edits to the three-node cluster; the leader of the table topic's partition is
    SIGKILLed mid-stream and kept down 15 s, then back. The table rebuilt from Kafka equals HBase, with every
    row's changes in order."""
    cluster = Stack(tmp_path / "kafka-cluster")
    cluster.up(["kafka-cluster"])
    try:
        endpoints = cluster.endpoints("kafka-cluster")
        bootstrap = endpoints["bootstrap_servers"]
        nodes = KafkaNodes(endpoints)
        peer_setup.write_config(kafka={"bootstrap_servers": bootstrap})
        source, target = setup_tables(hbase_client, peer_setup)
        peer_setup.start()
        rng = random.Random(7)
        writes(hbase_client, source, rng, 0, 300)
        topic = f"{peer_setup.name}.default.{source}"
        deadline = time.monotonic() + 60  # the topic exists and takes records: the kill hits deliveries
        while not sum(end_offsets(bootstrap, topic).values()):
            assert time.monotonic() < deadline, "nothing replicated before the kill"
            time.sleep(0.5)
        killed = nodes.leader(topic)
        old_pid = nodes.kill(killed)
        writes(hbase_client, source, rng, 300, 300)
        time.sleep(15)
        during = nodes.leader(topic)
        nodes.release(killed, old_pid)
        writes(hbase_client, source, rng, 600, 300)
        assert during in nodes.nodes and during != killed, (killed, during)
        assert nodes.replicas(topic) == [3] * len(nodes.replicas(topic))
        # The peer's producer saw the node go (librdkafka's log in the peer's log).
        assert nodes.nodes[killed]["broker"] in peer_setup.full_logs(), "the peer never noticed the node was gone"
        rebuild = Rebuilder(hbase_client, bootstrap, topic, target)
        try:
            rebuild.until_equal(source, timeout_s=300)
            rebuild.assert_row_order()
            print(f"kafka cluster under the hbase peer: node {killed} killed (leader {during} meanwhile), "
                  f"{len(rebuild.records)} events, {rebuild.duplicates()} duplicates")  # fmt: skip
        finally:
            rebuild.close()
    finally:
        peer_setup.stop_all()
        cluster.down()
