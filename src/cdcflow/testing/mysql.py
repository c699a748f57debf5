"""Helpers for tests and benchmarks of the MySQL source: endpoints, a capture in a thread, reading topics."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.kafka import TopicReader
from cdcflow.mysql.capture import CaptureStats, MySqlCapture
from cdcflow.mysql.sql import MySqlEndpoint


def admin_endpoint(mariadb: dict[str, Any], database: str | None = None) -> MySqlEndpoint:
    return MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["user"], mariadb["password"], database=database)


def repl_endpoint(mariadb: dict[str, Any]) -> MySqlEndpoint:
    return MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["repl_user"], mariadb["repl_password"])


def source_config(name: str, databases: list[str], **overrides: Any) -> MySqlSourceConfig:
    """A source of its own (offsets, history and topics named after it), so tests never share state."""
    values: dict[str, Any] = {
        "name": name,
        "server_id": 100_000 + uuid.uuid4().int % 1_000_000,
        "topic_prefix": f"cdcflow.{name}",
        "include": tuple(f"{db}.*" for db in databases),
        "offsets_topic": f"{name}-offsets",
        "schema_history_topic": f"{name}-schema-history",
        "dead_letter_topic": f"{name}-dead-letter",
        "checkpoint_interval_ms": 200,
        **overrides,
    }
    return MySqlSourceConfig.model_validate(values)


class CaptureThread:
    """`cdcflow mysql run` in a thread of the test process."""

    def __init__(self, cfg: MySqlSourceConfig, mariadb: dict[str, Any], bootstrap: str) -> None:
        self.capture = MySqlCapture(cfg, KafkaConfig(bootstrap_servers=bootstrap), repl_endpoint(mariadb), bootstrap)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"capture-{cfg.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.capture.run(self.stop_event)
        except BaseException as exc:
            self.error = exc

    def start(self, wait_s: float = 60.0) -> CaptureThread:
        """Start, and return once the binlog stream is open (so what the test writes next is captured)."""
        self._thread.start()
        while not self.capture.streaming.wait(0.1):
            if self.error is not None:
                raise self.error
            wait_s -= 0.1
            if wait_s <= 0:
                raise AssertionError("capture did not open its binlog stream")
        return self

    def stop(self, timeout_s: float = 60.0) -> CaptureStats:
        self.stop_event.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError("capture did not stop")
        if self.error is not None:
            raise self.error
        return self.capture.stats


def read_all(bootstrap: str, topics: list[str], expected: int, timeout_s: float = 60.0) -> list[bytes]:
    """Values of every record of `topics` from the beginning, waiting until `expected` arrived."""
    import time

    reader = TopicReader(bootstrap, topics)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            values.extend(r.value for r in reader.poll(1.0) if r.value is not None)
    finally:
        reader.close()
    return values
