"""HBase RPC framing, sans-I/O (h11 style): bytes in, messages out, never a socket.

Wire facts (HBase 2.x, all integers big-endian):
- connection preamble: b"HBas" + version 0x00 + auth byte (0x50 = SIMPLE);
- then a 4-byte length and the ConnectionHeader (a plain int, not a varint);
- every call and every response is a frame: 4-byte total length, then a varint-delimited
  header, a varint-delimited message, and an optional raw cell block.

A frame's length is checked against a cap before anything is buffered, so a hostile or
corrupt length prefix cannot make us allocate without bound.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase.pb import rpc_pb2

PREAMBLE_MAGIC = b"HBas"
RPC_VERSION = 0
AUTH_SIMPLE = 0x50
PREAMBLE = PREAMBLE_MAGIC + bytes([RPC_VERSION, AUTH_SIMPLE])
# HBase's own default for hbase.ipc.max.request.size.
DEFAULT_MAX_FRAME_SIZE = 256 * 1024 * 1024

_INT32 = struct.Struct(">i")
M = TypeVar("M", bound=Message)


def encode_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError("varint must be non-negative")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Read a varint at `pos`; return (value, next position)."""
    result = 0
    shift = 0
    for i in range(10):  # a 64-bit varint has at most 10 bytes
        if pos + i >= len(buf):
            raise WireProtocolError("truncated varint")
        byte = buf[pos + i]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos + i + 1
        shift += 7
    raise WireProtocolError("varint longer than 10 bytes")


def delimited(message: Message) -> bytes:
    body = message.SerializeToString()
    return encode_varint(len(body)) + body


def read_delimited(buf: bytes, pos: int) -> tuple[bytes, int]:
    """Return (message bytes, next position) of a varint-delimited message at `pos`."""
    length, start = decode_varint(buf, pos)
    end = start + length
    if end > len(buf):
        raise WireProtocolError(f"delimited message of {length} bytes overruns its frame")
    return buf[start:end], end


def parse_message(cls: type[M], data: bytes) -> M:
    """Parse protobuf bytes into `cls`, turning every decode failure into WireProtocolError."""
    message = cls()
    try:
        message.ParseFromString(data)
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise WireProtocolError(f"cannot decode {cls.__name__}: {exc}") from exc
    if not message.IsInitialized():
        raise WireProtocolError(f"{cls.__name__} lacks required fields")
    return message


def frame(payload: bytes) -> bytes:
    return _INT32.pack(len(payload)) + payload


def connection_preamble(header: rpc_pb2.ConnectionHeader) -> bytes:
    """What a client writes first on a new connection (SIMPLE auth)."""
    return PREAMBLE + frame(header.SerializeToString())


def encode_call(header: rpc_pb2.RequestHeader, param: Message, cell_block: bytes = b"") -> bytes:
    if cell_block:
        header.cell_block_meta.length = len(cell_block)
    return frame(delimited(header) + delimited(param) + cell_block)


def encode_response(header: rpc_pb2.ResponseHeader, result: Message | None, cell_block: bytes = b"") -> bytes:
    """A response frame. With an exception in `header`, pass `result=None`: no body is sent."""
    if cell_block:
        header.cell_block_meta.length = len(cell_block)
    body = delimited(result) if result is not None else b""
    return frame(delimited(header) + body + cell_block)


class FrameReader:
    """Splits a byte stream into int32-length-prefixed frames, refusing oversize lengths."""

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._max = max_frame_size

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    @property
    def announced(self) -> int | None:
        return _INT32.unpack_from(self._buf, 0)[0] if len(self._buf) >= 4 else None

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None if more bytes are needed."""
        if len(self._buf) < 4:
            return None
        (length,) = _INT32.unpack_from(self._buf, 0)
        if length < 0 or length > self._max:
            raise WireProtocolError(f"frame length {length} outside 0..{self._max}")
        if len(self._buf) < 4 + length:
            return None
        with memoryview(self._buf) as view:  # one copy of the payload (a bytearray slice would be a second)
            payload = bytes(view[4 : 4 + length])
        del self._buf[: 4 + length]
        return payload


@dataclass(frozen=True)
class Response:
    """One decoded response frame (client side)."""

    call_id: int
    exception: rpc_pb2.ExceptionResponse | None
    body: bytes
    cell_block: bytes


def parse_response(payload: bytes) -> Response:
    header_bytes, pos = read_delimited(payload, 0)
    header = parse_message(rpc_pb2.ResponseHeader, header_bytes)
    if header.HasField("exception"):
        return Response(header.call_id, header.exception, b"", b"")
    body, pos = read_delimited(payload, pos)
    block_len = header.cell_block_meta.length if header.HasField("cell_block_meta") else 0
    if pos + block_len != len(payload):
        raise WireProtocolError(
            f"response frame has {len(payload) - pos} bytes after the message, cell block says {block_len}"
        )
    return Response(header.call_id, None, body, payload[pos:])


@dataclass(frozen=True)
class Request:
    """One decoded request frame (server side)."""

    header: rpc_pb2.RequestHeader
    param: bytes
    cell_block: bytes


def parse_request(payload: bytes) -> Request:
    header_bytes, pos = read_delimited(payload, 0)
    header = parse_message(rpc_pb2.RequestHeader, header_bytes)
    param = b""
    if header.request_param:
        param, pos = read_delimited(payload, pos)
    block_len = header.cell_block_meta.length if header.HasField("cell_block_meta") else 0
    if pos + block_len != len(payload):
        raise WireProtocolError(
            f"request frame has {len(payload) - pos} bytes after the param, cell block says {block_len}"
        )
    return Request(header, param, payload[pos:])
