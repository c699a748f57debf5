"""Run one replication peer instance until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server

from cdcflow.clients.kafka.producer import AsyncProducer, ProducerSettings
from cdcflow.config import HBaseSourceConfig, KafkaConfig
from cdcflow.sources.hbase.peer.handler import ReplicationHandler
from cdcflow.sources.hbase.peer.registry import PeerRegistry
from cdcflow.sources.hbase.peer.server import PeerServer
from cdcflow.sources.hbase.routing import Router

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PeerEndpoints:
    source_zk_quorum: str
    bootstrap_servers: str


async def run_peer(
    cfg: HBaseSourceConfig, kafka: KafkaConfig, ep: PeerEndpoints, metrics_port: int | None = None,
    stop: asyncio.Event | None = None,
) -> None:  # fmt: skip
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if metrics_port is not None:
        start_http_server(metrics_port, addr="127.0.0.1")
        log.info("metrics on http://127.0.0.1:%d/metrics", metrics_port)
    producer = AsyncProducer(
        ProducerSettings(
            ep.bootstrap_servers, kafka.compression, kafka.linger_ms, kafka.delivery_timeout_ms,
            extra=dict(kafka.properties),
        )
    )  # fmt: skip
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
    sink = ReplicationHandler(producer, Router(cfg.routes, cfg.topic_prefix), cfg.name, skip_before)
    server = PeerServer(
        sink, cfg.peer.host, cfg.peer.port,
        max_inflight_bytes=cfg.max_inflight_mb << 20, max_frame_bytes=cfg.max_frame_mb << 20,
    )  # fmt: skip
    port = await server.start()
    cluster = await asyncio.to_thread(registry.cluster_id)
    await asyncio.to_thread(registry.register, cfg.peer.host, port, int(time.time() * 1000))
    log.info("peer %s (cluster %s) serving on %s:%d", cfg.peer.znode_parent, cluster, cfg.peer.host, port)
    background = [asyncio.create_task(_log_progress()), asyncio.create_task(_keep_registered(registry))]
    try:
        await stop.wait()
    finally:
        for task in background:
            task.cancel()
        log.info("shutting down: unregistering, finishing calls in flight")
        await asyncio.to_thread(registry.unregister)
        await server.stop()
        await asyncio.to_thread(registry.close)
        left = await asyncio.to_thread(producer.close)
        if left:
            log.error("%d records unacknowledged at shutdown; their calls were answered with errors", left)
        log.info("stopped")


async def _keep_registered(registry: PeerRegistry, every_s: float = 2.0) -> None:
    """Backstop to the new-session callback: whatever removed our znode, put it back within seconds."""
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(registry.ensure_registered)


async def _log_progress(every_s: float = 30.0) -> None:
    """One INFO line per interval with new traffic, so a running peer shows it is working."""
    from cdcflow.sources.hbase.peer import metrics

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
