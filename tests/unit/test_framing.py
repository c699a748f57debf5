"""HBase RPC framing: golden byte vectors and fuzzing. Decoders must only ever raise WireProtocolError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.pb import client_pb2, rpc_pb2


def test_preamble_bytes() -> None:
    assert framing.PREAMBLE == b"HBas\x00\x50"
    header = rpc_pb2.ConnectionHeader(service_name="AdminService")
    header.user_info.effective_user = "u"
    out = framing.connection_preamble(header)
    body = header.SerializeToString()
    # The header length is a plain 4-byte int, not a varint.
    assert out == b"HBas\x00\x50" + struct.pack(">i", len(body)) + body


def test_empty_success_response_golden_vector() -> None:
    # ReplicateWALEntry success for call_id 5: header {call_id: 5}, then an empty delimited message.
    out = framing.encode_response(rpc_pb2.ResponseHeader(call_id=5), client_pb2.GetResponse())
    assert out == bytes.fromhex("0000000402080500")
    parsed = framing.parse_response(out[4:])
    assert (parsed.call_id, parsed.exception, parsed.body, parsed.cell_block) == (5, None, b"", b"")


def test_exception_response_has_no_body() -> None:
    header = rpc_pb2.ResponseHeader(call_id=7)
    header.exception.exception_class_name = "java.io.IOException"
    header.exception.stack_trace = "not durable yet"
    out = framing.encode_response(header, None)
    parsed = framing.parse_response(out[4:])
    assert parsed.call_id == 7
    assert parsed.exception is not None
    assert parsed.exception.exception_class_name == "java.io.IOException"


def test_call_roundtrip_with_cell_block() -> None:
    header = rpc_pb2.RequestHeader(call_id=3, method_name="Scan", request_param=True, timeout=1000)
    param = client_pb2.ScanRequest(scanner_id=42, number_of_rows=10)
    out = framing.encode_call(header, param, cell_block=b"\x01\x02\x03")
    reader = framing.FrameReader()
    reader.feed(out[:5])
    assert reader.next_frame() is None  # not whole yet
    reader.feed(out[5:])
    payload = reader.next_frame()
    assert payload is not None
    req = framing.parse_request(payload)
    assert req.header.method_name == "Scan" and req.header.call_id == 3
    assert req.header.cell_block_meta.length == 3
    assert framing.parse_message(client_pb2.ScanRequest, req.param) == param
    assert req.cell_block == b"\x01\x02\x03"
    assert reader.buffered == 0


def test_several_frames_in_one_feed() -> None:
    frames = [framing.frame(bytes([i]) * i) for i in range(1, 5)]
    reader = framing.FrameReader()
    reader.feed(b"".join(frames))
    assert [reader.next_frame() for _ in range(4)] == [bytes([i]) * i for i in range(1, 5)]
    assert reader.next_frame() is None


@pytest.mark.parametrize("length", [-1, 2**31 - 1, 1025])
def test_frame_length_outside_cap_is_refused_before_buffering(length: int) -> None:
    reader = framing.FrameReader(max_frame_size=1024)
    reader.feed(struct.pack(">i", length))
    with pytest.raises(WireProtocolError, match="frame length"):
        reader.next_frame()


def test_cell_block_length_mismatch_is_detected() -> None:
    header = rpc_pb2.ResponseHeader(call_id=1)
    header.cell_block_meta.length = 10
    payload = framing.delimited(header) + framing.delimited(client_pb2.GetResponse()) + b"short"
    with pytest.raises(WireProtocolError, match="cell block"):
        framing.parse_response(payload)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_varint_roundtrip(value: int) -> None:
    encoded = framing.encode_varint(value)
    assert framing.decode_varint(encoded, 0) == (value, len(encoded))


def test_truncated_and_overlong_varints() -> None:
    with pytest.raises(WireProtocolError):
        framing.decode_varint(b"\x80\x80", 0)
    with pytest.raises(WireProtocolError):
        framing.decode_varint(b"\xff" * 11, 0)


@settings(max_examples=500)
@given(st.binary(max_size=512))
def test_parse_response_never_crashes_on_garbage(data: bytes) -> None:
    with contextlib.suppress(WireProtocolError):
        framing.parse_response(data)


@settings(max_examples=500)
@given(st.binary(max_size=512))
def test_parse_request_never_crashes_on_garbage(data: bytes) -> None:
    with contextlib.suppress(WireProtocolError):
        framing.parse_request(data)


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_frame_reader_never_crashes_on_garbage_stream(chunks: list[bytes]) -> None:
    reader = framing.FrameReader(max_frame_size=4096)
    try:
        for chunk in chunks:
            reader.feed(chunk)
            while reader.next_frame() is not None:
                pass
    except WireProtocolError:
        pass
    assert reader.buffered <= 4 + 4096 + 64
