"""HBase 3.0 sources: what a 3.0 replication source asks its peer cluster before it replicates,
asked with the real HBase 2.6.4 Java client against cdcflow peer instances, in the order of hbase-server 3.0.0's
HBaseReplicationEndpoint: connect through the connection registry (ZooKeeper: `<parent>/hbaseid` and
`<parent>/master`; or RPC bootstrap nodes: ClientMetaService), `getClusterMetrics(CLUSTER_ID)` for the peer's id,
`getRegionServers(true)` for its sinks; then ReplicateWALEntry to every sink returned, and the rows are in Kafka.
No 3.0 server runs here (its modules are not on the package mirror): the calls are 3.0's, the client is 2.6.4's.
When the instance that answers as the active master stops, another one takes over."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.kafka import consume
from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import decode
from cdcflow.jars import maven, versions
from cdcflow.protocols.hbase import framing, znode
from cdcflow.protocols.hbase.cellblock import KEY_VALUE_CODEC_WITH_TAGS, encode_cells
from cdcflow.protocols.hbase.pb import rpc_pb2, wal_pb2

from .hbase_capture import PeerSetup

PROGRAM = Path(__file__).parent / "java" / "Hbase3SourceCalls.java"


def source_calls(*args: str) -> tuple[str, set[tuple[str, int, int]]]:
    """Run the 3.0 call sequence with HBase 2.6.4's client: (cluster id, sinks)."""
    jars = maven.resolve_classpath(
        "hbase.xml", {"hbase.version": versions.HBASE_VERSION, "log4j.version": versions.LOG4J_VERSION}
    )
    done = subprocess.run(["java", "-cp", f"{jars}/*", str(PROGRAM), *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    lines = [line.split() for line in done.stdout.splitlines()]
    (cluster_id,) = [words[1] for words in lines if words[0] == "cluster_id"]
    sinks = {(words[1], int(words[2]), int(words[3])) for words in lines if words[0] == "sink"}
    return cluster_id, sinks


def replicate(host: str, port: int, rows: list[bytes]) -> framing.Response:
    """ReplicateWALEntry to one sink, as the source does once it has its sinks (one entry per row)."""
    import socket

    request = wal_pb2.ReplicateWALEntryRequest()
    cells = []
    for seq, row in enumerate(rows, start=1):
        entry = request.entry.add(associated_cell_count=1)
        entry.key.encoded_region_name = b"0123456789abcdef0123456789abcdef"
        entry.key.table_name = b"t3"
        entry.key.log_sequence_number = seq
        entry.key.write_time = int(time.time() * 1000)
        cells.append(Cell(row, b"cf", b"q", 1_700_000_000_000 + seq, CellType.PUT, b"v-" + row))
    header = rpc_pb2.ConnectionHeader(service_name="AdminService", cell_block_codec_class=KEY_VALUE_CODEC_WITH_TAGS)
    header.user_info.effective_user = "hbase"
    call = rpc_pb2.RequestHeader(call_id=1, method_name="ReplicateWALEntry", request_param=True, timeout=30_000)
    with socket.create_connection((host, port), timeout=30) as s:
        s.sendall(framing.connection_preamble(header) + framing.encode_call(call, request, encode_cells(cells)))
        reader = framing.FrameReader()
        while (frame := reader.next_frame()) is None:
            chunk = s.recv(65536)
            assert chunk, "the sink closed the connection without an answer"
            reader.feed(chunk)
    return framing.parse_response(frame)


def test_an_hbase_3_source_finds_the_peer_and_every_instance_and_replicates_to_each(
    hbase: dict[str, Any], kafka: dict[str, Any], peer_setup: PeerSetup
) -> None:
    peer_setup.start(0)
    peer_setup.start(1)
    zk = ZooKeeper(hbase["zk_quorum"])
    try:
        parent = f"/{peer_setup.name}"
        hbaseid = zk.get(f"{parent}/hbaseid")
        assert hbaseid is not None
        expected_id = str(znode.cluster_id(hbaseid))
        registered = {(h, int(p), int(s)) for h, p, s in (n.rsplit(",", 2) for n in zk.children(f"{parent}/rs"))}
        assert len(registered) == 2

        # An old-style cluster key (quorum:port:/parent): the ZooKeeper registry
        cluster_id, sinks = source_calls("zk", hbase["zk_quorum"], parent)
        assert (cluster_id, sinks) == (expected_id, registered)
        # An hbase+rpc:// key, as `cdcflow hbase peer keys` prints it: the registry preamble and ClientMetaService
        # on the bootstrap nodes, every instance one
        printed = peer_setup.cli("hbase", "peer", "keys", "--config", str(peer_setup.config_path))
        keys = dict(line.split(None, 1) for line in printed.splitlines())
        assert keys["zookeeper"] == f"{hbase['zk_quorum']}:{parent}"
        assert keys["rpc"].startswith("hbase+rpc://")
        bootstrap = keys["rpc"].removeprefix("hbase+rpc://")
        assert set(bootstrap.split(",")) == {f"{h}:{p}" for h, p, _ in registered}
        assert source_calls("rpc", bootstrap) == (expected_id, registered)

        # ReplicateWALEntry to each sink the source was given: every row arrives
        rows = []
        for index, (host, port, _) in enumerate(sorted(sinks)):
            mine = [b"row-%d-%d" % (index, n) for n in range(5)]
            answer = replicate(host, port, mine)
            assert answer.exception is None, answer.exception
            rows += mine
        records = consume(kafka["bootstrap_servers"], f"{peer_setup.name}.default.t3", expected=len(rows), timeout_s=60)
        assert sorted(decode(r.value or b"").cells[0].row for r in records) == sorted(rows)  # type: ignore[index]

        # The instance answering as the active master is killed: when its ZooKeeper session ends, the other
        # instance takes over (SIGKILL: no unregistering)
        master = zk.get(f"{parent}/master")
        assert master is not None
        held_by = znode.master_address(master)
        survivor = next(s for s in registered if s != held_by)
        holder = next(i for i in range(2) if f"registered as {held_by[0]}:{held_by[1]}" in
                      (peer_setup.workdir / f"{peer_setup.name}-peer{i}.log").read_text())  # fmt: skip
        peer_setup.kill(peer_setup.procs[holder])
        deadline = time.monotonic() + 60
        while (now := zk.get(f"{parent}/master")) is None or znode.master_address(now) != survivor:
            assert time.monotonic() < deadline, "no instance took over <parent>/master"
            time.sleep(0.5)
        assert source_calls("zk", hbase["zk_quorum"], parent) == (expected_id, {survivor})
    finally:
        zk.close()
