"""Run one replication peer instance until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import asyncio
import logging
import resource
import signal
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cdcflow.clients.hbase import NativeHBaseClient, connect
from cdcflow.clients.kafka import KafkaEndpoint, list_topics, partition_count
from cdcflow.clients.kafka.producer import AsyncProducer, OutRecord, ProducerSettings
from cdcflow.clients.registry import SchemaRegistry
from cdcflow.config import HBaseSourceConfig, KafkaConfig
from cdcflow.config.model import PeerTlsConfig
from cdcflow.errors import ConfigError
from cdcflow.events.json_codec import encode
from cdcflow.logs import RateLimited
from cdcflow.metrics import add_probe, serve_metrics
from cdcflow.protocols.hbase.cluster_calls import PeerCluster
from cdcflow.sources.hbase import native_records
from cdcflow.sources.hbase.peer import metrics
from cdcflow.sources.hbase.peer.handler import OversizePolicy, ReplicationHandler, TopicLimits
from cdcflow.sources.hbase.peer.registry import PeerRegistry
from cdcflow.sources.hbase.peer.server import ACCEPT_BACKLOG, Admission, PeerServer
from cdcflow.sources.hbase.peer.table_watch import Emptied, truncate_event, watch_tables
from cdcflow.sources.hbase.peer.upsert import ClientRowReader, UpsertHandler
from cdcflow.sources.hbase.routing import Router

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeerEndpoints:
    source_zk_quorum: str
    bootstrap_servers: str


def producer_settings(cfg: HBaseSourceConfig, kafka: KafkaConfig, bootstrap_servers: str) -> ProducerSettings:
    """The HBase capture's producer (the peer's and the backfill's): room for its largest records."""
    return ProducerSettings(
        bootstrap_servers, kafka.compression, kafka.linger_ms, kafka.delivery_timeout_ms,
        max_message_bytes=max(16 * 2**20, cfg.max_record_bytes + 2**20),
        batch_bytes=min(1_000_000, cfg.max_record_bytes), extra=dict(kafka.properties),
    )  # fmt: skip


async def run_peer(
    cfg: HBaseSourceConfig, kafka: KafkaConfig, ep: PeerEndpoints, metrics_port: int | None = None,
    stop: asyncio.Event | None = None, metrics_host: str = "127.0.0.1",
) -> None:  # fmt: skip
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.set_exception_handler(_rate_limited_loop_errors())
    beat = {"at": time.monotonic(), "serving": False}
    add_probe("live", "event loop", lambda: _loop_lag(beat["at"]))
    add_probe("ready", "peer", lambda: None if beat["serving"] else "not registered in ZooKeeper yet")
    if metrics_port is not None:
        serve_metrics(metrics_port, metrics_host)
    producer = AsyncProducer(producer_settings(cfg, kafka, ep.bootstrap_servers))
    add_probe("ready", "kafka", producer.brokers.problem)
    registry = await asyncio.to_thread(
        PeerRegistry, cfg.peer.zk_quorum or ep.source_zk_quorum, cfg.peer.znode_parent, cfg.peer.zk_session_timeout_s
    )
    skip_before = cfg.skip_edits_before_ms
    if cfg.skip_edits_before_peer_creation:
        created = await asyncio.to_thread(registry.created_ms)
        if created is None:
            log.warning("skip_edits_before_peer_creation: no creation time recorded (add the peer with cdcflow)")
        else:
            skip_before = max(skip_before or 0, created)
            log.info("dropping edits written before the peer's creation (%d ms)", created)
    topics = TopicLimits(KafkaEndpoint.of(ep.bootstrap_servers, kafka.properties), cfg.max_record_bytes,
                         cfg.topic_partitions)  # fmt: skip
    oversize = OversizePolicy(cfg.max_record_bytes, cfg.oversize, cfg.oversize_topic, cfg.after_base64)
    sink = await asyncio.to_thread(_handler, cfg, kafka, ep, producer, skip_before, topics, oversize)
    native_records.log_which_path()
    p = cfg.peer
    max_connections = fit_connections_to_descriptors(p.max_connections)
    admission = Admission.of(p.allowed_networks, p.allowed_clusters, max_connections=max_connections,
                             idle_timeout_s=p.idle_timeout_s, handshake_timeout_s=p.handshake_timeout_s)  # fmt: skip
    server = PeerServer(
        sink, p.bind or p.host, p.port,
        max_inflight_bytes=cfg.max_inflight_mb << 20, max_frame_bytes=cfg.max_frame_mb << 20,
        admission=admission, ssl_context=server_tls(p.tls) if p.tls else None, cluster=_cached_view(registry),
    )  # fmt: skip
    port = await server.start()
    cluster = await asyncio.to_thread(registry.cluster_id)
    await asyncio.to_thread(registry.register, p.host, port, int(time.time() * 1000))
    log.info("peer %s (cluster %s) serving on %s:%d, registered as %s:%d", p.znode_parent, cluster,
             p.bind or p.host, port, p.host, port)  # fmt: skip
    beat["serving"] = True
    background = [asyncio.create_task(_log_progress()), asyncio.create_task(_keep_registered(registry)),
                  asyncio.create_task(_heartbeat(beat))]  # fmt: skip
    if cfg.table_watch_s and cfg.output.format == "cdcflow":
        publish = _truncate_publisher(cfg, KafkaEndpoint.of(ep.bootstrap_servers, kafka.properties), producer, topics,
                                      str(cluster))  # fmt: skip
        background.append(
            asyncio.create_task(
                watch_tables(
                    cfg.table_watch_s,
                    lambda: NativeHBaseClient(ep.source_zk_quorum, cfg.znode_parent, op_timeout_s=30.0),
                    publish,
                )
            )
        )
    elif cfg.table_watch_s:
        log.info("hbase.output.format is %s: tables truncated or deleted at the source are not published (the "
                 "cdcflow format carries them)", cfg.output.format)  # fmt: skip
    try:
        await stop.wait()
    finally:
        for task in background:
            task.cancel()
        beat["serving"] = False
        log.info("shutting down: unregistering, finishing calls in flight")
        await asyncio.to_thread(registry.unregister)
        await server.stop()
        await asyncio.to_thread(registry.close)
        left = await asyncio.to_thread(producer.close)
        if left:
            log.error("%d records unacknowledged at shutdown; their calls were answered with errors", left)
        log.info("stopped")


