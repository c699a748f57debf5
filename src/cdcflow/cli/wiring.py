"""From config to running parts: the endpoints each command needs (the config's, else the local
stack's) and the contexts handed to the capture, the pipeline and verify.

The one place that knows how a config becomes endpoints; `cdcflow` commands (cli/main.py) and the
spark-submit application (cli/spark_app.py) both use it.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.kafka import KafkaEndpoint
from cdcflow.clients.mysql import MySqlEndpoint, MySqlTls
from cdcflow.config import CdcflowConfig, KafkaConfig, load_config, local_stack
from cdcflow.errors import CdcflowError, ConfigError
from cdcflow.pipeline.context import Endpoints

if TYPE_CHECKING:
    from cdcflow.ui.collector import Collector

log = logging.getLogger(__name__)

DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config" / "cdcflow.yaml"


def load(config_path: Path | None) -> CdcflowConfig:
    return load_config(config_path or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None))


def source_zk(cfg: CdcflowConfig) -> str:
    if cfg.hbase.zk_quorum:
        return cfg.hbase.zk_quorum
    return str(local_stack.endpoints(cfg.stack.resolved_home(), "hbase")["zk_quorum"])


def bootstrap(cfg: CdcflowConfig) -> str:
    if cfg.kafka.bootstrap_servers:
        return cfg.kafka.bootstrap_servers
    return str(local_stack.endpoints(cfg.stack.resolved_home(), "kafka")["bootstrap_servers"])


def kafka(cfg: CdcflowConfig) -> KafkaEndpoint:
    """Kafka with the connection settings (SASL, TLS) of `kafka.properties`, for every client."""
    return KafkaEndpoint.of(bootstrap(cfg), cfg.kafka.properties)


def kafka_config(cfg: CdcflowConfig) -> KafkaConfig:
    """`kafka:` with the schema registry filled in from the local stack when Avro output needs one."""
    avro = "avro" in (cfg.mysql.output.serialization, cfg.hbase.output.serialization)
    if cfg.kafka.schema_registry_url or not avro:
        return cfg.kafka
    url = str(local_stack.endpoints(cfg.stack.resolved_home(), "registry")["url"])
    return cfg.kafka.model_copy(update={"schema_registry_url": url})


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
    tls = MySqlTls(m.tls.mode, m.tls.ca_file, m.tls.cert_file, m.tls.key_file)
    if m.host is not None:
        if m.user is None or m.port is None:
            raise ConfigError("mysql.host is set: set mysql.port and mysql.user (and mysql.password) too")
        return MySqlEndpoint(m.host, m.port, m.user, m.password or "", tls=tls)
    ep = local_stack.endpoints(cfg.stack.resolved_home(), "mariadb")
    user, password = (ep["user"], ep["password"]) if admin else (ep["repl_user"], ep["repl_password"])
    return MySqlEndpoint(str(ep["host"]), int(ep["port"]), str(user), str(password), tls=tls)


def client(cfg: CdcflowConfig) -> NativeHBaseClient:
    return NativeHBaseClient(source_zk(cfg), cfg.hbase.znode_parent)


def data_dir(cfg: CdcflowConfig) -> Path:
    """Where sinks keep local data by default (Delta tables): <stack home>/pipeline."""
    return cfg.stack.resolved_home() / "pipeline"


def checkpoint_root(cfg: CdcflowConfig) -> Path:
    return cfg.pipeline.checkpoint_dir or data_dir(cfg) / "checkpoints"


def pipeline_context(cfg: CdcflowConfig) -> Endpoints:
    """Endpoints sinks may default to: Kafka, the source HBase (when a sink may write or read it), the local
    stack's Phoenix (when the config has a phoenix sink without a url), the MySQL schema history, the local data
    folder. A part of the local stack the sinks do not need is not asked for."""
    sinks = cfg.pipeline.sinks
    zk: str | None = cfg.hbase.zk_quorum
    # hbase sinks without a zk_quorum of their own write the source cluster; hbase and delta sinks read its
    # families' VERSIONS and TTLs when it is there
    needs_hbase = any(s.type == "hbase" and not s.options.get("zk_quorum") for s in sinks)
    if zk is None and any(s.type in ("hbase", "delta") for s in sinks):
        try:
            zk = source_zk(cfg)
        except CdcflowError:
            if needs_hbase:
                raise
            zk = None  # no local HBase (MySQL sources only): nothing to read
    phoenix_url = None
    if any(s.type == "phoenix" and not s.options.get("url") for s in sinks):
        phoenix_url = str(local_stack.endpoints(cfg.stack.resolved_home(), "phoenix")["jdbc_url"])
    beats = cfg.mysql.output.heartbeat_topic
    transactions = cfg.mysql.output.transaction_topic
    return Endpoints(
        bootstrap_servers=bootstrap(cfg), kafka_properties=dict(cfg.kafka.properties), zk_quorum=zk,
        phoenix_url=phoenix_url, data_dir=str(data_dir(cfg)), mysql_schema_history_topic=cfg.mysql.schema_history_topic,
        heartbeat_topics=(beats,) if beats else (),  # a batch of heartbeats only is progress, not sink work
        transaction_topics=((cfg.mysql.name, transactions, cfg.mysql.topic_prefix),) if transactions else (),
        dead_letter_topic=cfg.pipeline.dead_letter_topic, checkpoint_root=str(checkpoint_root(cfg)),
        **debezium_input(cfg),
    )  # fmt: skip


def debezium_input(cfg: CdcflowConfig) -> dict[str, Any]:
    """What the pipeline needs to read the MySQL source's topics when they are in the debezium format: their
    pattern and the schema registry (Avro). Refused, saying what to change, when the records would not carry
    their types (JSON without Connect schemas) or exact times (source types not propagated)."""
    out = cfg.mysql.output
    if out.format == "cdcflow":
        return {}
    sample = f"{cfg.mysql.topic_prefix}.db.table"
    reads = [s.name for s in cfg.pipeline.sinks if re.fullmatch(s.topics or cfg.pipeline.topics, sample)]
    beats = out.heartbeat_topic
    if beats and not any(re.fullmatch(s.topics or cfg.pipeline.topics, beats) for s in cfg.pipeline.sinks):
        beats = None
    if not reads and not beats:
        return {}
    if reads and out.serialization == "json" and not out.schemas:
        raise ConfigError(
            f"pipeline sink {reads[0]!r} reads the MySQL source's topics ({cfg.mysql.topic_prefix}.*), written in the "
            "debezium format without their schemas: set mysql.output.schemas: true or serialization: avro (the "
            "pipeline needs each record's column types), or give the sink topics that leave them out"
        )
    if reads and not out.propagate_source_types:
        raise ConfigError(
            f"pipeline sink {reads[0]!r} reads the MySQL source's debezium-format topics, whose DATETIME and TIME "
            "values need their fractional digits: set mysql.output.propagate_source_types: true"
        )
    # (topic pattern, serialization) per source writing the debezium format
    context: dict[str, Any] = {"debezium_topics": ((rf"{re.escape(cfg.mysql.topic_prefix)}\..*", out.serialization),)}
    if beats:  # Debezium's heartbeats, read as cdcflow's (events/heartbeats.py)
        context["debezium_heartbeat_topics"] = (beats,)
    if out.serialization == "avro":
        context["schema_registry_url"] = kafka_config(cfg).schema_registry_url
    return context


# A pipeline whose parent died (it gets SIGTERM then: PR_SET_PDEATHSIG, cdcflow.dev.demo.children) stops gracefully
# for this long, then exits at once, as a SIGKILL would (the checkpoints make that safe); its Spark JVM follows
# when its stdin closes. A graceful stop can take longer under load, e.g. when the signal comes while Spark starts.
ORPHAN_STOP_S = 10.0


def stop_on_signals(stop: threading.Event, parent: int | None = None, orphan_stop_s: float = ORPHAN_STOP_S) -> None:
    """SIGTERM and SIGINT set `stop`; when the parent (by default the one at this call) is gone by then, the
    process exits `orphan_stop_s` later if it has not ended by itself."""
    expected_parent = os.getppid() if parent is None else parent

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()
        if os.getppid() != expected_parent:  # orphaned (`cdcflow run` was killed): nobody bounds the stop but us
            threading.Thread(target=_exit_after, args=(orphan_stop_s,), daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _exit_after(seconds: float) -> None:
    time.sleep(seconds)
    log.warning("the parent process is gone and the pipeline did not stop within %.0f s: exiting now", seconds)
    logging.shutdown()
    os._exit(143)


def run_pipeline(cfg: CdcflowConfig, available_now: bool, metrics_port: int | None) -> int:
    """Run one streaming query per sink (plus dead letters) until SIGTERM/SIGINT; the exit code."""
    from cdcflow.pipeline.library import Pipeline

    if not cfg.pipeline.sinks:
        raise ConfigError("no sinks configured (pipeline.sinks)")
    context = pipeline_context(cfg)
    # The metrics port is taken before anything else opens a connection: a client socket's ephemeral
    # port could otherwise be the very port asked for.
    started: list[Pipeline] = []
    port = metrics_port if metrics_port is not None else cfg.metrics.pipeline_port
    if port is not None:
        from cdcflow.metrics import add_probe, serve_metrics

        add_probe("ready", "queries", lambda: started[0].ready_problem() if started else "creating the sinks")
        add_probe("live", "pipeline", lambda: started[0].live_problem() if started else None)
        serve_metrics(port, cfg.metrics.host)
    stop = threading.Event()
    stop_on_signals(stop)
    pipeline = Pipeline(cfg.pipeline, context, checkpoint_root(cfg))
    started.append(pipeline)
    result = pipeline.run(available_now=available_now, stop=stop)
    for name, state in result.items():
        print(f"{name:20} {state}")
    return 0 if all(v == "done" for v in result.values()) else 1


def metrics_targets(cfg: CdcflowConfig, ports: dict[str, int | None] | None = None) -> list[str]:
    """The metrics URLs the status page reads: ui.targets, else each configured (or given) port."""
    if cfg.ui.targets:
        return list(cfg.ui.targets)
    host = "127.0.0.1" if cfg.metrics.host in ("0.0.0.0", "", "::") else cfg.metrics.host
    chosen = ports or {
        "hbase": cfg.metrics.hbase_port, "mysql": cfg.metrics.mysql_port,
        "pipeline": cfg.metrics.pipeline_port, "verify": cfg.metrics.verify_port,
    }  # fmt: skip
    return [f"http://{host}:{port}/metrics" for port in chosen.values() if port]


def status_collector(cfg: CdcflowConfig, targets: list[str]) -> Collector:
    """The status page's collector for this config: its metrics targets, the sinks' progress files, the
    verify and dead-letter topics, and the HBase peer's state (each left out when it cannot be located)."""
    from cdcflow.ui.collector import hbase_peer_state

    kafka_ep: KafkaEndpoint | None
    try:
        kafka_ep = kafka(cfg)
    except CdcflowError as exc:
        log.warning("status page: no Kafka to read verify results and dead letters from: %s", exc)
        kafka_ep = None
    peer_fn = None
    try:
        zk = source_zk(cfg)
    except CdcflowError as exc:
        log.warning("status page: no HBase source to read the peer's state from: %s", exc)
    else:
        p = cfg.hbase.peer
        peer_fn = hbase_peer_state(zk, cfg.hbase.znode_parent, p.zk_quorum or zk, p.znode_parent, p.peer_id)
    from cdcflow.ui.collector import Collector

    ui = cfg.ui
    return Collector(
        targets, scrape_seconds=ui.scrape_seconds, state_seconds=ui.state_seconds, history_minutes=ui.history_minutes,
        stalled_after_s=ui.stalled_after_s, checkpoint_root=checkpoint_root(cfg), kafka=kafka_ep,
        verify_topic=cfg.verify.topic, dead_letter_topics=(cfg.pipeline.dead_letter_topic, cfg.mysql.dead_letter_topic),
        peer_state=peer_fn, backfill_topic=cfg.hbase.backfill.progress_topic if peer_fn is not None else None,
    )  # fmt: skip
