"""Stack pieces that need no server: ports, state file, process control."""

from __future__ import annotations

import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from cdcflow.stack import ports, process, state_file


def test_choose_reuses_free_previous_port_and_replaces_busy_one() -> None:
    free = ports.free_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        busy_port = busy.getsockname()[1]
        chosen = ports.choose(["a", "b"], {"a": free, "b": busy_port})
    assert chosen["a"] == free
    assert chosen["b"] != busy_port and chosen["b"] != free


def test_state_roundtrip(tmp_path: Path) -> None:
    s = state_file.ServiceState("kafka", 123, 456, {"broker": 1}, {"bootstrap_servers": "x:1"}, "/l", 1.0)
    state_file.save(tmp_path, {"kafka": s})
    assert state_file.load(tmp_path) == {"kafka": s}
    assert state_file.load(tmp_path / "missing") == {}


def test_spawn_identify_and_stop_group(tmp_path: Path) -> None:
    log = tmp_path / "svc.log"
    # A parent that starts a child in the same group: stop_group must take both down.
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    pid = process.spawn([sys.executable, "-c", code], log, cwd=tmp_path)
    ticks = process.start_ticks(pid)
    deadline = time.monotonic() + 10
    while "up" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.is_ours(pid, ticks)
    assert not process.is_ours(pid, (ticks or 0) + 1)  # a reused pid is not ours
    assert process.stop_group(pid, grace_s=5)
    assert not process.is_ours(pid, ticks)
    assert not process._group_alive(pid)
    assert "up" in process.tail(log)


def test_up_with_no_names_means_every_component_in_start_order(tmp_path: Path) -> None:
    from cdcflow.stack import Stack

    assert Stack(tmp_path)._names(None) == ["mariadb", "kafka", "hbase", "phoenix"]
    assert Stack(tmp_path)._names(["phoenix"], with_hosts=True) == ["hbase", "phoenix"]  # phoenix lives in HBase


def test_kafka_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to a leading "-" in base64url: the format command would read the id as an option.
    from cdcflow.stack import kafka

    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" + bytes(15))])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka._cluster_id()
    assert cluster_id == "AQAAAAAAAAAAAAAAAAAAAA"
    assert len(cluster_id) == 22
