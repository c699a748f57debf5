"""`cdcflow mysql run` answers its readiness and liveness probes on the metrics port: ready once
its binlog stream is open, live while it reads."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import source_config


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, "not listening yet"


def test_the_capture_process_becomes_ready_and_stays_live(mariadb: dict[str, Any], kafka: dict[str, Any],
                                                          tmp_path: Path) -> None:  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = source_config(unique_name("probe"), [unique_name("probedb")])
    mysql = {**cfg.model_dump(mode="json"), "host": mariadb["host"], "port": mariadb["port"],
             "user": mariadb["repl_user"], "password": mariadb["repl_password"]}  # fmt: skip
    config = tmp_path / "cdcflow.yaml"
    config.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": kafka["bootstrap_servers"]}, "mysql": mysql}))
    log = open(tmp_path / "capture.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "cdcflow.cli.main", "mysql", "run", "--metrics-port", str(port),
                             "--config", str(config)], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        answers = []
        deadline = time.monotonic() + 60
        while (answer := get(port, "/readyz"))[0] != 200:
            answers.append(answer)
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "capture.log").read_text()
            time.sleep(0.2)
        assert answer == (200, "ok\n")
        assert all(code in (0, 503) for code, _ in answers)  # never a wrong 200 before the stream opened
        assert all("binlog stream" in text for code, text in answers if code == 503)
        assert get(port, "/livez") == (200, "ok\n")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()


def test_readiness_asks_whether_kafka_answers(kafka: dict[str, Any]) -> None:
    """The check behind "Kafka answers" (the captures' /readyz): a real producer on the real broker, and one whose
    broker is gone (a port nothing listens on); asked at most once per period however often probed."""
    from confluent_kafka import Producer

    from cdcflow.clients.kafka.producer import BrokerCheck

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    up = BrokerCheck(lambda: Producer({"bootstrap.servers": kafka["bootstrap_servers"]}))
    assert up.problem() is None
    calls = []

    def gone() -> Producer:
        calls.append(1)
        return Producer({"bootstrap.servers": f"127.0.0.1:{closed}"})

    down = BrokerCheck(gone, every_s=60, timeout_s=1)
    problem = down.problem()
    assert problem is not None and "Kafka does not answer a metadata request within 1 s" in problem, problem
    assert down.problem() == problem and len(calls) == 1  # the cached answer until the period is over