def _truncate_publisher(
    cfg: HBaseSourceConfig, kafka: KafkaEndpoint, producer: AsyncProducer, topics: TopicLimits, cluster_id: str
) -> Callable[[Emptied], Awaitable[None]]:
    """Publish an emptied table's op t event to every partition of its topic: only tables whose topic exists (a
    table this peer never had a change of is not replicated here, or its sinks have nothing of it)."""
    router = Router(cfg.routes, cfg.topic_prefix)

    async def publish(emptied: Emptied) -> None:
        route = router.route(emptied.table)
        if route is None or route.topic not in await asyncio.to_thread(list_topics, kafka):
            return
        event = truncate_event(cfg.name, cluster_id, emptied)
        value = encode(event)
        partitions = await asyncio.to_thread(partition_count, kafka, route.topic)
        await producer.send_all([OutRecord(route.topic, None, value, p) for p in range(partitions)])
        metrics.TABLES_EMPTIED.labels(emptied.cause).inc()
        log.info("HBase table %s %s: every cell older than %d is gone; an op t event in %d partition(s) of %s",
                 emptied.table, "deleted" if emptied.cause == "drop" else "truncated or deleted and created again",
                 emptied.before_ts, partitions, route.topic)  # fmt: skip

    return publish


LOOP_STALL_S = 15.0  # the event loop has not run a 1-second tick for this long: the peer is stuck


async def _heartbeat(beat: dict[str, Any]) -> None:
    while True:
        beat["at"] = time.monotonic()
        await asyncio.sleep(1.0)


def _loop_lag(last: float) -> str | None:
    stalled = time.monotonic() - last
    return f"the event loop has not ticked for {stalled:.0f} s" if stalled > LOOP_STALL_S else None


# Descriptors kept for everything that is not a peer connection (Kafka, ZooKeeper, metrics, logs), and
# for one burst of accepts: asyncio accepts up to the listen backlog before our cap sees any of them.
_RESERVED_FDS = 128 + ACCEPT_BACKLOG


