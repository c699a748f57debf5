"""The peer's asyncio server with an in-memory producer double (a port): what it answers, and when.

Real sockets on 127.0.0.1; the replication handler, server and sans-I/O connection are the real ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import cast

import pytest
from google.protobuf.message import Message

from cdcflow.clients.kafka.producer import AsyncProducer, DeliveryFailed, OutRecord
from cdcflow.events.cells import Cell, CellType
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.cellblock import KEY_VALUE_CODEC_WITH_TAGS, encode_cells
from cdcflow.protocols.hbase.cluster_calls import PeerCluster, ServerAddress
from cdcflow.protocols.hbase.pb import master_pb2, registry_pb2, rpc_pb2, wal_pb2
from cdcflow.sources.hbase.peer.handler import ReplicationHandler, TopicLimits
from cdcflow.sources.hbase.peer.server import PeerServer
from cdcflow.sources.hbase.routing import Router

pytestmark = pytest.mark.unit


class HangingProducer:
    """Never acknowledges; a purge fails what it holds (as librdkafka's purge does)."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self._waiting: list[asyncio.Future[None]] = []

    async def send_all(self, records: Sequence[OutRecord]) -> None:
        self.events.append(f"send {len(records)}")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        await asyncio.shield(fut)

    async def purge_unacknowledged(self) -> None:
        self.events.append("purge")
        for fut in self._waiting:
            if not fut.done():
                fut.set_exception(DeliveryFailed("purged"))


class KnownTopics(TopicLimits):
    def _ensure(self, topic: str) -> int:  # no Kafka here: every topic takes 1 MiB
        self._limits[topic] = 1 << 20
        return self._limits[topic]


def replicate_call(call_id: int, timeout_ms: int) -> bytes:
    req = wal_pb2.ReplicateWALEntryRequest()
    e = req.entry.add(associated_cell_count=1)
    e.key.encoded_region_name = b"0123456789abcdef0123456789abcdef"
    e.key.table_name = b"t"
    e.key.log_sequence_number = 7
    e.key.write_time = 1_700_000_000_000
    header = rpc_pb2.RequestHeader(call_id=call_id, method_name="ReplicateWALEntry", request_param=True,
                                   timeout=timeout_ms)  # fmt: skip
    return framing.encode_call(header, req, encode_cells([Cell(b"r", b"cf", b"q", 1, CellType.PUT, b"v")]))


def hello() -> bytes:
    header = rpc_pb2.ConnectionHeader(service_name="AdminService", cell_block_codec_class=KEY_VALUE_CODEC_WITH_TAGS)
    header.user_info.effective_user = "hbase"
    return framing.connection_preamble(header)


async def answer(port: int, data: bytes) -> framing.Response:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    frames = framing.FrameReader()
    while (frame := frames.next_frame()) is None:
        frames.feed(await asyncio.wait_for(reader.read(65536), 10))
    writer.close()
    return framing.parse_response(frame)


def test_a_call_past_its_deadline_purges_its_records_before_the_error_answer() -> None:
    """A timed-out call's records must not stay queued: after the error answer HBase resends the call,
    maybe to another instance, and the old copies would land after newer data."""
    producer = HangingProducer()

    async def scenario() -> tuple[framing.Response, float]:
        handler = ReplicationHandler(cast(AsyncProducer, producer), Router((), "t"), "src",
                                     topics=KnownTopics("unused:9092", 1 << 20))  # fmt: skip
        server = PeerServer(handler, "127.0.0.1", 0, max_inflight_bytes=1 << 20, max_frame_bytes=1 << 20)
        port = await server.start()
        try:
            started = time.monotonic()
            response = await answer(port, hello() + replicate_call(5, timeout_ms=1500))
            return response, time.monotonic() - started
        finally:
            await server.stop(grace_s=1)

    response, elapsed = asyncio.run(scenario())
    assert response.call_id == 5 and response.exception is not None
    assert response.exception.exception_class_name == "java.io.IOException"
    assert "TimeoutError" in response.exception.stack_trace and not response.exception.do_not_retry
    assert producer.events == ["send 1", "purge"], "the call was answered without purging its records"
    assert elapsed < 10


def test_master_side_calls_of_hbase_3_sources_are_answered_on_their_own_services() -> None:
    """MasterService and ClientMetaService connections get the peer cluster (cluster_calls.py); AdminService still
    serves only ReplicateWALEntry."""
    a, b = ServerAddress("10.0.0.1", 16020, 1), ServerAddress("10.0.0.2", 16020, 2)
    peer_cluster = PeerCluster("5b1e4b1e-8a9c-4a8e-9d6e-2f1c3b4a5d6e", a, (a, b))

    async def cluster() -> PeerCluster:
        return peer_cluster

    async def ask(port: int, service: str, method: str, request: Message) -> framing.Response:
        header = rpc_pb2.ConnectionHeader(service_name=service)
        header.user_info.effective_user = "hbase"
        call = rpc_pb2.RequestHeader(call_id=3, method_name=method, request_param=True)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(framing.connection_preamble(header) + framing.encode_call(call, request))
        frames = framing.FrameReader()
        while (frame := frames.next_frame()) is None:
            frames.feed(await asyncio.wait_for(reader.read(65536), 10))
        writer.close()
        return framing.parse_response(frame)

    async def run() -> list[framing.Response]:
        handler = ReplicationHandler(cast(AsyncProducer, HangingProducer()), Router((), "t"), "src",
                                     topics=KnownTopics("unused:9092", 1 << 20))  # fmt: skip
        server = PeerServer(handler, "127.0.0.1", 0, max_inflight_bytes=1 << 20, max_frame_bytes=1 << 20,
                            cluster=cluster)  # fmt: skip
        port = await server.start()
        try:
            names = master_pb2.GetClusterStatusRequest(options=[master_pb2.SERVERS_NAME])
            # field 1 as packed varints that never end: not a GetClusterStatusRequest
            garbage = wal_pb2.WALKey(encoded_region_name=b"\xff\xff\xff", table_name=b"t", log_sequence_number=1,
                                     write_time=1)  # fmt: skip
            return [await ask(port, "MasterService", "GetClusterStatus", names),
                    await ask(port, "ClientMetaService", "GetClusterId", registry_pb2.GetClusterIdRequest()),
                    await ask(port, "AdminService", "GetClusterStatus", names),
                    await ask(port, "MasterService", "GetClusterStatus", garbage)]  # fmt: skip
        finally:
            await server.stop()

    servers, cluster_id, wrong_service, garbage = asyncio.run(run())
    status = master_pb2.GetClusterStatusResponse.FromString(servers.body).cluster_status
    assert servers.exception is None and [s.start_code for s in status.servers_name] == [1, 2]
    assert registry_pb2.GetClusterIdResponse.FromString(cluster_id.body).cluster_id == peer_cluster.cluster_id
    assert wrong_service.exception is not None
    assert wrong_service.exception.exception_class_name == "java.lang.UnsupportedOperationException"
    assert garbage.exception is not None and garbage.exception.do_not_retry  # bytes of another message: refused
