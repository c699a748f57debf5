"""Faults of the three-node Kafka cluster (`cdcflow stack up kafka-cluster`): a node SIGKILLed, kept down, back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.kafka import elect_preferred_leaders, partition_replicas, ping
from cdcflow.errors import ServiceUnavailable
from cdcflow.jars import maven, versions


class KafkaNodes:
    def __init__(self, endpoints: dict[str, Any]) -> None:
        self.bootstrap = str(endpoints["bootstrap_servers"])
        self.nodes: dict[int, dict[str, str]] = {int(i): n for i, n in endpoints["nodes"].items()}

    def pid(self, node: int) -> int:
        return int(Path(self.nodes[node]["pid_file"]).read_text().strip())

    def leader(self, topic: str, partition: int = 0) -> int:
        return partition_replicas(self.bootstrap, topic)[partition][0]

    def replicas(self, topic: str) -> list[int]:
        """How many replicas each partition of `topic` has."""
        return [len(replicas) for _leader, replicas in partition_replicas(self.bootstrap, topic).values()]

    def elect_preferred(self, topic: str, timeout_s: float = 30.0) -> tuple[int, int]:
        """Kafka's preferred-leader election for every partition of `topic` (each led again by its first
        replica); (leader of partition 0 before, after)."""
        before = self.leader(topic)
        elect_preferred_leaders(self.bootstrap, topic)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            leader, replicas = partition_replicas(self.bootstrap, topic)[0]
            if leader == replicas[0]:
                return before, leader
            time.sleep(0.5)
        raise AssertionError(f"{topic}: the preferred replica did not take the lead in {timeout_s:.0f} s")

    def reassign(self, topic: str, partition: int, replicas: list[int], timeout_s: float = 120.0) -> str:
        """Kafka's partition reassignment (its kafka-reassign-partitions tool, from the kafka-tools jar and its
        dependencies, resolved apart from the brokers'): `partition` of `topic` moves to `replicas`; returns the
        tool's last report once the move is complete."""
        tools = maven.resolve_classpath("kafka-tools.xml", {"kafka.version": versions.KAFKA_VERSION,
                                                            "log4j.version": versions.LOG4J_VERSION})  # fmt: skip
        with tempfile.TemporaryDirectory(prefix="cdcflow-reassign-") as tmp:
            plan = Path(tmp) / "plan.json"
            plan.write_text(json.dumps({"version": 1, "partitions": [
                {"topic": topic, "partition": partition, "replicas": replicas}]}))  # fmt: skip

            def run(action: str) -> str:
                main = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
                cmd = ["java", "-Xmx256m", "-cp", maven.classpath(tools), main, "--bootstrap-server", self.bootstrap,
                       "--reassignment-json-file", str(plan), action]  # fmt: skip
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
                if done.returncode != 0:
                    raise AssertionError(f"reassignment {action} failed:\n{done.stdout}{done.stderr}")
                return done.stdout

            run("--execute")
            deadline = time.monotonic() + timeout_s
            while "is completed" not in (report := run("--verify")):
                assert time.monotonic() < deadline, f"{topic}-{partition}: reassignment not complete: {report}"
                time.sleep(1)
            return report

    def kill(self, node: int) -> int:
        """SIGKILL the node and keep it down (until `release`); the pid it had."""
        Path(self.nodes[node]["down_file"]).touch()
        pid = self.pid(node)
        os.kill(pid, signal.SIGKILL)
        return pid

    def release(self, node: int, old_pid: int, timeout_s: float = 90.0) -> None:
        """Let the node start again; return once it runs with a new pid and every node is in the metadata."""
        Path(self.nodes[node]["down_file"]).unlink(missing_ok=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                restarted = self.pid(node) != old_pid
            except (OSError, ValueError):
                restarted = False
            try:
                brokers = ping(self.bootstrap, timeout_s=5.0)
            except ServiceUnavailable:
                brokers = 0
            if restarted and brokers == len(self.nodes):
                return
            time.sleep(0.5)
        raise AssertionError(f"Kafka node {node} did not come back in {timeout_s:.0f} s")
