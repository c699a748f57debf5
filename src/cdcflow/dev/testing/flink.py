"""Flink SQL as a third-party reader of cdcflow's topics, for the tests of the debezium output format.

PyFlink (from PyPI) goes into a virtualenv of its own under the download cache, installed with uv from
flink-requirements.txt (pinned; PyFlink's own pins, py4j and apache-beam among them, clash with the
project's). The Kafka SQL connector and the Confluent-registry Avro format come from Maven Central
(jars/poms/flink-connectors.xml). `FlinkReader` runs flink_reader.py in that virtualenv: Flink's local
mini-cluster reads each topic with its format and writes the table it rebuilds.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdcflow.config.paths import cache_dir
from cdcflow.errors import StackError
from cdcflow.events.debezium.columns import Field
from cdcflow.jars import versions
from cdcflow.jars.maven import resolve_classpath

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "flink-requirements.txt"
READER = HERE / "flink_reader.py"


def _uv() -> str:
    found = os.environ.get("CDCFLOW_UV") or shutil.which("uv")
    if found:
        return found
    bundled = HERE.parents[3] / ".tools" / "bin" / "uv"  # the checkout's own (Makefile)
    if bundled.exists():
        return str(bundled)
    raise StackError("uv is needed to install PyFlink for the Flink reader; run `make install` first")


def flink_python() -> Path:
    """The Python of PyFlink's virtualenv, made on first use (about 700 MB; a second run needs no network)."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:10]  # a changed pin list: a new virtualenv
    venv = cache_dir() / "flink" / f"venv-{versions.FLINK_VERSION}-{digest}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    uv = _uv()
    shutil.rmtree(venv, ignore_errors=True)
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    env.pop("UV_PROJECT_ENVIRONMENT", None)
    for cmd in ([uv, "venv", "-q", "-p", sys.executable, str(venv)],
                [uv, "pip", "install", "-q", "-r", str(REQUIREMENTS)]):  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise StackError(f"installing PyFlink failed ({' '.join(cmd[:3])}): {proc.stderr.strip()[-2000:]}")
    (venv / ".complete").write_text(versions.FLINK_VERSION + "\n")
    return python


def connector_jars() -> list[str]:
    folder = resolve_classpath("flink-connectors.xml", {
        "flink.version": versions.FLINK_VERSION, "flink.kafka.version": versions.FLINK_KAFKA_CONNECTOR,
    })  # fmt: skip
    return sorted(str(p) for p in folder.glob("*.jar"))


@dataclass(frozen=True)
class FlinkTable:
    """One topic as Flink SQL should declare it."""

    topic: str
    columns: list[tuple[str, str]]  # (name, Flink SQL type)
    key: list[str]
    format: str  # debezium-json | debezium-avro-confluent; with upsert-kafka, the values' json | avro-confluent
    options: dict[str, str] = field(default_factory=dict)
    connector: str = "kafka"  # or upsert-kafka (the key: the raw bytes of the one key column)


class FlinkReader:
    """flink_reader.py in PyFlink's virtualenv, reading one request after another in one JVM: a test session
    keeps one, so the JVM's start and warm-up are paid once. Close it when done."""

    def __init__(self) -> None:
        self._scratch = Path(tempfile.mkdtemp(prefix="cdcflow-flink-"))
        self._log = self._scratch / "reader.log"
        self._proc: subprocess.Popen[str] | None = None
        self._requests = 0

    def read_tables(
        self, bootstrap: str, tables: list[FlinkTable], timeout_s: float = 600
    ) -> dict[str, dict[str, Any]]:
        """What Flink SQL rebuilds from each topic: {topic: {"rows": [...], "changelog": {"+I": n, ...}}}, values
        as flink_reader.py prints them (bytes as {"$bytes": base64}, decimals as {"$decimal": text})."""
        proc = self._running()
        self._requests += 1
        out = self._scratch / f"tables-{self._requests}.json"
        spec = {"jars": connector_jars(), "bootstrap": bootstrap, "out": str(out),
                "tables": [{"topic": t.topic, "columns": t.columns, "key": t.key, "format": t.format,
                            "connector": t.connector, "options": t.options} for t in tables]}  # fmt: skip
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + timeout_s
        while not out.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                what = f"ended ({proc.returncode})" if proc.returncode is not None else "timed out"
                tail = self._log_tail()
                self._stop(wait_s=0)  # the next request starts a new reader
                raise AssertionError(f"the Flink reader {what}:\n{tail}")
            time.sleep(0.2)
        answer: dict[str, Any] = json.loads(out.read_text())
        if "error" in answer:
            raise AssertionError(f"the Flink reader failed:\n{answer['error'][-6000:]}\n{self._log_tail()}")
        tables_read: dict[str, dict[str, Any]] = answer["tables"]
        return tables_read

    def _running(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            with open(self._log, "a") as log:  # a file: a pipe no one reads could fill and stop the JVM
                self._proc = subprocess.Popen([str(flink_python()), str(READER)], stdin=subprocess.PIPE,
                                              stdout=log, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        return self._proc

    def _log_tail(self) -> str:
        return self._log.read_text(errors="replace")[-6000:] if self._log.exists() else ""

    def close(self) -> None:
        self._stop()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def _stop(self, wait_s: float = 60) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()  # the reader ends after its last request
            try:
                self._proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


_FLINK_TYPES = {"int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
                "boolean": "BOOLEAN", "string": "STRING", "bytes": "BYTES"}  # fmt: skip


def flink_type(f: Field, precision: int = 0) -> str:
    """The Flink SQL type a Debezium-aware user declares for a column of this Debezium field."""
    if f.kind == "geometry":
        return "ROW<wkb BYTES, srid INT>"
    if f.kind in ("decimal", "decimal_string") and 0 < precision <= 38:  # Flink's DECIMAL stops at 38 digits
        return f"DECIMAL({precision}, {f.scale})"
    return _FLINK_TYPES[f.connect_type]


def _debezium_binary(value: Any) -> Any:
    """flink_reader.py's JSON back to the values Flink had: bytes, decimals, nested rows."""
    if isinstance(value, dict):
        if "$bytes" in value:
            return base64.b64decode(value["$bytes"])
        if "$decimal" in value:
            return Decimal(value["$decimal"])
        return {k: _debezium_binary(v) for k, v in value.items()}
    return value


def cdcflow_row(fields: list[Field], flink_row: dict[str, Any]) -> dict[str, Any]:
    """A row Flink rebuilt, rendered the cdcflow way (docs/mysql.md), to compare with SELECT *."""
    out = {}
    for f in fields:
        value = _debezium_binary(flink_row[f.name])
        if f.kind == "decimal" and isinstance(value, Decimal):  # Flink decoded Avro's decimal itself
            out[f.name] = f"{value:.{f.scale}f}"
        else:
            out[f.name] = f.reader(binary=True)(value)
    return out
