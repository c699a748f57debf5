"""Liveness and readiness on the metrics port: /livez (/healthz) and /readyz answer 200 "ok" or
503 with every failing probe's reason, beside /metrics."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from cdcflow.metrics import add_probe, clear_probes, serve_metrics

pytestmark = pytest.mark.unit


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def port() -> Iterator[int]:
    clear_probes()
    yield serve_metrics(0)
    clear_probes()


def test_probes_answer_ok_or_every_failing_reason(port: int) -> None:
    state = {"stream": False}
    add_probe("ready", "binlog stream", lambda: None if state["stream"] else "not open yet")
    add_probe("ready", "other", lambda: None)
    add_probe("live", "loop", lambda: None)
    assert get(port, "/readyz") == (503, "binlog stream: not open yet\n")
    assert get(port, "/livez") == (200, "ok\n") and get(port, "/healthz") == (200, "ok\n")
    state["stream"] = True
    assert get(port, "/readyz") == (200, "ok\n")
    add_probe("live", "broken", lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    status, text = get(port, "/livez")
    assert status == 503 and "broken: probe failed: ZeroDivisionError" in text
    status, text = get(port, "/metrics")
    assert (status == 200 and "python_info" in text) or "process_" in text
    with pytest.raises(ValueError):
        add_probe("sometimes", "x", lambda: None)


def test_the_mysql_capture_is_not_ready_before_its_stream_opens() -> None:
    from cdcflow.clients.mysql import MySqlEndpoint
    from cdcflow.config import KafkaConfig, MySqlSourceConfig
    from cdcflow.sources.mysql.capture import MySqlCapture

    capture = MySqlCapture(MySqlSourceConfig(), KafkaConfig(bootstrap_servers="127.0.0.1:1"),
                           MySqlEndpoint("127.0.0.1", 1, "u", "p"), "127.0.0.1:1",
                           producer_factory=lambda _settings: object())  # type: ignore[arg-type,return-value]  # fmt: skip
    assert capture.ready_problem() is not None and "not open" in str(capture.ready_problem())
    assert capture.live_problem() is None
    capture.stream_open, capture.last_read = True, 1.0  # open, but the last event came long ago
    assert capture.ready_problem() is None and "no binlog event or heartbeat" in str(capture.live_problem())
