"""Run one replication peer instance until SIGTERM/SIGINT, then shut down gracefully."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass

from prometheus_client import start_http_server

from cdcflow.config import HBaseSourceConfig, KafkaConfig
from cdcflow.hbase.peer.registry import PeerRegistry
from cdcflow.hbase.peer.server import PeerServer
from cdcflow.hbase.peer.sink import ReplicationSink
from cdcflow.hbase.routing import Router
from cdcflow.kafka.producer import AsyncProducer, ProducerSettings

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
    sink = ReplicationSink(producer, Router(cfg.routes, cfg.topic_prefix), cfg.name, cfg.skip_edits_before_ms)
    server = PeerServer(
        sink, cfg.peer.host, cfg.peer.port,
        max_inflight_bytes=cfg.max_inflight_mb << 20, max_frame_bytes=cfg.max_frame_mb << 20,
    )  # fmt: skip
    port = await server.start()
    registry = await asyncio.to_thread(PeerRegistry, cfg.peer.zk_quorum or ep.source_zk_quorum, cfg.peer.znode_parent)
    cluster = await asyncio.to_thread(registry.cluster_id)
    await asyncio.to_thread(registry.register, cfg.peer.host, port, int(time.time() * 1000))
    log.info("peer %s (cluster %s) serving on %s:%d", cfg.peer.znode_parent, cluster, cfg.peer.host, port)
    try:
        await stop.wait()
    finally:
        log.info("shutting down: unregistering, finishing calls in flight")
        await asyncio.to_thread(registry.unregister)
        await server.stop()
        await asyncio.to_thread(registry.close)
        left = await asyncio.to_thread(producer.close)
        if left:
            log.error("%d records unacknowledged at shutdown; their calls were answered with errors", left)
        log.info("stopped")
