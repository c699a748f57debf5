"""From config to running parts: the endpoints each command needs (the config's, else the local
stack's) and the contexts handed to the capture, the pipeline and verify.

The one place that knows how a config becomes endpoints; `cdcflow` commands (cli/main.py) and the
spark-submit application (cli/spark_app.py) both use it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.kafka import KafkaEndpoint
from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import CdcflowConfig, load_config
from cdcflow.errors import ConfigError
from cdcflow.stack import Stack

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config" / "cdcflow.yaml"


def load(config_path: Path | None) -> CdcflowConfig:
    return load_config(config_path or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None))


def source_zk(cfg: CdcflowConfig) -> str:
    if cfg.hbase.zk_quorum:
        return cfg.hbase.zk_quorum
    return str(Stack(cfg.stack.resolved_home()).endpoints("hbase")["zk_quorum"])


def bootstrap(cfg: CdcflowConfig) -> str:
    if cfg.kafka.bootstrap_servers:
        return cfg.kafka.bootstrap_servers
    return str(Stack(cfg.stack.resolved_home()).endpoints("kafka")["bootstrap_servers"])


def kafka(cfg: CdcflowConfig) -> KafkaEndpoint:
    """Kafka with the connection settings (SASL, TLS) of `kafka.properties`, for every client."""
    return KafkaEndpoint.of(bootstrap(cfg), cfg.kafka.properties)


def prepare_peer_cluster(cfg: CdcflowConfig) -> str:
    """HBase reads the peer's hbaseid while adding it: create the peer cluster's znodes first."""
    from cdcflow.sources.hbase.peer.registry import PeerRegistry

    p = cfg.hbase.peer
    reg = PeerRegistry(p.zk_quorum or source_zk(cfg), p.znode_parent)
    try:
        return str(reg.prepare(int(time.time() * 1000)))
    finally:
        reg.close()


def mysql_endpoint(cfg: CdcflowConfig, admin: bool = False) -> MySqlEndpoint:
    """The source server: from the config, or the local stack's MariaDB (replication user; `admin`: its admin)."""
    m = cfg.mysql
    if m.host is not None:
        if m.user is None or m.port is None:
            raise ConfigError("mysql.host is set: set mysql.port and mysql.user (and mysql.password) too")
        return MySqlEndpoint(m.host, m.port, m.user, m.password or "")
    ep = Stack(cfg.stack.resolved_home()).endpoints("mariadb")
    user, password = (ep["user"], ep["password"]) if admin else (ep["repl_user"], ep["repl_password"])
    return MySqlEndpoint(str(ep["host"]), int(ep["port"]), str(user), str(password))


def client(cfg: CdcflowConfig) -> NativeHBaseClient:
    return NativeHBaseClient(source_zk(cfg), cfg.hbase.znode_parent)


def data_dir(cfg: CdcflowConfig) -> Path:
    """Where sinks keep local data by default (Delta tables): <stack home>/pipeline."""
    return cfg.stack.resolved_home() / "pipeline"


def checkpoint_root(cfg: CdcflowConfig) -> Path:
    return cfg.pipeline.checkpoint_dir or data_dir(cfg) / "checkpoints"


def pipeline_context(cfg: CdcflowConfig) -> dict[str, Any]:
    """Endpoints sinks may default to: Kafka, the source HBase, the local stack's Phoenix (when the
    config has a phoenix sink without a url), the MySQL schema history, the local data folder."""
    context: dict[str, Any] = {
        "bootstrap_servers": bootstrap(cfg), "zk_quorum": source_zk(cfg), "data_dir": str(data_dir(cfg)),
        "mysql_schema_history_topic": cfg.mysql.schema_history_topic,
        "kafka_properties": dict(cfg.kafka.properties),
    }  # fmt: skip
    if any(s.type == "phoenix" and not s.options.get("url") for s in cfg.pipeline.sinks):
        context["phoenix_url"] = Stack(cfg.stack.resolved_home()).endpoints("phoenix")["jdbc_url"]
    return context


def run_pipeline(cfg: CdcflowConfig, available_now: bool, metrics_port: int | None) -> int:
    """Run one streaming query per sink (plus dead letters) until SIGTERM/SIGINT; the exit code."""
    import signal
    import threading

    from cdcflow.pipeline.runner import Pipeline

    if not cfg.pipeline.sinks:
        raise ConfigError("no sinks configured (pipeline.sinks)")
    context = pipeline_context(cfg)
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    result = Pipeline(cfg.pipeline, context, checkpoint_root(cfg)).run(available_now=available_now, stop=stop)
    for name, state in result.items():
        print(f"{name:20} {state}")
    return 0 if all(v == "done" for v in result.values()) else 1
