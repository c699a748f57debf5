"""The asyncio RPC server HBase region servers replicate to.

Each connection runs the sans-I/O `ServerConnection`; each call runs as its own task, so
several calls per connection proceed at once and answers go out in any order. A byte budget
bounds the memory of calls in flight: when it is spent we stop reading sockets, and TCP
pushes back on HBase. Garbage on a connection closes that connection only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from cdcflow.errors import CdcflowError, WireProtocolError
from cdcflow.protocols.hbase.pb import wal_pb2
from cdcflow.protocols.hbase.server import (
    CallReceived,
    ConnectionHeaderReceived,
    ConnectionRejected,
    ServerConnection,
)
from cdcflow.sources.hbase.peer import metrics
from cdcflow.sources.hbase.peer.handler import ReplicationHandler

log = logging.getLogger(__name__)
REPLICATE = "ReplicateWALEntry"
# A plain IOException is retried by the replication source forever; never answer with
# TableNotFoundException / NoSuchColumnFamilyException, which make HBase drop edits.
RETRY_EXCEPTION = "java.io.IOException"


class ByteBudget:
    """At most `limit` bytes in flight; one call larger than the limit may still run alone."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._cond = asyncio.Condition()

    async def acquire(self, n: int) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.used == 0 or self.used + n <= self.limit)
            self.used += n
            metrics.INFLIGHT_BYTES.set(self.used)

    async def release(self, n: int) -> None:
        async with self._cond:
            self.used -= n
            metrics.INFLIGHT_BYTES.set(self.used)
            self._cond.notify_all()


@dataclass(eq=False)  # identity-hashed: kept in a set
class _Conn:
    peer: str
    writer: asyncio.StreamWriter
    reader_task: asyncio.Task[None] | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class PeerServer:
    def __init__(
        self, sink: ReplicationHandler, host: str, port: int, *, max_inflight_bytes: int, max_frame_bytes: int
    ) -> None:
        self.sink = sink
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.budget = ByteBudget(max_inflight_bytes)
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=1 << 20)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("replication peer listening on %s:%d", self.host, self.port)
        return self.port

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop accepting, let calls in flight finish (up to `grace_s`), then close connections."""
        if self._server is not None:
            self._server.close()
        pending = [t for c in self._conns for t in c.tasks]
        if pending:
            log.info("waiting for %d call(s) in flight", len(pending))
            _done, still = await asyncio.wait(pending, timeout=grace_s)
            for t in still:
                t.cancel()
        readers = [c.reader_task for c in self._conns if c.reader_task is not None]
        for c in list(self._conns):
            c.writer.close()
        for t in readers:
            t.cancel()
        if readers:
            await asyncio.gather(*readers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peername = writer.get_extra_info("peername")
        conn = _Conn(f"{peername[0]}:{peername[1]}" if peername else "?", writer, asyncio.current_task())
        self._conns.add(conn)
        metrics.CONNECTIONS.inc()
        proto = ServerConnection(max_frame_size=self.max_frame_bytes)
        try:
            while not proto.closed:
                data = await reader.read(1 << 20)
                if not data:
                    break
                for event in proto.receive_data(data):
                    if isinstance(event, CallReceived):
                        await self.budget.acquire(event.frame_size)
                        task = asyncio.create_task(self._call(conn, event))
                        conn.tasks.add(task)
                        task.add_done_callback(conn.tasks.discard)
                    elif isinstance(event, ConnectionHeaderReceived):
                        log.debug("%s: %s as %s, codec %s", conn.peer, event.service, event.user, event.codec)
                    elif isinstance(event, ConnectionRejected):
                        log.error("%s: connection rejected: %s", conn.peer, event.reason)
                        metrics.ERRORS.labels("rejected").inc()
                        writer.write(event.response)
                        await writer.drain()
        except WireProtocolError as exc:
            log.error("%s: closing connection after protocol error: %s", conn.peer, exc)
            metrics.ERRORS.labels("protocol").inc()
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.info("%s: connection lost: %s", conn.peer, exc)
        except asyncio.CancelledError:
            pass  # server shutdown
        finally:
            if conn.tasks:  # answer what we accepted before closing, when we still can
                await asyncio.wait(list(conn.tasks), timeout=60)
            self._conns.discard(conn)
            metrics.CONNECTIONS.dec()
            writer.close()

    async def _call(self, conn: _Conn, call: CallReceived) -> None:
        started = time.monotonic()
        try:
            if call.method != REPLICATE:
                response = ServerConnection.respond_error(
                    call.call_id, "java.lang.UnsupportedOperationException",
                    f"cdcflow serves only AdminService.{REPLICATE}, not {call.method}", do_not_retry=True,
                )  # fmt: skip
                metrics.CALLS.labels("unsupported").inc()
            else:
                response = await self._replicate(call)
            conn.writer.write(response)
            await conn.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            log.warning("%s: could not answer call %d: %s (HBase will resend)", conn.peer, call.call_id, exc)
        finally:
            await self.budget.release(call.frame_size)
            metrics.CALL_LATENCY.observe(time.monotonic() - started)

    async def _replicate(self, call: CallReceived) -> bytes:
        try:
            # Answer before HBase's own call timeout, so a slow Kafka turns into a clean retry.
            budget_s = max(1.0, call.timeout_ms / 1000 * 0.9) if call.timeout_ms else None
            stats = await asyncio.wait_for(self.sink.replicate(call.param, call.cell_block), budget_s)
        except Exception as exc:  # every failure becomes a retryable error answer: nothing is dropped
            kind = "decode" if isinstance(exc, WireProtocolError) else type(exc).__name__
            metrics.ERRORS.labels(kind).inc()
            metrics.CALLS.labels("error").inc()
            message = f"cdcflow could not deliver call {call.call_id}: {type(exc).__name__}: {exc}"
            if isinstance(exc, CdcflowError | TimeoutError):
                log.error(message)
            else:  # not one of ours: a bug, so keep the traceback
                log.exception(message)
            return ServerConnection.respond_error(call.call_id, RETRY_EXCEPTION, message)
        metrics.CALLS.labels("ok").inc()
        metrics.ENTRIES.inc(stats.entries)
        metrics.ROWS.inc(stats.rows)
        metrics.CELLS.inc(stats.cells)
        metrics.BYTES.inc(stats.bytes)
        if stats.oldest_write_ms is not None:
            metrics.WAL_TO_ACK.observe(max(0.0, time.time() - stats.oldest_write_ms / 1000))
        return ServerConnection.respond(call.call_id, wal_pb2.ReplicateWALEntryResponse())
