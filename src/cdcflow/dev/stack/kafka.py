"""Kafka 4.x in KRaft mode, one node acting as broker and controller, from Maven Central jars."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as kafka_client
from cdcflow.dev.stack import process
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError
from cdcflow.jars import maven, versions

_JVM = ["-XX:+UseG1GC", "-Djava.awt.headless=true", "-Xms256m"]

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = WARN
logger.ak.name = org.apache.kafka
logger.ak.level = WARN
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


SASL_USER, SASL_PASSWORD = "cdcflow", "cdcflow-secret"


class KafkaService(Service):
    name = "kafka"
    port_names = ("broker", "controller", "sasl")
    start_timeout_s = 90.0

    def __init__(self, heap_mb: int = 512) -> None:
        self.heap_mb = heap_mb
        self._lib: Path | None = None

    def install(self) -> None:
        self._lib = maven.resolve_classpath(
            "kafka.xml", {"kafka.version": versions.KAFKA_VERSION, "log4j.version": versions.LOG4J_VERSION}
        )

    def java(self, home: Path, main: str, *args: str) -> list[str]:
        assert self._lib is not None, "install() first"
        return [
            "java", f"-Xmx{self.heap_mb}m", *_JVM,
            f"-Dlog4j2.configurationFile=file:{home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={home / 'logs'}",
            "-cp", maven.classpath(self._lib), main, *args,
        ]  # fmt: skip

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        data = home / "data"
        broker, controller, sasl = ports["broker"], ports["controller"], ports["sasl"]
        props = home / "server.properties"
        # A static voter set (not --standalone) keeps a formatted log dir valid when ports change.
        props.write_text(node_properties(1, broker, controller, f"1@127.0.0.1:{controller}", data, sasl=sasl))
        (home / "log4j2.properties").write_text(LOG4J2)
        self.format(home, props, data, new_cluster_id())
        pid = process.spawn(self.java(home, "kafka.Kafka", str(props)), log, cwd=home)
        return pid, {
            "bootstrap_servers": f"127.0.0.1:{broker}",
            "sasl_bootstrap_servers": f"127.0.0.1:{sasl}",  # SASL_PLAINTEXT, mechanism PLAIN
            "sasl_username": SASL_USER,
            "sasl_password": SASL_PASSWORD,
        }

    def format(self, home: Path, props: Path, data: Path, cluster_id: str) -> None:
        """Format a node's log directory for the cluster (once: a formatted one is kept)."""
        if (data / "meta.properties").exists():
            return
        cmd = self.java(home, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                         "--ignore-formatted")  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=home)
        if proc.returncode != 0:
            raise StackError(f"kafka storage format failed:\n{proc.stdout}{proc.stderr}")

    def check(self, endpoints: dict[str, Any]) -> str:
        brokers = kafka_client.ping(endpoints["bootstrap_servers"], timeout_s=3.0)
        return f"{brokers} broker(s) answer metadata requests"


def node_properties(node_id: int, broker: int, controller: int, voters: str, data: Path, sasl: int | None = None,
                    replicas: int = 1) -> str:  # fmt: skip
    """server.properties of one KRaft node acting as broker and controller. `replicas`: the cluster's size, which
    is also the replication factor of every topic (with min.insync.replicas one less, at least 1)."""
    listeners = f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}"
    advertised = f"PLAINTEXT://127.0.0.1:{broker}"
    protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    sasl_lines: list[str] = []
    if sasl is not None:  # A second listener that wants SASL/PLAIN, to test clients configured for a secured cluster.
        listeners += f",SASL_PLAINTEXT://127.0.0.1:{sasl}"
        advertised += f",SASL_PLAINTEXT://127.0.0.1:{sasl}"
        protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        sasl_lines = [
            "sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{SASL_USER}" password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";',
        ]
    isr = max(1, replicas - 1)
    lines = [
        "process.roles=broker,controller",
        f"node.id={node_id}",
        f"controller.quorum.voters={voters}",
        f"listeners={listeners}",
        f"advertised.listeners={advertised}",
        "inter.broker.listener.name=PLAINTEXT",
        "controller.listener.names=CONTROLLER",
        f"listener.security.protocol.map={protocols}",
        *sasl_lines,
        f"log.dirs={data}",
        "num.partitions=1",
        f"default.replication.factor={replicas}",
        f"min.insync.replicas={isr}",
        f"offsets.topic.replication.factor={replicas}",
        f"transaction.state.log.replication.factor={replicas}",
        f"transaction.state.log.min.isr={isr}",
        f"share.coordinator.state.topic.replication.factor={replicas}",
        f"share.coordinator.state.topic.min.isr={isr}",
        "group.initial.rebalance.delay.ms=0",
        "auto.create.topics.enable=true",
        # Up to the 5 MB+ values HBase can hold in one cell, with envelope overhead.
        "message.max.bytes=16777216",
        "replica.fetch.max.bytes=16777216",
    ]
    return "\n".join(lines) + "\n"


def new_cluster_id() -> str:
    """Kafka wants a base64url UUID (22 characters), what `StorageTool random-uuid` prints.

    Like Kafka's own `Uuid.randomUuid`, never one starting with "-": the format command's argument
    parser would read it as an option (1 run in 64 failed that way).
    """
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
