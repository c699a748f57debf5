"""Debezium 3.5's MariaDB connector on Kafka Connect standalone, as the reference for the debezium format.

The classpath comes from Maven Central (jars/poms/debezium-connect.xml). The connector streams one
database from the binlog's current end (`snapshot.mode=no_data`, no locks) with Debezium's defaults for
every value representation, the JsonConverter with schemas, tombstones after deletes and transaction
metadata on, and the source types of DATETIME, TIME, TIMESTAMP and BIGINT UNSIGNED columns propagated: the
settings cdcflow's debezium format mirrors.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint, execute
from cdcflow.dev.stack.ports import free_port
from cdcflow.jars import versions
from cdcflow.jars.maven import resolve_classpath

LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = STDOUT
logger.dbz.name = io.debezium
logger.dbz.level = INFO
"""
USER, PASSWORD = "cdcflow_dbz", "dbz-secret"


def classpath() -> Path:
    return resolve_classpath("debezium-connect.xml", {
        "debezium.version": versions.DEBEZIUM_VERSION, "connect.kafka.version": versions.DEBEZIUM_CONNECT_KAFKA,
        "log4j.version": versions.LOG4J_VERSION,
    })  # fmt: skip


def grant_user(admin: MySqlEndpoint) -> tuple[str, str]:
    """The user Debezium's documentation asks for (REPLICATION CLIENT is BINLOG MONITOR on MariaDB 10.5+)."""
    execute(admin, f"CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'",
            f"GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR, LOCK TABLES ON *.* "
            f"TO '{USER}'@'127.0.0.1'")  # fmt: skip
    return USER, PASSWORD


class DebeziumConnect:
    """One Connect worker running one Debezium connector; `start` returns once the connector streams."""

    def __init__(self, workdir: Path, bootstrap: str, mariadb: dict[str, Any], database: str, prefix: str) -> None:
        self.workdir, self.prefix = workdir, prefix
        workdir.mkdir(parents=True, exist_ok=True)
        user, password = grant_user(MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["user"],
                                                  mariadb["password"]))  # fmt: skip
        worker = {
            "bootstrap.servers": bootstrap, "listeners": f"http://127.0.0.1:{free_port()}",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
            "plugin.discovery": "service_load", "offset.storage.file.filename": str(workdir / "offsets"),
            "offset.flush.interval.ms": "1000",
        }  # fmt: skip
        connector = {
            "name": prefix, "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "tasks.max": "1",
            "database.hostname": mariadb["host"], "database.port": str(mariadb["port"]), "database.user": user,
            "database.password": password, "database.server.id": str(200_000 + free_port()),
            "database.ssl.mode": "disable", "database.include.list": database, "topic.prefix": prefix,
            "topic.creation.default.partitions": "1", "topic.creation.default.replication.factor": "1",
            "snapshot.mode": "no_data", "snapshot.locking.mode": "none",
            "schema.history.internal.kafka.bootstrap.servers": bootstrap,
            "schema.history.internal.kafka.topic": f"{prefix}-schema-history", "include.schema.changes": "false",
            "provide.transaction.metadata": "true",
            # what cdcflow's mysql.output.propagate_source_types (on by default) mirrors
            "datatype.propagate.source.type": r".+\.DATETIME,.+\.TIME,.+\.TIMESTAMP,.+\.BIGINT UNSIGNED",
        }  # fmt: skip
        for name, props in (("worker.properties", worker), ("connector.properties", connector)):
            (workdir / name).write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (workdir / "log4j2.properties").write_text(LOG4J2)
        self.log = workdir / "connect.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 120.0) -> None:
        cmd = ["java", "-Xmx1g", f"-Dlog4j2.configurationFile=file:{self.workdir / 'log4j2.properties'}",
               "-cp", f"{classpath()}/*", "org.apache.kafka.connect.cli.ConnectStandalone",
               str(self.workdir / "worker.properties"), str(self.workdir / "connector.properties")]  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            if "Connected to binlog" in text:  # BinlogStreamingChangeEventSource: the stream is open
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"Kafka Connect exited ({self.proc.returncode}):\n{text[-4000:]}")
            time.sleep(0.5)
        raise AssertionError(f"Debezium did not start streaming in {timeout_s} s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
