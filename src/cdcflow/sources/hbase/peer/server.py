"""The asyncio RPC server HBase region servers replicate to.

Each connection runs the sans-I/O `ServerConnection`; each call runs as its own task, so several
calls per connection proceed at once and answers go out in any order.

Memory is bounded by one budget (`MemoryBudget`): bytes count from the moment they arrive (a frame
half received holds what it has, not what its length prefix announces), then as the decoded events
of the call until Kafka acknowledged them. Past the budget every socket stops being read and TCP
pushes back on HBase. Nothing waits forever on memory held by a stalled sender: connections idle
longer than `idle_timeout_s` are closed, and when the budget is full with no call left to finish,
the connection whose partial frame has not moved for longest is dropped (HBase resends).

Hostile or broken clients cost at most one connection each, within `max_connections`; every
refusal is logged (rate-limited) and counted.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cdcflow.errors import CdcflowError, WireProtocolError
from cdcflow.logs import RateLimited
from cdcflow.protocols.hbase import cluster_calls
from cdcflow.protocols.hbase.cluster_calls import PeerCluster
from cdcflow.protocols.hbase.pb import wal_pb2
from cdcflow.protocols.hbase.server import (
    CONNECTION_CALL_ID,
    CallReceived,
    ConnectionHeaderReceived,
    ConnectionRejected,
    RegistryPreambleReceived,
    ServerConnection,
    error_response,
)
from cdcflow.sources.hbase.peer import metrics
from cdcflow.sources.hbase.peer.handler import CallStats, ReplicationHandler

log = logging.getLogger(__name__)
REPLICATE = "ReplicateWALEntry"
ADMIN_SERVICE = "AdminService"
# AdminService for ReplicateWALEntry; the others answer what an HBase 3.0 source asks first (cluster_calls.py).
SERVED_SERVICES = (ADMIN_SERVICE, *cluster_calls.SERVICES)
DO_NOT_RETRY = "org.apache.hadoop.hbase.DoNotRetryIOException"
# A plain IOException is retried by the replication source forever; never answer with
# TableNotFoundException / NoSuchColumnFamilyException, which make HBase drop edits.
RETRY_EXCEPTION = "java.io.IOException"
ACCESS_DENIED = "org.apache.hadoop.hbase.security.AccessDeniedException"
_SWEEP_S = 0.5
ACCEPT_BACKLOG = 128


class MemoryBudget:
    """Bytes held by connections and calls. Charging never blocks (the bytes are already here); reaching
    the limit pauses reading, going back under `resume_at` (3/4 of it) resumes it. The gap keeps a
    thousand connections from being paused and resumed on every small release."""

    def __init__(self, limit: int, on_change: Callable[[bool], None] = lambda over: None) -> None:
        self.limit = limit
        self.resume_at = limit * 3 // 4
        self.used = 0
        self.peak = 0
        self._on_change = on_change
        self._over = False

    @property
    def over(self) -> bool:
        return self._over

    def charge(self, n: int) -> None:
        self.used += n
        self.peak = max(self.peak, self.used)
        self._update()

    def release(self, n: int) -> None:
        self.used -= n
        self._update()

    def _update(self) -> None:
        metrics.INFLIGHT_BYTES.set(self.used)
        over = self.used >= self.limit if not self._over else self.used > self.resume_at
        if over != self._over:
            self._over = over
            self._on_change(over)


@dataclass(frozen=True)
class Admission:
    """Who may connect and replicate, and how many connections are kept."""

    allowed_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    allowed_clusters: frozenset[uuid.UUID] = frozenset()
    max_connections: int = 1000
    idle_timeout_s: float = 300.0
    handshake_timeout_s: float = 10.0

    @classmethod
    def of(cls, networks: tuple[str, ...], clusters: tuple[str, ...], **limits: float) -> Admission:
        return cls(
            tuple(ipaddress.ip_network(n, strict=False) for n in networks),
            frozenset(uuid.UUID(c) for c in clusters),
            **limits,  # type: ignore[arg-type]
        )

    def network_allowed(self, address: str) -> bool:
        if not self.allowed_networks:
            return True
        try:
            ip = ipaddress.ip_address(address.split("%")[0])
        except ValueError:
            return False
        return any(ip in net for net in self.allowed_networks)


class _Connection(asyncio.Protocol):
    def __init__(self, server: PeerServer) -> None:
        self.server = server
        self.proto = ServerConnection(SERVED_SERVICES, max_frame_size=server.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.opened = self.last_rx = time.monotonic()
        self.charged = 0  # bytes of partial frames held for this connection
        self.tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        self.paused = False

    # -- asyncio callbacks ----------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peername = transport.get_extra_info("peername")
        self.peer = f"{peername[0]}:{peername[1]}" if peername else "?"
        self.server.admit(self, peername[0] if peername else "")

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        self.last_rx = time.monotonic()
        self.server.budget.charge(len(data))
        self.charged += len(data)
        try:
            events = self.proto.receive_data(data)
        except WireProtocolError as exc:
            self.server.refusals.log(logging.ERROR, "protocol", "%s: closing connection after protocol error: %s",
                                     self.peer, exc)  # fmt: skip
            metrics.ERRORS.labels("protocol").inc()
            self.close()
            return
        taken = 0
        for event in events:
            if isinstance(event, CallReceived):
                taken += event.frame_size  # these bytes stay charged, to the call now, until it is answered
                self._start_call(event)
            elif isinstance(event, ConnectionHeaderReceived):
                log.debug("%s: %s as %s, codec %s", self.peer, event.service, event.user, event.codec)
            elif isinstance(event, RegistryPreambleReceived):
                asyncio.get_running_loop().create_task(self.server.registry_preamble(self))
            elif isinstance(event, ConnectionRejected):
                self.server.refusals.log(logging.ERROR, "rejected", "%s: connection rejected: %s", self.peer,
                                         event.reason)  # fmt: skip
                metrics.ERRORS.labels("rejected").inc()
                self.write(event.response)
                self.close()
        # What is still buffered stays charged to the connection; framing bytes already parsed are free.
        keep = self.proto.buffered
        self.server.budget.release(self.charged - taken - keep)
        self.charged = keep

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        if self.charged:
            self.server.budget.release(self.charged)
            self.charged = 0
        self.server.forget(self)

    # -- helpers --------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        return bool(self.tasks)

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    def pause(self) -> None:
        if not self.paused and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
            self.paused = True

    def resume(self) -> None:
        if self.paused and self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()
            # Time spent paused by us is not the client's idleness: its clocks start again.
            self.last_rx = time.monotonic()
            if self.proto.header is None:
                self.opened = self.last_rx
        self.paused = False

    def _start_call(self, call: CallReceived) -> None:
        task = asyncio.get_running_loop().create_task(self.server.call(self, call))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


class PeerServer:
    def __init__(
        self,
        sink: ReplicationHandler,
        host: str,
        port: int,
        *,
        max_inflight_bytes: int,
        max_frame_bytes: int,
        admission: Admission = Admission(),
        ssl_context: ssl.SSLContext | None = None,
        cluster: Callable[[], Awaitable[PeerCluster]] | None = None,
    ) -> None:
        self.sink = sink
        self.cluster = cluster  # the peer cluster as master-side calls describe it (None: not served)
        self.host = host
        self.port = port
        self.max_frame_bytes = min(max_frame_bytes, max_inflight_bytes)
        self.admission = admission
        self.ssl_context = ssl_context
        self.budget = MemoryBudget(max_inflight_bytes, self._on_budget)
        self.refusals = RateLimited(log)
        self.conns: set[_Connection] = set()
        self.shed = 0  # connections dropped to free memory or room
        self.acked_wal_s = 0.0  # newest acknowledged call's oldest WAL write time (metrics)
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        # One call decodes at a time (off the event loop, without the GIL): a second would not be faster on
        # a core or two, and each decode holds its call's JSON twice until it becomes Python bytes.
        self._decoding = asyncio.Semaphore(1)
        self._full_since: float | None = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, backlog=ACCEPT_BACKLOG, ssl=self.ssl_context,
            ssl_handshake_timeout=self.admission.handshake_timeout_s if self.ssl_context else None,
        )  # fmt: skip
        self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = loop.create_task(self._sweep())
        log.info("replication peer listening on %s:%d%s", self.host, self.port, " (TLS)" if self.ssl_context else "")
        return self.port

    async def stop(self, grace_s: float = 30.0) -> None:
        """Stop accepting, let calls in flight finish (up to `grace_s`), then close connections."""
        if self._server is not None:
            self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
        pending = [t for c in self.conns for t in c.tasks]
        if pending:
            log.info("waiting for %d call(s) in flight", len(pending))
            _done, still = await asyncio.wait(pending, timeout=grace_s)
            for t in still:
                t.cancel()
        for c in list(self.conns):
            c.close()
        await asyncio.sleep(0)  # let connection_lost run
        if self._server is not None:
            await self._server.wait_closed()

    # -- admission --------------------------------------------------------------------------------------
    def admit(self, conn: _Connection, address: str) -> None:
        if not self.admission.network_allowed(address):
            self.refusals.log(logging.WARNING, "network", "%s: refused, address not in hbase.peer.allowed_networks",
                              conn.peer)  # fmt: skip
            metrics.ERRORS.labels("refused_network").inc()
            why = f"{address} is not allowed to replicate to this cdcflow peer"
            conn.write(error_response(CONNECTION_CALL_ID, ACCESS_DENIED, why, do_not_retry=True))
            conn.close()
            return
        if len(self.conns) >= self.admission.max_connections and not self._evict_idle():
            self.refusals.log(logging.WARNING, "full", "%s: refused, %d connections open (hbase.peer.max_connections) "
                              "and none idle", conn.peer, len(self.conns))  # fmt: skip
            metrics.ERRORS.labels("refused_full").inc()
            conn.close()
            return
        self.conns.add(conn)
        metrics.CONNECTIONS.set(len(self.conns))
        if self.budget.over:
            conn.pause()

    def forget(self, conn: _Connection) -> None:
        if conn in self.conns:
            self.conns.discard(conn)
            metrics.CONNECTIONS.set(len(self.conns))

    def _evict_idle(self) -> bool:
        """Make room: close the connection idle for longest (no call in flight)."""
        idle = [c for c in self.conns if not c.busy and not c.closing]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c.last_rx)
        self._drop(victim, "connection limit reached, closing the longest-idle connection")
        return True

    def _drop(self, conn: _Connection, why: str) -> None:
        self.shed += 1
        metrics.ERRORS.labels("shed").inc()
        self.refusals.log(logging.WARNING, f"shed:{why}", "%s: %s", conn.peer, why)
        conn.close()
        if conn.charged:  # its partial frame is gone now, not when asyncio reports the close
            held, conn.charged = conn.charged, 0
            self.budget.release(held)
        self.forget(conn)

    def _on_budget(self, over: bool) -> None:
        for c in self.conns:
            if over:
                c.pause()
            else:
                c.resume()
        self._full_since = time.monotonic() if over else None

    async def _sweep(self) -> None:
        """Close idle and half-open connections; break a budget held only by stalled partial frames."""
        while True:
            await asyncio.sleep(_SWEEP_S)
            now = time.monotonic()
            a = self.admission
            for c in list(self.conns):
                if c.busy or c.closing or c.paused:
                    continue
                if c.proto.header is None and now - c.opened > a.handshake_timeout_s:
                    self._drop(c, f"no connection header within {a.handshake_timeout_s:.0f} s")
                elif now - c.last_rx > a.idle_timeout_s:
                    self._drop(c, f"idle for {a.idle_timeout_s:.0f} s")
            full_since = self._full_since
            if full_since is not None and now - full_since > 1.0:
                self._shed_partial_frames(full_since, calls_running=any(c.busy for c in self.conns))

    def _shed_partial_frames(self, full_since: float, calls_running: bool) -> None:
        """The budget has been full for a while. Partial frames whose sender had stalled before we stopped
        reading will not finish: drop those, stalest first, until back under. With no call running, nothing
        frees memory by itself, so any partial frame may go."""
        holders = sorted((c for c in self.conns if c.charged and not c.closing), key=lambda c: c.last_rx)
        for c in holders:
            if not self.budget.over or (calls_running and c.last_rx > full_since - 1.0):
                break
            self._drop(c, "memory budget full of partial frames, dropping the one stalled longest")

    # -- calls --------------------------------------------------------------------------------------------
    async def call(self, conn: _Connection, call: CallReceived) -> None:
        started = time.monotonic()
        try:
            service = conn.proto.header.service if conn.proto.header else ADMIN_SERVICE
            if service == ADMIN_SERVICE and call.method == REPLICATE:
                response = await self._replicate(conn, call)
            elif self.cluster is not None and cluster_calls.serves(service, call.method):
                response = await self._cluster_call(conn, service, call)
            else:
                response = ServerConnection.respond_error(
                    call.call_id, "java.lang.UnsupportedOperationException",
                    f"cdcflow serves {ADMIN_SERVICE}.{REPLICATE} and what an HBase 3.0 replication source asks "
                    f"first, not {service}.{call.method}", do_not_retry=True,
                )  # fmt: skip
                metrics.CALLS.labels("unsupported").inc()
            conn.write(response)
        finally:
            self.budget.release(call.frame_size)
            metrics.CALL_LATENCY.observe(time.monotonic() - started)

    async def registry_preamble(self, conn: _Connection) -> None:
        """A connection registry's `Regist` preamble: the cluster id, then close. Without a cluster view, the
        answer HBase gives when it has none, which makes the client ask ClientMetaService instead."""
        try:
            if self.cluster is None:
                raise LookupError("no cluster view")
            conn.write(ServerConnection.registry_response((await self.cluster()).cluster_id))
            metrics.CLUSTER_CALLS.labels("ConnectionRegistry").inc()
        except Exception as exc:
            log.debug("%s: registry preamble not answered (%r)", conn.peer, exc)
            conn.write(error_response(CONNECTION_CALL_ID, "org.apache.hadoop.hbase.ipc.FatalConnectionException",
                                      "Expected HEADER=HBas but received HEADER=Regist"))  # fmt: skip
        finally:
            conn.close()

    async def _cluster_call(self, conn: _Connection, service: str, call: CallReceived) -> bytes:
        """A master-side call of an HBase 3.0 source (cluster_calls.py): the peer cluster read from ZooKeeper."""
        assert self.cluster is not None
        try:
            message = cluster_calls.answer(service, call.method, call.param, await self.cluster())
        except WireProtocolError as exc:
            metrics.ERRORS.labels("decode").inc()
            self.refusals.log(logging.WARNING, "cluster-call", "%s: %s.%s: %s", conn.peer, service, call.method, exc)
            return ServerConnection.respond_error(call.call_id, DO_NOT_RETRY, str(exc), do_not_retry=True)
        except Exception as exc:  # ZooKeeper unreachable: the source asks again
            self.refusals.log(logging.WARNING, "cluster-call", "%s: %s.%s failed: %r", conn.peer, service,
                              call.method, exc)  # fmt: skip
            return ServerConnection.respond_error(call.call_id, RETRY_EXCEPTION, f"{type(exc).__name__}: {exc}")
        metrics.CLUSTER_CALLS.labels(call.method).inc()
        return ServerConnection.respond(call.call_id, message)

    async def _replicate(self, conn: _Connection, call: CallReceived) -> bytes:
        stats = CallStats()
        footprint = 0
        try:
            # Answer before HBase's own call timeout, so a slow Kafka turns into a clean retry.
            budget_s = max(1.0, call.timeout_ms / 1000 * 0.9) if call.timeout_ms else None
            async with asyncio.timeout(budget_s):
                # Decoding and encoding a call of many MB takes a while: off the event loop, so heartbeats,
                # ZooKeeper and other connections keep being served meanwhile.
                started = time.monotonic()
                async with self._decoding:
                    decoded = await asyncio.to_thread(self.sink.to_records, call.param, call.cell_block, stats)
                decoded_at = time.monotonic()
                metrics.DECODED.labels(decoded.path).inc()
                footprint = decoded.footprint
                self.budget.charge(footprint)
                self._check_clusters(stats)
                await self.sink.deliver(decoded, stats)
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("%s: call %d: %d entries, %d rows, %.1f MB: decoded in %.0f ms (%s), acknowledged "
                              "%.0f ms later", conn.peer, call.call_id, stats.entries, stats.rows,
                              call.frame_size / 2**20, (decoded_at - started) * 1000, decoded.path,
                              (time.monotonic() - decoded_at) * 1000)  # fmt: skip
        except ClusterNotAllowed as exc:
            metrics.ERRORS.labels("refused_cluster").inc()
            metrics.CALLS.labels("refused").inc()
            self.refusals.log(logging.WARNING, "cluster", "%s: call %d refused: %s", conn.peer, call.call_id, exc)
            return ServerConnection.respond_error(call.call_id, ACCESS_DENIED, str(exc), do_not_retry=True)
        except Exception as exc:  # every failure becomes a retryable error answer: nothing is dropped
            if isinstance(exc, TimeoutError):  # records of this call may still be queued: fail them first
                await self.sink.producer.purge_unacknowledged()
                metrics.ERRORS.labels("purged").inc()
            kind = "decode" if isinstance(exc, WireProtocolError) else type(exc).__name__
            metrics.ERRORS.labels(kind).inc()
            metrics.CALLS.labels("error").inc()
            message = f"cdcflow could not deliver call {call.call_id}: {type(exc).__name__}: {exc}"
            if isinstance(exc, CdcflowError | TimeoutError):
                self.refusals.log(logging.ERROR, f"call:{kind}", "%s", message)
            else:  # not one of ours: a bug, so keep the traceback
                log.exception(message)
            return ServerConnection.respond_error(call.call_id, RETRY_EXCEPTION, message)
        finally:
            if footprint:
                self.budget.release(footprint)
        metrics.CALLS.labels("ok").inc()
        metrics.ENTRIES.inc(stats.entries)
        metrics.ROWS.inc(stats.rows)
        metrics.CELLS.inc(stats.cells)
        metrics.BYTES.inc(stats.bytes)
        if stats.oversize:
            metrics.OVERSIZE.inc(stats.oversize)
        now = time.time()
        metrics.LAST_CALL_TIME.set(now)
        if stats.oldest_write_ms is not None:
            metrics.WAL_TO_ACK.observe(max(0.0, now - stats.oldest_write_ms / 1000))
            self.acked_wal_s = max(self.acked_wal_s, stats.oldest_write_ms / 1000)
            metrics.ACKED_WAL_TIME.set(self.acked_wal_s)
        return ServerConnection.respond(call.call_id, wal_pb2.ReplicateWALEntryResponse())

    def _check_clusters(self, stats: CallStats) -> None:
        allowed = self.admission.allowed_clusters
        if not allowed:
            return
        bad = stats.shipping_clusters - allowed
        if bad:
            raise ClusterNotAllowed(
                f"edits shipped by cluster(s) {sorted(map(str, bad))}, not in hbase.peer.allowed_clusters"
            )


class ClusterNotAllowed(CdcflowError):
    """A call from a source cluster that is not on the allowlist."""
