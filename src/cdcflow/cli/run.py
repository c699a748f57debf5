"""`cdcflow run` (the whole chain on the local stack) and `cdcflow ui` (the status page)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import config_option, print_status
from cdcflow.cli.pipeline import format_progress
from cdcflow.cli.wiring import DEFAULT_CONFIG
from cdcflow.config import CdcflowConfig
from cdcflow.stack import Stack


@click.command("run")
@click.option(
    "--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help=f"Config file. Default: the bundled {DEFAULT_CONFIG.name}.",
)  # fmt: skip
def run(config_path: Path | None) -> None:
    """The whole chain on the local stack until Ctrl-C: demo workloads → HBase and MariaDB → captures →
    Kafka → pipeline → HBase copies, Delta tables and Phoenix tables, with a live progress view."""
    from cdcflow.clients.hbase import admin

    cfg = wiring.load(config_path)
    st = Stack(cfg.stack.resolved_home())
    started = time.monotonic()
    click.echo(f"starting the local stack in {st.home} ...")
    statuses = st.up(cfg.stack.components)
    click.echo(f"stack ready in {time.monotonic() - started:.0f}s:\n")
    print_status(statuses)
    if "hbase" not in cfg.stack.components or "kafka" not in cfg.stack.components:
        click.echo("\nhbase or kafka is not in stack.components: nothing to capture. The services keep running.")
        return
    p = cfg.hbase.peer
    zk = wiring.source_zk(cfg)
    client = wiring.client(cfg)
    try:
        if not any(i.peer_id == p.peer_id for i in admin.list_peers(client)):
            wiring.prepare_peer_cluster(cfg)
            admin.add_peer(client, p.peer_id, admin.cluster_key(p.zk_quorum or zk, p.znode_parent), serial=p.serial,
                           config=p.hbase_config)  # fmt: skip
            click.echo(f"\nadded replication peer {p.peer_id} on the local HBase")
    finally:
        client.close()
    from cdcflow.demo.chain import run_chain

    mysql_admin = (
        wiring.mysql_endpoint(cfg, admin=True) if "mariadb" in cfg.stack.components and cfg.mysql.host is None else None
    )
    from cdcflow.stack.ports import free_port
    from cdcflow.ui.app import StatusServer

    m = cfg.metrics
    ports = {"hbase": m.hbase_port or free_port(), "pipeline": m.pipeline_port or free_port()}
    if mysql_admin is not None:
        ports["mysql"] = m.mysql_port or free_port()
    # This process's own metrics (its children up, their restarts) are one more target of the page.
    from cdcflow.metrics import serve_metrics

    own_port = serve_metrics(0, m.host)
    targets = wiring.metrics_targets(cfg, {**ports, "run": own_port})
    status = StatusServer(wiring.status_collector(cfg, targets), cfg.ui.host, cfg.ui.port,
                          cfg.ui.history_minutes * 60.0)  # fmt: skip
    status.start()
    click.echo(f"status page: {status.url}")
    client = wiring.client(cfg)
    try:
        run_chain(cfg, config_path, client, st.home, lambda: _progress_lines(cfg), mysql_admin=mysql_admin,
                  metrics_ports=ports, status_url=status.url)  # fmt: skip
    finally:
        client.close()
        status.stop()


def _progress_lines(cfg: CdcflowConfig) -> list[str]:
    from cdcflow.pipeline.progress import read_progress

    now = int(time.time() * 1000)
    lines = [format_progress(n, d, now) for n, d in read_progress(wiring.checkpoint_root(cfg)).items()]
    return lines or ["  (no batch applied yet: Spark takes ~20 s to start)"]


@click.command("ui")
@config_option
@click.option("--host", default=None, help="Address to serve on (default: ui.host).")
@click.option("--port", type=int, default=None, help="Port (default: ui.port; 0: any free port).")
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="URL",
    help="A metrics URL to read (repeatable; default: ui.targets, else the metrics.*_port of the config).",
)
def ui(config_path: Path | None, host: str | None, port: int | None, targets: tuple[str, ...]) -> None:
    """Serve the status page: captures, sinks, verify results, dead letters and warnings, from what the
    processes publish (metrics endpoints, progress files, Kafka, HBase's peer state). Until Ctrl-C."""
    from cdcflow.ui.app import StatusServer

    cfg = wiring.load(config_path)
    urls = list(targets) or wiring.metrics_targets(cfg)
    server = StatusServer(wiring.status_collector(cfg, urls), host or cfg.ui.host,
                         cfg.ui.port if port is None else port, cfg.ui.history_minutes * 60.0)  # fmt: skip
    click.echo(f"cdcflow status page on {server.url} (reading {', '.join(urls) or 'no metrics endpoints'})")
    server.serve_forever()
