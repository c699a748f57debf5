"""The sans-I/O server side: preamble, connection header, calls, rejections."""

from __future__ import annotations

import pytest

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.cellblock import KEY_VALUE_CODEC_WITH_TAGS
from cdcflow.protocols.hbase.pb import registry_pb2, rpc_pb2, wal_pb2
from cdcflow.protocols.hbase.server import (
    CallReceived,
    ConnectionHeaderReceived,
    ConnectionRejected,
    RegistryPreambleReceived,
    ServerConnection,
)


def hello(service: str = "AdminService", codec: str = KEY_VALUE_CODEC_WITH_TAGS, compressor: str = "") -> bytes:
    header = rpc_pb2.ConnectionHeader(service_name=service, cell_block_codec_class=codec)
    if compressor:
        header.cell_block_compressor_class = compressor
    header.user_info.effective_user = "hbase"
    return framing.connection_preamble(header)


def call(call_id: int, method: str = "ReplicateWALEntry", block: bytes = b"") -> bytes:
    header = rpc_pb2.RequestHeader(call_id=call_id, method_name=method, request_param=True, timeout=60000)
    return framing.encode_call(header, wal_pb2.ReplicateWALEntryRequest(), block)


def test_byte_at_a_time_then_pipelined_calls() -> None:
    conn = ServerConnection()
    events = []
    for b in hello() + call(1) + call(2, block=b"\x00" * 3):
        events += conn.receive_data(bytes([b]))
    assert isinstance(events[0], ConnectionHeaderReceived) and events[0].user == "hbase"
    calls = [e for e in events if isinstance(e, CallReceived)]
    assert [(c.call_id, c.method, c.timeout_ms, c.cell_block) for c in calls] == [
        (1, "ReplicateWALEntry", 60000, b""),
        (2, "ReplicateWALEntry", 60000, b"\x00\x00\x00"),
    ]


def test_not_hbase_is_a_protocol_error() -> None:
    with pytest.raises(WireProtocolError, match="preamble"):
        ServerConnection().receive_data(b"GET / HTTP/1.1\r\n")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (hello(service="ClientService"), "unknown service"),
        (hello(codec="org.example.Codec"), "unsupported cell codec"),
        (hello(compressor="org.apache.hadoop.io.compress.GzipCodec"), "unsupported compressor"),
        (b"HBas\x00\x51" + b"\x00" * 8, "only SIMPLE auth"),
    ],
)
def test_rejections_carry_an_error_frame(data: bytes, reason: str) -> None:
    conn = ServerConnection()
    (event,) = conn.receive_data(data)
    assert isinstance(event, ConnectionRejected) and reason in event.reason
    parsed = framing.parse_response(event.response[4:])
    assert parsed.call_id == 0xFFFFFFFF and parsed.exception is not None and parsed.exception.do_not_retry
    assert conn.closed and conn.receive_data(call(1)) == []


def test_oversize_frame_after_header() -> None:
    conn = ServerConnection(max_frame_size=1024)
    conn.receive_data(hello())
    with pytest.raises(WireProtocolError, match="frame length"):
        conn.receive_data(b"\x7f\xff\xff\xff")


def test_responses() -> None:
    ok = ServerConnection.respond(9, wal_pb2.ReplicateWALEntryResponse())
    assert ok == bytes.fromhex("0000000402080900")
    err = framing.parse_response(ServerConnection.respond_error(9, "java.io.IOException", "later")[4:])
    assert err.exception is not None and err.exception.exception_class_name == "java.io.IOException"
    assert not err.exception.do_not_retry


def test_a_registry_preamble_asks_for_the_cluster_id_and_ends_the_connection() -> None:
    """HBase 2.6/3.0 connection registries open with b"Regist" instead of b"HBas": the cluster id comes back on
    the connection's call id, then the connection closes (anything after the preamble is ignored)."""
    conn = ServerConnection(("AdminService", "MasterService"))
    events = []
    for b in b"Regist" + b"anything after":
        events += conn.receive_data(bytes([b]))
    assert events == [RegistryPreambleReceived()] and conn.closed
    answer = framing.FrameReader()
    answer.feed(ServerConnection.registry_response("5b1e4b1e-8a9c-4a8e-9d6e-2f1c3b4a5d6e"))
    response = framing.parse_response(answer.next_frame() or b"")
    assert response.call_id == 0xFFFFFFFF and response.exception is None
    got = registry_pb2.GetConnectionRegistryResponse.FromString(response.body)
    assert got.cluster_id == "5b1e4b1e-8a9c-4a8e-9d6e-2f1c3b4a5d6e"
