"""Nothing is lost when things break: garbage on the socket, SIGKILL of a peer, Kafka down for 15 s,
ZooKeeper session expiry, enabled peer without instances.

After recovery the table rebuilt from Kafka must equal the HBase table; duplicates are allowed
and counted.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import ColumnFamily, Delete, Put
from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.dev.stack import Stack
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.pb import rpc_pb2, wal_pb2

from .hbase_capture import PeerSetup, Rebuilder

FAMILIES = [ColumnFamily("cf", max_versions=100)]


def writes(client: HBaseClient, table: str, rng: random.Random, start: int, count: int) -> None:
    """Row puts in small batches, with some deletes: `count` mutations from sequence `start`."""
    batch = []
    for i in range(start, start + count):
        row = b"row%04d" % rng.randrange(300)
        if i % 9 == 0:
            client.mutate(table, Delete(row).column(b"cf", b"c%d" % (i % 3), 10_000 + i))
            continue
        batch.append(Put(row).add(b"cf", b"c%d" % (i % 3), b"v%d" % i, 10_000 + i))
        if len(batch) == 20:
            client.mutate_batch(table, batch)
            batch = []
    if batch:
        client.mutate_batch(table, batch)


def setup_tables(client: HBaseClient, peer: PeerSetup) -> tuple[str, str]:
    source, target = f"{peer.name}_src", f"{peer.name}_copy"
    client.create_table(source, FAMILIES, split_keys=[b"row0100", b"row0200"])
    client.create_table(target, FAMILIES)
    peer.add_peer(source)
    return source, target


def peer_port(peer: PeerSetup) -> int:
    zk = ZooKeeper(peer.hbase["zk_quorum"])
    try:
        (server,) = zk.children(f"/{peer.name}/rs")
    finally:
        zk.close()
    return int(server.split(",")[1])


def read_until_closed(sock: socket.socket, timeout_s: float = 10) -> bytes:
    sock.settimeout(timeout_s)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_garbage_on_the_rpc_port_closes_only_that_connection(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    source, target = setup_tables(hbase_client, peer_setup)
    peer_setup.start()
    port = peer_port(peer_setup)
    header = rpc_pb2.ConnectionHeader(service_name="AdminService")
    header.user_info.effective_user = "fuzz"
    hello = framing.connection_preamble(header)

    for payload in (
        os.urandom(4096),  # random bytes
        hello + struct.pack(">i", 2**31 - 1),  # a huge length prefix
        hello + struct.pack(">i", 100) + b"\x05\x08",  # a truncated frame, then EOF
        hello + framing.frame(b"\xff" * 40),  # a frame that is not a request
    ):
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            read_until_closed(s)  # the server closes the connection

    with socket.create_connection(("127.0.0.1", port)) as s:  # an unknown method gets an exception answer
        req = rpc_pb2.RequestHeader(call_id=3, method_name="GetRegionInfo", request_param=True)
        s.sendall(hello + framing.encode_call(req, wal_pb2.ReplicateWALEntryRequest()))
        s.settimeout(10)
        reader = framing.FrameReader()
        while (frame := reader.next_frame()) is None:
            reader.feed(s.recv(65536))
        answer = framing.parse_response(frame)
        assert answer.call_id == 3 and answer.exception is not None
        assert answer.exception.exception_class_name == "java.lang.UnsupportedOperationException"

    writes(hbase_client, source, random.Random(1), 0, 200)  # and HBase is still served
    rebuild = Rebuilder(hbase_client, kafka["bootstrap_servers"], f"{peer_setup.name}.default.{source}", target)
    try:
        rebuild.until_equal(source)
    finally:
        rebuild.close()
    assert "closing connection after protocol error" in peer_setup.full_logs()


def test_peer_killed_with_sigkill_then_restarted(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    source, target = setup_tables(hbase_client, peer_setup)
    proc = peer_setup.start()
    rng = random.Random(2)
    writes(hbase_client, source, rng, 0, 600)
    peer_setup.kill(proc)
    writes(hbase_client, source, rng, 600, 300)  # HBase queues these while no peer serves
    peer_setup.start()
    writes(hbase_client, source, rng, 900, 300)
    rebuild = Rebuilder(hbase_client, kafka["bootstrap_servers"], f"{peer_setup.name}.default.{source}", target)
    try:
        rebuild.until_equal(source)
        rebuild.assert_row_order()
        print(f"SIGKILL: {len(rebuild.records)} events, {rebuild.duplicates()} duplicates")
    finally:
        rebuild.close()


def test_two_peers_one_killed(hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]) -> None:
    source, target = setup_tables(hbase_client, peer_setup)
    first = peer_setup.start(0)
    peer_setup.start(1)
    rng = random.Random(3)
    writes(hbase_client, source, rng, 0, 500)
    peer_setup.kill(first)
    writes(hbase_client, source, rng, 500, 500)
    rebuild = Rebuilder(hbase_client, kafka["bootstrap_servers"], f"{peer_setup.name}.default.{source}", target)
    try:
        rebuild.until_equal(source)
        rebuild.assert_row_order()
        print(f"two peers, one killed: {len(rebuild.records)} events, {rebuild.duplicates()} duplicates")
    finally:
        rebuild.close()


def test_kafka_stopped_for_15s(hbase_client: HBaseClient, peer_setup: PeerSetup, tmp_path: Path) -> None:
    """The outage is 2.5x the producer's delivery timeout, so deliveries really fail and HBase hears errors.
    The peer writes to a Kafka of its own, so stopping it disturbs no other test (`make test` runs two at once)."""
    kafka = Stack(tmp_path / "private-kafka")
    kafka.up(["kafka"])
    try:
        bootstrap = kafka.endpoints("kafka")["bootstrap_servers"]
        peer_setup.write_config(kafka={"bootstrap_servers": bootstrap, "delivery_timeout_ms": 6_000})
        source, target = setup_tables(hbase_client, peer_setup)
        peer_setup.start()
        rng = random.Random(4)
        writes(hbase_client, source, rng, 0, 300)
        topic = f"{peer_setup.name}.default.{source}"
        deadline = time.monotonic() + 60  # the topic exists and takes records: the outage hits deliveries
        while not sum(end_offsets(bootstrap, topic).values()):
            assert time.monotonic() < deadline, "nothing replicated before the outage"
            time.sleep(0.5)
        kafka.down(["kafka"])
        try:
            stopped = time.monotonic()
            writes(hbase_client, source, rng, 300, 300)
            time.sleep(max(0.0, 15 - (time.monotonic() - stopped)))
        finally:
            kafka.up(["kafka"])
        assert kafka.endpoints("kafka")["bootstrap_servers"] == bootstrap
        writes(hbase_client, source, rng, 600, 300)
        rebuild = Rebuilder(hbase_client, bootstrap, topic, target)
        try:
            rebuild.until_equal(source, timeout_s=300)
            rebuild.assert_row_order()
            print(f"Kafka down 15 s: {len(rebuild.records)} events, {rebuild.duplicates()} duplicates")
        finally:
            rebuild.close()
    finally:
        peer_setup.stop_all()
        kafka.down(grace_s=3.0)
    assert "could not deliver call" in peer_setup.full_logs(), "the error answer path never ran"


def test_zookeeper_session_expiry_reregisters(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    """SIGSTOP the peer for more than twice its session timeout (hbase.peer.zk_session_timeout_s, 5 s here):
    ZooKeeper expires the session and drops the rs znode. After SIGCONT the peer must register again by
    itself, and every row must still arrive."""
    peer_setup.write_config(peer={**peer_setup.peer_config(), "zk_session_timeout_s": 5})
    source, target = setup_tables(hbase_client, peer_setup)
    proc = peer_setup.start()
    rng = random.Random(5)
    writes(hbase_client, source, rng, 0, 300)
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        writes(hbase_client, source, rng, 300, 300)  # HBase cannot deliver these while the peer is stopped
        zk = ZooKeeper(peer_setup.hbase["zk_quorum"])
        try:
            while zk.children(f"/{peer_setup.name}/rs"):  # the session really expires
                assert time.monotonic() - stopped < 30, "the paused peer's znode never went away"
                time.sleep(0.5)
            time.sleep(max(0.0, 12 - (time.monotonic() - stopped)))
        finally:
            zk.close()
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    resumed = time.monotonic()
    peer_setup.wait_registered(1, timeout_s=15)
    print(f"re-registered {time.monotonic() - resumed:.1f} s after SIGCONT")
    writes(hbase_client, source, rng, 600, 300)
    rebuild = Rebuilder(hbase_client, kafka["bootstrap_servers"], f"{peer_setup.name}.default.{source}", target)
    try:
        rebuild.until_equal(source)
        rebuild.assert_row_order()
    finally:
        rebuild.close()
    assert proc.poll() is None
    assert "re-registered" in peer_setup.full_logs()


def test_status_warns_when_an_enabled_peer_has_no_instance(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    """`make run` stopped leaves the peer ENABLED with nothing serving: HBase keeps every WAL for it."""
    source, _target = setup_tables(hbase_client, peer_setup)
    writes(hbase_client, source, random.Random(11), 0, 50)
    status = [sys.executable, "-m", "cdcflow.cli.main", "hbase", "status", "--config", str(peer_setup.config_path)]

    def run_status() -> subprocess.CompletedProcess[str]:
        return subprocess.run(status, capture_output=True, text=True, timeout=120, check=False)

    idle = run_status()
    assert idle.returncode == 1 and "ENABLED but no cdcflow instance is serving it" in idle.stderr
    deadline = time.monotonic() + 60  # region servers report their sources to the master every few seconds
    while "WAL(s) queued" not in (out := run_status()).stdout:
        assert time.monotonic() < deadline, f"no backlog line in:\n{out.stdout}"
        time.sleep(3)
    peer_setup.start()
    serving = run_status()
    assert serving.returncode == 0 and "instances serving: 1" in serving.stdout and "WARNING" not in serving.stderr
    peer_setup.cli("hbase", "peer", "disable", peer_setup.name, "--config", str(peer_setup.config_path))
    disabled = run_status()
    assert disabled.returncode == 1 and f"peer {peer_setup.name}: DISABLED" in disabled.stdout
