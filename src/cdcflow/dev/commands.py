"""The development commands: `cdcflow stack` (the local stack: up, down, status, logs) and `cdcflow run` (the
whole chain on it). The runtime CLI (cdcflow.cli.main) adds them when this package is installed (a checkout)."""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from cdcflow.cli import wiring
from cdcflow.cli.pipeline import format_progress
from cdcflow.cli.wiring import DEFAULT_CONFIG
from cdcflow.config import CdcflowConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import COMPONENTS, Stack
from cdcflow.dev.stack.hbase_cluster import MAX_REGION_SERVERS, REGION_SERVERS
from cdcflow.dev.stack.manager import ServiceStatus

F = TypeVar("F", bound=Callable[..., Any])


def home_option(f: F) -> F:
    return click.option(
        "--home",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Stack home (data, logs, state.json). Default: $CDCFLOW_STACK_HOME or ~/.local/state/cdcflow/stack.",
    )(f)


def print_status(statuses: list[ServiceStatus]) -> None:
    for s in statuses:
        mark = "healthy" if s.healthy else ("RUNNING, UNHEALTHY" if s.running else "DOWN")
        click.echo(f"{s.name:8} {mark:18} pid={s.pid or '-':<8} {s.detail}")
        for key, value in s.endpoints.items():
            if "password" not in key:
                click.echo(f"{'':8}   {key:18} {value}")
        click.echo(f"{'':8}   {'log':18} {s.log}")


@click.group()
def stack() -> None:
    """Install and run the local services (Kafka, HBase, MariaDB)."""


def _stack(home: Path | None) -> Stack:
    return Stack(home or default_stack_home())


@stack.command("up")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option("--region-servers", type=click.IntRange(1, MAX_REGION_SERVERS), default=REGION_SERVERS,
              show_default=True, help="How many region servers hbase-cluster runs (each its own JVM).")  # fmt: skip
@home_option
def stack_up(components: tuple[str, ...], region_servers: int, home: Path | None) -> None:
    """Start COMPONENTS (default: all but spark) and wait until each answers; running ones are kept.

    `spark` is a standalone cluster (a master and two workers) for `cdcflow pipeline submit`; `hbase-cluster` and
    `kafka-cluster` are HBase and Kafka shaped like production (docs/stack.md)."""
    print_status(Stack(home or default_stack_home(), region_servers=region_servers).up(components or None))


@stack.command("down")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option("--wipe", is_flag=True, help="Also delete the services' data (a fresh start next time).")
@home_option
def stack_down(components: tuple[str, ...], wipe: bool, home: Path | None) -> None:
    """Stop COMPONENTS (default: all); no process is left behind."""
    st = _stack(home)
    stopped = st.down(components or None)
    click.echo(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    if wipe:
        for name in components or COMPONENTS:
            shutil.rmtree(st.home / name, ignore_errors=True)
        click.echo("data wiped")


@stack.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@home_option
def stack_status(as_json: bool, home: Path | None) -> None:
    """Show where each service listens and whether it answers. Exit 1 if any is not healthy."""
    statuses = _stack(home).status()
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], indent=2))
    else:
        print_status(statuses)
    sys.exit(0 if all(s.healthy for s in statuses) else 1)


@stack.command("logs")
@click.argument("component", type=click.Choice(COMPONENTS))
@click.option("-n", "--lines", default=50, show_default=True)
@home_option
def stack_logs(component: str, lines: int, home: Path | None) -> None:
    """Print the last lines of COMPONENT's log."""
    from cdcflow.dev.stack.process import tail

    click.echo(tail(_stack(home).log_path(component), lines))


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
    from cdcflow.dev.demo.chain import run_chain

    mysql_admin = (
        wiring.mysql_endpoint(cfg, admin=True) if "mariadb" in cfg.stack.components and cfg.mysql.host is None else None
    )
    from cdcflow.dev.stack.ports import free_port
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
