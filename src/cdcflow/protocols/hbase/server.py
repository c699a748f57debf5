"""Server side of an HBase RPC connection, sans-I/O (h11 style).

    conn = ServerConnection()
    for event in conn.receive_data(data):      # bytes from the socket
        ...                                    # ConnectionHeaderReceived / CallReceived
    sock.send(conn.respond(call_id, message))  # bytes to the socket, in any call order

Protocol violations raise WireProtocolError; the caller closes that connection (and only it).
Errors the client should hear about (unsupported codec, unknown service) come back as
`ConnectionRejected` carrying the error frame to send before closing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from google.protobuf.message import Message

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.cellblock import SUPPORTED_CODECS
from cdcflow.protocols.hbase.pb import registry_pb2, rpc_pb2

# call_id -1 (as uint32): an error about the connection itself, not one call.
CONNECTION_CALL_ID = 0xFFFFFFFF


class _State(enum.Enum):
    PREAMBLE = 1
    HEADER = 2
    CALLS = 3
    CLOSED = 4


@dataclass(frozen=True)
class ConnectionHeaderReceived:
    service: str
    user: str
    codec: str


@dataclass(frozen=True)
class CallReceived:
    call_id: int
    method: str
    timeout_ms: int
    param: bytes
    cell_block: bytes
    frame_size: int


@dataclass(frozen=True)
class RegistryPreambleReceived:
    """A client's connection registry asked for the cluster id before anything else (HBase 2.6/3.0's
    `Regist` preamble instead of `HBas`): answer with `registry_response`, then close."""


@dataclass(frozen=True)
class ConnectionRejected:
    reason: str
    response: bytes  # send this, then close


Event = ConnectionHeaderReceived | CallReceived | ConnectionRejected | RegistryPreambleReceived
REGISTRY_PREAMBLE = b"Regist"  # HBase's RpcClient.REGISTRY_PREAMBLE_HEADER


def error_response(call_id: int, exception_class: str, message: str, *, do_not_retry: bool = False) -> bytes:
    header = rpc_pb2.ResponseHeader(call_id=call_id)
    header.exception.exception_class_name = exception_class
    header.exception.stack_trace = message
    header.exception.do_not_retry = do_not_retry
    return framing.encode_response(header, None)


class ServerConnection:
    def __init__(
        self,
        services: Iterable[str] = ("AdminService",),
        max_frame_size: int = framing.DEFAULT_MAX_FRAME_SIZE,
    ):
        self._services = frozenset(services)
        self._state = _State.PREAMBLE
        self._buf = bytearray()
        self._frames = framing.FrameReader(max_frame_size)
        self.header: ConnectionHeaderReceived | None = None

    @property
    def closed(self) -> bool:
        return self._state is _State.CLOSED

    @property
    def buffered(self) -> int:
        """Bytes received and held until their frame is complete."""
        return len(self._buf) + self._frames.buffered

    @property
    def pending_frame_size(self) -> int | None:
        """The announced length of the frame being received, once its length prefix is in."""
        return self._frames.announced

    def receive_data(self, data: bytes) -> list[Event]:
        if self._state is _State.CLOSED:
            return []
        events: list[Event] = []
        if self._state is not _State.CALLS:
            self._buf += data
            if self._state is _State.PREAMBLE:
                if len(self._buf) < 6:
                    return events
                preamble = bytes(self._buf[:6])
                del self._buf[:6]
                if preamble == REGISTRY_PREAMBLE:
                    self._state = _State.CLOSED
                    return [RegistryPreambleReceived()]
                if preamble[:4] != framing.PREAMBLE_MAGIC:
                    self._state = _State.CLOSED
                    raise WireProtocolError(f"not an HBase RPC preamble: {preamble!r}")
                if preamble[4] != framing.RPC_VERSION or preamble[5] != framing.AUTH_SIMPLE:
                    self._state = _State.CLOSED
                    return [
                        ConnectionRejected(
                            f"unsupported RPC version {preamble[4]} / auth {preamble[5]:#x} (only SIMPLE auth)",
                            error_response(
                                CONNECTION_CALL_ID, "org.apache.hadoop.hbase.ipc.BadAuthException",
                                "cdcflow accepts SIMPLE authentication only", do_not_retry=True,
                            ),
                        )
                    ]  # fmt: skip
                self._state = _State.HEADER
            # The connection header is framed like a call (int32 length), so reuse the reader.
            self._frames.feed(bytes(self._buf))
            self._buf.clear()
            payload = self._frames.next_frame()
            if payload is None:
                return events
            rejected = self._accept_header(payload)
            if rejected is not None:
                self._state = _State.CLOSED
                return [rejected]
            assert self.header is not None
            events.append(self.header)
            self._state = _State.CALLS
        else:
            self._frames.feed(data)
        while (payload := self._frames.next_frame()) is not None:
            request = framing.parse_request(payload)
            h = request.header
            events.append(
                CallReceived(h.call_id, h.method_name, h.timeout, request.param, request.cell_block, len(payload))
            )
        return events

    def _accept_header(self, payload: bytes) -> ConnectionRejected | None:
        header = framing.parse_message(rpc_pb2.ConnectionHeader, payload)
        if header.service_name not in self._services:
            return ConnectionRejected(
                f"unknown service {header.service_name!r}",
                error_response(
                    CONNECTION_CALL_ID,
                    "org.apache.hadoop.hbase.ipc.UnknownServiceException",
                    f"cdcflow serves {sorted(self._services)}, not {header.service_name}",
                    do_not_retry=True,
                ),
            )
        codec = header.cell_block_codec_class
        if codec and codec not in SUPPORTED_CODECS:
            return ConnectionRejected(
                f"unsupported cell codec {codec!r}",
                error_response(CONNECTION_CALL_ID, "org.apache.hadoop.hbase.ipc.UnsupportedCellCodecException",
                               f"cdcflow supports {sorted(SUPPORTED_CODECS)}", do_not_retry=True),
            )  # fmt: skip
        if header.cell_block_compressor_class:
            return ConnectionRejected(
                f"unsupported compressor {header.cell_block_compressor_class!r}",
                error_response(CONNECTION_CALL_ID, "org.apache.hadoop.hbase.ipc.UnsupportedCompressionCodecException",
                               "cdcflow does not support cell-block compression", do_not_retry=True),
            )  # fmt: skip
        self.header = ConnectionHeaderReceived(header.service_name, header.user_info.effective_user, codec)
        return None

    @staticmethod
    def respond(call_id: int, message: Message) -> bytes:
        return framing.encode_response(rpc_pb2.ResponseHeader(call_id=call_id), message)

    @staticmethod
    def registry_response(cluster_id: str) -> bytes:
        """The answer to a registry preamble: the cluster id, on the connection's own call id."""
        return framing.encode_response(
            rpc_pb2.ResponseHeader(call_id=CONNECTION_CALL_ID),
            registry_pb2.GetConnectionRegistryResponse(cluster_id=cluster_id),
        )

    @staticmethod
    def respond_error(call_id: int, exception_class: str, message: str, *, do_not_retry: bool = False) -> bytes:
        return error_response(call_id, exception_class, message, do_not_retry=do_not_retry)