def _handler(
    cfg: HBaseSourceConfig, kafka: KafkaConfig, ep: PeerEndpoints, producer: AsyncProducer, skip_before: int | None,
    topics: TopicLimits, oversize: OversizePolicy,
) -> ReplicationHandler:  # fmt: skip
    """The call handler of hbase.output.format: the cells of each change, or each changed row read back."""
    router = Router(cfg.routes, cfg.topic_prefix)
    out = cfg.output
    metrics.OUTPUT_INFO.labels(out.format, out.serialization).set(1)
    if out.format == "cdcflow":
        return ReplicationHandler(producer, router, cfg.name, skip_before, topics=topics, oversize=oversize)
    register = None
    if out.serialization == "avro":
        if not kafka.schema_registry_url:
            raise ConfigError("hbase.output.serialization is avro: set kafka.schema_registry_url "
                              "(or run the local stack's registry: cdcflow stack up registry)")  # fmt: skip
        register = SchemaRegistry(kafka.schema_registry_url).register
    reader = ClientRowReader(connect(ep.source_zk_quorum, cfg.znode_parent, op_timeout_s=out.read_timeout_s))
    log.info("output format: upsert, %s (each changed row read back from the source cluster at %s%s)",
             out.serialization, ep.source_zk_quorum, cfg.znode_parent)  # fmt: skip
    return UpsertHandler(producer, router, cfg.name, skip_before, topics=topics, reader=reader, register=register,
                         read_attempts=out.read_attempts, oversize=oversize)  # fmt: skip


def _rate_limited_loop_errors() -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """asyncio reports e.g. "socket.accept() out of system resource" through the loop's exception handler,
    once per accept attempt: one line per kind every 10 s is enough."""
    limited = RateLimited(logging.getLogger("asyncio"))

    def handle(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        limited.log(logging.ERROR, str(context.get("message")), "%s%s", context.get("message"),
                    f": {type(exc).__name__}: {exc}" if exc else "")  # fmt: skip

    return handle


def fit_connections_to_descriptors(wanted: int) -> int:
    """Raise the soft open-files limit toward the hard one, and keep max_connections below it, so a flood of
    connections is shed by us instead of ending in EMFILE (where accept fails in a loop and the metrics
    port can no longer answer)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted + _RESERVED_FDS
    if soft != resource.RLIM_INFINITY and soft < target:
        new_soft = target if hard == resource.RLIM_INFINITY else min(target, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new_soft, hard))
            log.info("raised the open-files soft limit from %d to %d", soft, new_soft)
            soft = new_soft
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-files limit (%d): %s", soft, exc)
    if soft != resource.RLIM_INFINITY and soft - _RESERVED_FDS < wanted:
        fitted = max(1, soft - _RESERVED_FDS)
        log.warning("hbase.peer.max_connections %d lowered to %d: the open-files limit is %d", wanted, fitted, soft)
        return fitted
    return wanted


def server_tls(tls: PeerTlsConfig) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.ca_file:
            context.load_verify_locations(tls.ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"hbase.peer.tls: cannot load the certificate or key: {exc}") from exc
    return context


def _cached_view(registry: PeerRegistry, fresh_s: float = 2.0) -> Callable[[], Awaitable[PeerCluster]]:
    """The peer cluster for master-side calls (cluster_calls.py), read from ZooKeeper at most every `fresh_s`: a
    3.0 source asks at each connection and on every sink refresh."""
    held: list[tuple[float, PeerCluster]] = []

    async def view() -> PeerCluster:
        if not held or time.monotonic() - held[0][0] > fresh_s:
            cluster = await asyncio.to_thread(registry.cluster_view)
            held[:] = [(time.monotonic(), cluster)]
        return held[0][1]

    return view


async def _keep_registered(registry: PeerRegistry, every_s: float = 2.0) -> None:
    """Backstop to the new-session callback: whatever removed our znode, put it back within seconds."""
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(registry.ensure_registered)
        try:
            metrics.INSTANCES.set(len(await asyncio.to_thread(registry.servers)))
        except Exception as exc:  # ZooKeeper unreachable: the registration check logs it
            log.debug("could not count instances: %s", exc)


async def _log_progress(every_s: float = 30.0) -> None:
    """One INFO line per interval with new traffic, so a running peer shows it is working."""
    last = (0.0, 0.0, 0.0)
    while True:
        await asyncio.sleep(every_s)
        now = (_total(metrics.CALLS, outcome="ok"), _total(metrics.ROWS), _total(metrics.ERRORS))
        if now != last:
            log.info("progress: %d calls ok, %d rows to Kafka, %d errors (totals)", *now)
            last = now


def _total(metric: Any, **labels: str) -> float:
    """Sum of a metric's `_total` samples whose labels include `labels`."""
    return float(
        sum(
            sample.value
            for family in metric.collect()
            for sample in family.samples
            if sample.name.endswith("_total") and all(sample.labels.get(k) == v for k, v in labels.items())
        )
    )
