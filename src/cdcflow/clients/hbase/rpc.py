"""A blocking HBase RPC connection: one socket, one call at a time, over the sans-I/O framing."""

from __future__ import annotations

import contextlib
import getpass
import socket
from typing import TypeVar

from google.protobuf.message import Message

from cdcflow.errors import HBaseRetryableError, HBaseTerminalError, ServiceUnavailable, WireProtocolError
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.pb import rpc_pb2

M = TypeVar("M", bound=Message)


def remote_error(exc: rpc_pb2.ExceptionResponse) -> HBaseRetryableError | HBaseTerminalError:
    """Translate HBase's ExceptionResponse into our tree, using HBase's own do-not-retry flag."""
    cls = HBaseTerminalError if exc.do_not_retry else HBaseRetryableError
    return cls(exc.exception_class_name, exc.stack_trace)


class RpcConnection:
    def __init__(self, host: str, port: int, service: str, timeout_s: float) -> None:
        self.address = (host, port)
        self.service = service
        self._timeout_s = timeout_s
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise ServiceUnavailable(f"cannot connect to HBase {service} at {host}:{port}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = framing.FrameReader()
        self._next_call_id = 0
        header = rpc_pb2.ConnectionHeader(service_name=service)
        header.user_info.effective_user = getpass.getuser()
        self._send(framing.connection_preamble(header))

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise ServiceUnavailable(f"HBase {self.service} at {self.address}: send failed: {exc}") from exc

    def call(self, method: str, request: Message, response_cls: type[M], timeout_s: float | None = None) -> M:
        return framing.parse_message(response_cls, self.call_raw(method, request, timeout_s))

    def call_raw(self, method: str, request: Message, timeout_s: float | None = None) -> bytes:
        """The answer's message bytes, unparsed (a caller that reads them with compiled code)."""
        timeout_s = timeout_s or self._timeout_s
        call_id = self._next_call_id
        self._next_call_id = (self._next_call_id + 1) % (1 << 31)
        header = rpc_pb2.RequestHeader(
            call_id=call_id, method_name=method, request_param=True, timeout=int(timeout_s * 1000)
        )
        self._send(framing.encode_call(header, request))
        self._sock.settimeout(timeout_s)
        while True:
            try:
                payload = self._reader.next_frame()
            except WireProtocolError:
                self.close()
                raise
            if payload is None:
                try:
                    data = self._sock.recv(1 << 20)
                except OSError as exc:  # includes socket.timeout
                    self.close()
                    raise ServiceUnavailable(f"HBase {self.service} {method}: {exc!r}") from exc
                if not data:
                    self.close()
                    raise ServiceUnavailable(f"HBase {self.service} at {self.address} closed the connection")
                self._reader.feed(data)
                continue
            response = framing.parse_response(payload)
            if response.exception is not None and response.call_id in (call_id, 0xFFFFFFFF):
                raise remote_error(response.exception)
            if response.call_id != call_id:
                continue  # a late answer to an abandoned call
            return response.body

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
