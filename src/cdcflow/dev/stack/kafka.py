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

_LOG4J2 = """\
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

    def _java(self, home: Path, main: str, *args: str) -> list[str]:
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
        props.write_text(
            "\n".join(
                [
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{controller}",
                    f"listeners=PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller},"
                    f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{broker},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                    "inter.broker.listener.name=PLAINTEXT",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                    "SASL_PLAINTEXT:SASL_PLAINTEXT",
                    # A second listener that wants SASL/PLAIN, to test clients configured for a secured cluster.
                    "sasl.enabled.mechanisms=PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{SASL_USER}" password="{SASL_PASSWORD}" user_{SASL_USER}="{SASL_PASSWORD}";',
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "offsets.topic.replication.factor=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "share.coordinator.state.topic.replication.factor=1",
                    "share.coordinator.state.topic.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "auto.create.topics.enable=true",
                    # Up to the 5 MB+ values HBase can hold in one cell, with envelope overhead.
                    "message.max.bytes=16777216",
                    "replica.fetch.max.bytes=16777216",
                ]
            )
            + "\n"
        )
        (home / "log4j2.properties").write_text(_LOG4J2)
        if not (data / "meta.properties").exists():
            cmd = self._java(home, "kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(props),
                             "--ignore-formatted")  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=home)
            if proc.returncode != 0:
                raise StackError(f"kafka storage format failed:\n{proc.stdout}{proc.stderr}")
        pid = process.spawn(self._java(home, "kafka.Kafka", str(props)), log, cwd=home)
        return pid, {
            "bootstrap_servers": f"127.0.0.1:{broker}",
            "sasl_bootstrap_servers": f"127.0.0.1:{sasl}",  # SASL_PLAINTEXT, mechanism PLAIN
            "sasl_username": SASL_USER,
            "sasl_password": SASL_PASSWORD,
        }

    def check(self, endpoints: dict[str, Any]) -> str:
        brokers = kafka_client.ping(endpoints["bootstrap_servers"], timeout_s=3.0)
        return f"{brokers} broker(s) answer metadata requests"


def _cluster_id() -> str:
    """Kafka wants a base64url UUID (22 characters), what `StorageTool random-uuid` prints.

    Like Kafka's own `Uuid.randomUuid`, never one starting with "-": the format command's argument
    parser would read it as an option (1 run in 64 failed that way).
    """
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
