"""`cdcflow` command line."""

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
from cdcflow.cli.wiring import DEFAULT_CONFIG
from cdcflow.config import CdcflowConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.errors import CdcflowError
from cdcflow.stack import COMPONENTS, Stack
from cdcflow.stack.manager import ServiceStatus
from cdcflow.verify.report import VerifyReport

F = TypeVar("F", bound=Callable[..., Any])


def _home_option(f: F) -> F:
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
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ERROR")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
    envvar="CDCFLOW_LOG_FORMAT", help="json: one object per line, for log collectors.",
)  # fmt: skip
def main(log_level: str, log_format: str) -> None:
    """cdcflow: change-data capture from HBase and MySQL/MariaDB to Kafka and on to sinks."""
    from cdcflow import logs

    logs.configure(log_level, log_format)


@main.group()
def stack() -> None:
    """Install and run the local services (Kafka, HBase, MariaDB)."""


def _stack(home: Path | None) -> Stack:
    return Stack(home or default_stack_home())


@stack.command("up")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@_home_option
def stack_up(components: tuple[str, ...], home: Path | None) -> None:
    """Start COMPONENTS (default: all but spark) and wait until each answers; running ones are kept.

    `spark` is a standalone cluster (a master and two workers) for `cdcflow pipeline submit`."""
    print_status(_stack(home).up(components or None))


@stack.command("down")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option("--wipe", is_flag=True, help="Also delete the services' data (a fresh start next time).")
@_home_option
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
@_home_option
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
@_home_option
def stack_logs(component: str, lines: int, home: Path | None) -> None:
    """Print the last lines of COMPONENT's log."""
    from cdcflow.stack.process import tail

    click.echo(tail(_stack(home).log_path(component), lines))


@main.command("run")
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
    status = StatusServer(wiring.status_collector(cfg, wiring.metrics_targets(cfg, dict(ports))), cfg.ui.host,
                          cfg.ui.port, cfg.ui.history_minutes * 60.0)  # fmt: skip
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


# --- cdcflow hbase ----------------------------------------------------------------------------


def _config_option(f: F) -> F:
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
        help="Config file. Default: the bundled config/cdcflow.yaml.",
    )(f)  # fmt: skip


# --- cdcflow mysql ----------------------------------------------------------------------------


@main.group()
def mysql() -> None:
    """Capture MySQL/MariaDB changes from the binlog, as a replica."""


@mysql.command("run")
@_config_option
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port "
              "(default: metrics.mysql_port; 0: any free port).")  # fmt: skip
def mysql_run(config_path: Path | None, metrics_port: int | None) -> None:
    """Stream the binlog to Kafka, checkpointing at acknowledged commits. Stops on SIGTERM/SIGINT."""
    import signal
    import threading

    from prometheus_client import REGISTRY

    from cdcflow.metrics import add_probe, serve_metrics
    from cdcflow.sources.mysql.capture import MySqlCapture, run_forever
    from cdcflow.sources.mysql.metrics import MySqlCaptureCollector

    cfg = wiring.load(config_path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    capture = MySqlCapture(cfg.mysql, cfg.kafka, wiring.mysql_endpoint(cfg), wiring.bootstrap(cfg))
    port = metrics_port if metrics_port is not None else cfg.metrics.mysql_port
    if port is not None:
        REGISTRY.register(MySqlCaptureCollector(capture))
        add_probe("ready", "binlog stream", capture.ready_problem)
        add_probe("live", "binlog stream", capture.live_problem)
        serve_metrics(port, cfg.metrics.host)
    stats = run_forever(capture, stop)
    click.echo(f"stopped: {stats.events} events, {stats.transactions} transactions, checkpoint "
               f"{stats.checkpoint.gtid_state if stats.checkpoint else None}")  # fmt: skip


@mysql.command("preflight")
@_config_option
def mysql_preflight(config_path: Path | None) -> None:
    """Check that the server can be captured (binlog settings, version); print what was found."""
    from cdcflow.sources.mysql.preflight import preflight

    cfg = wiring.load(config_path)
    info = preflight(wiring.mysql_endpoint(cfg), cfg.mysql.server_id)
    click.echo(f"ok: {info.version}, server_id {info.server_id}, binlog GTID position {info.gtid_binlog_pos or '-'}")


@mysql.command("status")
@_config_option
def mysql_status(config_path: Path | None) -> None:
    """Show the stored checkpoint of this source (where `mysql run` resumes)."""
    from cdcflow.clients.kafka import read_latest
    from cdcflow.sources.mysql.checkpoint import Checkpoint

    cfg = wiring.load(config_path)
    raw = read_latest(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name.encode())
    if raw is None:
        click.echo(f"{cfg.mysql.name}: no checkpoint yet (starts at: {cfg.mysql.start})")
        return
    cp = Checkpoint.from_bytes(raw)
    click.echo(f"{cfg.mysql.name}: after GTID {cp.gtid_state} ({cp.file}:{cp.pos}), source time {cp.ts_ms}")
    for table, progress in sorted(cp.snapshot.items()):
        click.echo(f"  snapshot {table}: {progress}")


@mysql.group("offsets")
def mysql_offsets() -> None:
    """Show, set or reset a stopped capture's checkpoint (where `mysql run` resumes)."""


@mysql_offsets.command("show")
@_config_option
def mysql_offsets_show(config_path: Path | None) -> None:
    """The stored checkpoint, whole (GTID state, file:pos, snapshot progress, prepared XA transactions)."""
    from cdcflow.sources.mysql import offsets

    cfg = wiring.load(config_path)
    cp = offsets.show(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name)
    if cp is None:
        click.echo(f"{cfg.mysql.name}: no checkpoint (the next start begins at mysql.start: {cfg.mysql.start})")
        return
    click.echo(f"{cfg.mysql.name}: resumes after GTID state {cp.gtid_state or '(empty)'}")
    click.echo(f"  file:pos {cp.file or '-'}:{cp.pos}, server_id {cp.server_id}, source time {cp.ts_ms}")
    for table, progress in sorted(cp.snapshot.items()):
        click.echo(f"  snapshot {table}: {progress}")
    for xid, held in sorted(cp.xa_prepared.items()):
        click.echo(f"  prepared XA {xid}: {held}")


@mysql_offsets.command("set")
@_config_option
@click.option("--gtid", "gtid", default=None, help="The GTID state to resume after (MariaDB 0-1-100,...; MySQL "
              "uuid:1-100,...).")  # fmt: skip
@click.option("--file", "binlog_file", default=None, help="A binlog file, with --position: resume after the "
              "transaction that ends there.")  # fmt: skip
@click.option("--position", type=int, default=None, help="The end position of a transaction in --file.")
@click.option("--force", is_flag=True, help="Even if the checkpoint holds prepared XA transactions.")
def mysql_offsets_set(config_path: Path | None, gtid: str | None, binlog_file: str | None, position: int | None,
                      force: bool) -> None:  # fmt: skip
    """Move a stopped capture's checkpoint. Back: the sinks get changes again and ignore those they hold.
    Forward: the changes in between are skipped for good."""
    from cdcflow.sources.mysql import offsets

    cfg = wiring.load(config_path)
    if (gtid is None) == (binlog_file is None) or (binlog_file is None) != (position is None):
        raise click.UsageError("give either --gtid, or --file and --position")
    ep = wiring.mysql_endpoint(cfg)
    offsets.refuse_if_running(ep, cfg.mysql.server_id, cfg.mysql.name)
    if gtid is not None:
        state = offsets.normalized_state(ep, gtid)
    else:
        assert binlog_file is not None and position is not None
        state = offsets.state_at(ep, binlog_file, position)
    before = offsets.show(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name)
    offsets.set_checkpoint(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name, state, force=force,
                           file=binlog_file or "", pos=position or 4)  # fmt: skip
    click.echo(f"{cfg.mysql.name}: resumes after {state or '(nothing: the oldest binlog)'} "
               f"(was {before.gtid_state if before else 'no checkpoint'})")  # fmt: skip


@mysql_offsets.command("reset")
@_config_option
def mysql_offsets_reset(config_path: Path | None) -> None:
    """Delete a stopped capture's checkpoint: the next start begins at mysql.start (latest or earliest)."""
    from cdcflow.sources.mysql import offsets

    cfg = wiring.load(config_path)
    offsets.refuse_if_running(wiring.mysql_endpoint(cfg), cfg.mysql.server_id, cfg.mysql.name)
    offsets.reset(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name)
    click.echo(f"{cfg.mysql.name}: checkpoint deleted; the next start begins at mysql.start ({cfg.mysql.start})")


@main.group()
def hbase() -> None:
    """Capture HBase changes: run the replication peer, manage peers and replication scopes."""


@hbase.command("run")
@_config_option
@click.option("--port", type=int, default=None, help="Override hbase.peer.port (0: any free port).")
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port "
              "(default: metrics.hbase_port; 0: any free port).")  # fmt: skip
def hbase_run(config_path: Path | None, port: int | None, metrics_port: int | None) -> None:
    """Serve as a replication peer: forward every WAL edit HBase ships to Kafka. Stops on SIGTERM."""
    import asyncio

    from cdcflow.sources.hbase.peer.run import PeerEndpoints, run_peer

    cfg = wiring.load(config_path)
    hb = cfg.hbase
    if port is not None:
        hb = hb.model_copy(update={"peer": hb.peer.model_copy(update={"port": port})})
    port = metrics_port if metrics_port is not None else cfg.metrics.hbase_port
    endpoints = PeerEndpoints(wiring.source_zk(cfg), wiring.bootstrap(cfg))
    asyncio.run(run_peer(hb, cfg.kafka, endpoints, port, metrics_host=cfg.metrics.host))


@hbase.group()
def peer() -> None:
    """Add, enable, disable, remove and list replication peers on the source HBase (over RPC)."""


@peer.command("add")
@_config_option
@click.option(
    "--table", "tables", multiple=True, help="Replicate only this table (repeatable): TABLE or TABLE=cf1,cf2."
)
@click.option("--serial/--no-serial", default=None, help="Serial replication (default from config: on).")
@click.option("--disabled", is_flag=True, help="Add the peer disabled.")
def peer_add(config_path: Path | None, tables: tuple[str, ...], serial: bool | None, disabled: bool) -> None:
    """Add this cdcflow peer (hbase.peer.* in the config) to the source cluster."""
    from cdcflow.clients.hbase import admin

    cfg = wiring.load(config_path)
    p = cfg.hbase.peer
    key = admin.cluster_key(p.zk_quorum or wiring.source_zk(cfg), p.znode_parent)
    table_cfs: dict[str, list[str]] = {}
    for spec in tables:
        name, _, fams = spec.partition("=") if "=" in spec else (spec, "", "")
        table_cfs[name] = [f for f in fams.split(",") if f]
    cluster = wiring.prepare_peer_cluster(cfg)
    client = wiring.client(cfg)
    try:
        admin.add_peer(client, p.peer_id, key, serial=p.serial if serial is None else serial, enabled=not disabled,
                       table_cfs=table_cfs or None, config=p.hbase_config)  # fmt: skip
    finally:
        client.close()
    click.echo(f"added peer {p.peer_id} -> {key} (peer cluster id {cluster})")


@peer.command("list")
@_config_option
def peer_list(config_path: Path | None) -> None:
    """List the source cluster's replication peers."""
    from cdcflow.clients.hbase import admin

    client = wiring.client(wiring.load(config_path))
    try:
        for info in admin.list_peers(client):
            state = "ENABLED" if info.enabled else "DISABLED"
            click.echo(
                f"{info.peer_id:12} {state:9} serial={info.serial} {info.cluster_key} tables={info.table_cfs or 'all'}"
            )
    finally:
        client.close()


def _peer_action(action: str) -> click.Command:
    @_config_option
    @click.argument("peer_id", required=False)
    def cmd(config_path: Path | None, peer_id: str | None) -> None:
        from cdcflow.clients.hbase import admin

        cfg = wiring.load(config_path)
        peer_id = peer_id or cfg.hbase.peer.peer_id
        client = wiring.client(cfg)
        try:
            getattr(admin, f"{action}_peer")(client, peer_id)
        finally:
            client.close()
        click.echo(f"{action}d peer {peer_id}" if action != "remove" else f"removed peer {peer_id}")

    cmd.__doc__ = f"{action.capitalize()} replication peer PEER_ID (default: hbase.peer.peer_id) on the source cluster."
    return click.command(action)(cmd)


for _action in ("enable", "disable", "remove"):
    peer.add_command(_peer_action(_action))


@hbase.command("scope")
@_config_option
@click.argument("table")
@click.argument("families", nargs=-1, required=True)
@click.option("--scope", type=click.IntRange(0, 1), default=1, show_default=True)
def hbase_scope(config_path: Path | None, table: str, families: tuple[str, ...], scope: int) -> None:
    """Set REPLICATION_SCOPE on FAMILIES of TABLE (1 = replicate, 0 = not)."""
    from cdcflow.clients.hbase import admin

    client = wiring.client(wiring.load(config_path))
    try:
        admin.set_replication_scope(client, table, list(families), scope)
    finally:
        client.close()
    click.echo(f"{table}: REPLICATION_SCOPE={scope} on {', '.join(families)}")


@hbase.command("backfill")
@_config_option
@click.argument("tables", nargs=-1, required=True)
@click.option("--id", "backfill_id", default=None, help="Name of this backfill (default: from the tables); "
              "running the same command again resumes it.")  # fmt: skip
@click.option("--again", is_flag=True, help="Backfill again from a new snapshot, though a backfill of these tables "
              "finished before.")  # fmt: skip
@click.option("--master", default=None, help="Spark master for the region tasks "
              "(default: hbase.backfill.spark_master).")  # fmt: skip
@click.option("--enable-peer", is_flag=True, help="Enable the peer when done even if it existed before (default: "
              "only when this backfill added it, disabled).")  # fmt: skip
def hbase_backfill(
    config_path: Path | None, tables: tuple[str, ...], backfill_id: str | None, again: bool, master: str | None,
    enable_peer: bool,
) -> None:  # fmt: skip
    """Publish every existing cell of TABLES as `op: "r"` events (source.snapshot = true) into the stream's
    topics, then hand off to the stream: the peer is added disabled first (when missing), each table read
    from a snapshot taken after that, one Spark task per region, and the peer enabled at the end. Killed,
    the same command resumes where each region stopped (progress in hbase.backfill.progress_topic)."""
    from cdcflow.clients.hbase import admin
    from cdcflow.pipeline.tasks import run_tasks
    from cdcflow.sources.hbase.backfill import BackfillDriver, BackfillError, BackfillSettings, check_tables
    from cdcflow.sources.hbase.peer.run import producer_settings

    cfg = wiring.load(config_path)
    hb, bf = cfg.hbase, cfg.hbase.backfill
    check_tables(hb, tables)  # before the peer is touched
    client = wiring.client(cfg)
    try:
        missing = [t for t in tables if not client.table_exists(t)]
        if missing:
            raise BackfillError(f"no such table on the source cluster: {', '.join(missing)} (nothing was changed)")
        p = hb.peer
        found = [i for i in admin.list_peers(client) if i.peer_id == p.peer_id]
        added = False
        if not found:
            wiring.prepare_peer_cluster(cfg)
            key = admin.cluster_key(p.zk_quorum or wiring.source_zk(cfg), p.znode_parent)
            admin.add_peer(client, p.peer_id, key, serial=p.serial, enabled=False, config=p.hbase_config)
            added = True
            click.echo(f"added peer {p.peer_id} DISABLED: HBase keeps every change from now on for the stream")
        elif found[0].enabled:
            click.echo(f"peer {p.peer_id} is ENABLED: the stream runs beside the backfill")
        kafka = wiring.kafka(cfg)
        settings = BackfillSettings(
            hb, wiring.source_zk(cfg), kafka, producer_settings(hb, cfg.kafka, kafka.bootstrap_servers),
            bf.progress_topic, str(client.cluster_id()), bf.chunk_rows, progress_every_s=bf.progress_every_s,
        )  # fmt: skip
        spark_master = master or bf.spark_master

        def on_spark(fn: Any, items: list[Any]) -> list[Any]:
            return run_tasks(fn, items, master=spark_master, app_name="cdcflow-hbase-backfill")

        def enable() -> None:
            admin.enable_peer(client, p.peer_id)
            click.echo(f"enabled peer {p.peer_id}: the stream carries every change from here")

        driver = BackfillDriver(settings, client, on_spark)
        status = driver.run(list(tables), backfill_id, again=again, added_peer=added or enable_peer,
                            enable_peer=enable, keep_snapshots=bf.keep_snapshots)  # fmt: skip
    finally:
        client.close()
    click.echo(status.summary())


def _print_backfills(cfg: Any) -> None:
    """Every backfill in the progress topic: state, regions done, rows; the regions of the unfinished ones."""
    from cdcflow.clients.kafka import list_topics
    from cdcflow.sources.hbase.backfill import ProgressStore

    kafka = wiring.kafka(cfg)
    topic = cfg.hbase.backfill.progress_topic
    try:  # the peer's own status above needs no Kafka: an unreachable Kafka costs only this part
        if topic not in list_topics(kafka, timeout_s=3.0):
            return
        backfills = ProgressStore(kafka, topic).status().values()
    except CdcflowError as exc:
        click.echo(f"backfills: {topic} not readable ({exc})")
        return
    for status in backfills:
        click.echo(status.summary())
        if status.plan.state == "done":
            continue
        for t in status.plan.tables:
            regions = status.regions.get(t.table, [])
            done = sum(r.done for r in regions)
            click.echo(f"  {t.table}: {done}/{t.regions} regions done, {sum(r.rows for r in regions)} rows, "
                       f"snapshot {t.snapshot}, scratch table {t.clone}")  # fmt: skip


@hbase.command("status")
@_config_option
def hbase_status(config_path: Path | None) -> None:
    """Peer instances registered in ZooKeeper, the peer's state on the source cluster, and the source's
    replication backlog for it. Exit status 1 when nothing is serving an enabled peer (HBase then keeps
    every WAL for it) or the peer is missing or disabled."""
    from cdcflow.clients.hbase import admin
    from cdcflow.sources.hbase.peer.registry import PeerRegistry

    cfg = wiring.load(config_path)
    p = cfg.hbase.peer
    reg = PeerRegistry(p.zk_quorum or wiring.source_zk(cfg), p.znode_parent)
    try:
        click.echo(f"peer cluster {p.znode_parent}: id {reg.cluster_id()}")
        servers = reg.servers()
        click.echo(f"instances serving: {len(servers)}")
        for s in servers:
            click.echo(f"  {s}")
    finally:
        reg.close()
    client = wiring.client(cfg)
    try:
        found = [i for i in admin.list_peers(client) if i.peer_id == p.peer_id]
        backlog = admin.replication_backlog(client, p.peer_id) if found else []
    finally:
        client.close()
    if not found:
        click.echo(f"peer {p.peer_id} is not added on the source cluster (cdcflow hbase peer add)")
        sys.exit(1)
    info = found[0]
    state = "ENABLED" if info.enabled else "DISABLED"
    click.echo(f"peer {info.peer_id}: {state}, serial={info.serial}, key {info.cluster_key}")
    if backlog:
        click.echo("source backlog (as region servers last reported it to the master):")
        for b in backlog:
            flags = "".join([" recovered" if b.recovered else "", "" if b.running else " NOT RUNNING"])
            click.echo(f"  {b.server} queue {b.queue_id}: {b.wals_queued} WAL(s) queued, lag {b.lag_ms} ms, "
                       f"last shipped {b.age_of_last_shipped_ms} ms ago{flags}")  # fmt: skip
    else:
        click.echo("source backlog: no region server reports a replication source for this peer yet")
    _print_backfills(cfg)
    if info.enabled and not servers:
        queued = sum(b.wals_queued for b in backlog)
        click.echo(f"WARNING: peer {info.peer_id} is ENABLED but no cdcflow instance is serving it: HBase keeps "
                   f"every WAL for it ({queued} queued now) until one runs (cdcflow hbase run) or the peer is "
                   f"disabled (cdcflow hbase peer disable {info.peer_id}) or removed.", err=True)  # fmt: skip
    sys.exit(0 if servers and info.enabled else 1)


# --- cdcflow pipeline -------------------------------------------------------------------------


@main.group()
def pipeline() -> None:
    """The Spark pipeline that applies change events to the configured sinks."""


@pipeline.command("run")
@_config_option
@click.option("--available-now", is_flag=True, help="Apply what is in Kafka now, then stop (batch-like run).")
@click.option("--metrics-port", type=int, default=None, help="Serve per-sink Prometheus metrics on this port "
              "(default: metrics.pipeline_port; 0: any free port).")  # fmt: skip
def pipeline_run(config_path: Path | None, available_now: bool, metrics_port: int | None) -> None:
    """Run one streaming query per sink (plus dead letters) until Ctrl-C."""
    sys.exit(wiring.run_pipeline(wiring.load(config_path), available_now, metrics_port))


@pipeline.command("submit", context_settings={"ignore_unknown_options": True})
@_config_option
@click.option("--master", default=None, help="Spark master URL (default: pipeline.master).")
@click.option("--available-now", is_flag=True, help="Apply what is in Kafka now, then stop.")
@click.option("--dry-run", is_flag=True, help="Print the spark-submit command instead of running it.")
@click.argument("spark_args", nargs=-1, type=click.UNPROCESSED)
def pipeline_submit(
    config_path: Path | None, master: str | None, available_now: bool, dry_run: bool, spark_args: tuple[str, ...]
) -> None:
    """Run the pipeline through spark-submit (extra SPARK_ARGS go to spark-submit), with cdcflow's
    connector jars. On a cluster, cdcflow must be installed on every node's Python."""
    import os
    import shlex

    from cdcflow.cli import spark_app
    from cdcflow.pipeline.session import spark_submit_command

    cfg = wiring.load(config_path)
    cmd = spark_submit_command(cfg.pipeline, wiring.pipeline_context(cfg), master, spark_args, spark_app.__file__)
    if config_path:
        cmd += ["--config", str(config_path.resolve())]
    if available_now:
        cmd.append("--available-now")
    if dry_run:
        click.echo(shlex.join(cmd))
        return
    os.execv(cmd[0], cmd)


@pipeline.command("status")
@_config_option
@click.option("--watch", type=float, default=None, metavar="SECONDS", help="Refresh every SECONDS until Ctrl-C.")
def pipeline_status(config_path: Path | None, watch: float | None) -> None:
    """Per sink: state, last batch, rows/s, batch duration, lag and Kafka records not yet read.

    Lag is now minus the source time of the newest applied event: it keeps growing while the
    source is idle, so read it together with "behind" (0 = caught up with Kafka)."""
    from cdcflow.pipeline.progress import read_progress

    cfg = wiring.load(config_path)
    root = wiring.checkpoint_root(cfg)
    while True:
        progress = read_progress(root)
        if watch:
            click.clear()
            click.echo(f"cdcflow pipeline status  {time.strftime('%H:%M:%S')}  ({root})")
        if not progress:
            click.echo(f"no progress recorded under {root}")
        for name, doc in progress.items():
            click.echo(format_progress(name, doc, int(time.time() * 1000)))
        if not watch:
            sys.exit(0 if progress and all(d.get("state") != "failing" for d in progress.values()) else 1)
        time.sleep(watch)


@pipeline.group("offsets")
def pipeline_offsets() -> None:
    """Show where each sink's query stands in Kafka; move a sink while the pipeline is stopped."""


@pipeline_offsets.command("show")
@_config_option
def pipeline_offsets_show(config_path: Path | None) -> None:
    """Per sink: its last batch, whether it was applied, and its Kafka offsets against each partition's end."""
    from cdcflow.clients.kafka import end_offsets
    from cdcflow.pipeline import offsets

    cfg = wiring.load(config_path)
    root = wiring.checkpoint_root(cfg)
    kafka = wiring.kafka(cfg)
    for sink in cfg.pipeline.sinks:
        if not (root / sink.name).is_dir():
            click.echo(f"{sink.name}: no checkpoint yet (its first start reads its topics from the beginning)")
            continue
        pos = offsets.read_position(root, sink.name)
        state = "applied" if pos.committed else "planned, not applied (replayed first on the next start)"
        click.echo(f"{sink.name}: batch {pos.batch} {state}")
        for topic, partitions in sorted(pos.positions.items()):
            ends = end_offsets(kafka, topic)
            for partition, offset in sorted(partitions.items(), key=lambda kv: int(kv[0])):
                end = ends.get(int(partition))
                behind = f", {end - offset} behind" if end is not None else ""
                click.echo(f"  {topic}[{partition}] at {offset} (end {end}{behind})")


@pipeline_offsets.command("reset")
@_config_option
@click.argument("sink")
@click.option("--to", "to", required=True, help="earliest, latest, epoch milliseconds or an ISO 8601 time.")
def pipeline_offsets_reset(config_path: Path | None, sink: str, to: str) -> None:
    """Move SINK's query (pipeline stopped) so its next batch reads from --to. Back: the sink is given
    changes it holds and ignores them (position guard). Forward: the changes in between are skipped."""
    from cdcflow.pipeline import offsets

    cfg = wiring.load(config_path)
    if sink not in {s.name for s in cfg.pipeline.sinks}:
        raise click.UsageError(f"no sink {sink!r} in the config ({', '.join(s.name for s in cfg.pipeline.sinks)})")
    root = wiring.checkpoint_root(cfg)
    with offsets.checkpoint_lock(root, f"cdcflow pipeline offsets reset {sink}"):
        current = offsets.read_position(root, sink)
        target = offsets.target_positions(wiring.kafka(cfg), current.positions, to)
        batch = offsets.write_reset(root, sink, target)
    moved = sum(target[t][p] - o for t, parts in current.positions.items() for p, o in parts.items() if p in target[t])
    click.echo(f"{sink}: batch {batch} ends at {to} ({'+' if moved >= 0 else ''}{moved} records across "
               f"{sum(len(p) for p in target.values())} partitions); the next batch reads from there")  # fmt: skip


def format_progress(name: str, doc: dict[str, Any], now_ms: int) -> str:
    if doc.get("state") == "failing":
        return f"{name:14} FAILING ({doc.get('failures')}x, retrying): {doc.get('error')}"
    ts = doc.get("last_source_ts_ms")
    lag = f"{(now_ms - ts) / 1000:.1f}s" if ts else "-"
    rate = doc.get("processed_rows_per_second")
    behind = doc.get("offsets_behind")
    line = (
        f"{name:14} batch {doc.get('batch_id', '-')}: {doc.get('rows', 0)} rows "
        f"(total {doc.get('total_rows', 0)}), {rate if rate is not None else '-'} rows/s, "
        f"batch {doc.get('batch_duration_ms') or doc.get('duration_ms') or '-'} ms, lag {lag}, "
        f"behind {behind if behind is not None else '-'}"
    )
    return "\n".join([line, *(format_fold(path, t, now_ms) for path, t in sorted((doc.get("tables") or {}).items()))])


def format_fold(path: str, table: dict[str, Any], now_ms: int) -> str:
    """A merge-on-read Delta table's freshness: changes not folded yet, the last fold."""
    last = table.get("last_fold_ms")
    folded = f"folded {(now_ms - last) / 1000:.0f}s ago in {table.get('fold_seconds')}s" if last else "not folded yet"
    warn = "  STALE: the state table is older than fold_interval_s + 30 s" if table.get("stale") else ""
    error = f"  fold failing: {table['fold_error']}" if table.get("fold_error") else ""
    return (f"{'':16}{path}: {table.get('pending_rows', 0)} pending (oldest {table.get('pending_age_s', 0)}s), "
            f"{folded}{warn}{error}")  # fmt: skip


# --- cdcflow ui -------------------------------------------------------------------------------


@main.command("ui")
@_config_option
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


# --- cdcflow verify ---------------------------------------------------------------------------


@main.group()
def verify() -> None:
    """Compare a source table with a sink table and report missing, extra and differing rows."""


def _duration(text: str) -> float:
    """ "90", "90s", "5m", "1h" -> seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    value, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(value) * units[unit]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration (e.g. 30s, 5m, 1h)") from None
    if seconds < 0:
        raise click.BadParameter(f"{text!r}: a duration cannot be negative")
    return seconds


def _schedule_options(f: F) -> F:
    """--every / --grace / --metrics-port: the options every comparison takes (docs/operations.md)."""
    f = click.option(
        "--metrics-port",
        type=int,
        default=None,
        help="Serve the verify metrics on this port (with --every, default: metrics.verify_port).",
    )(f)
    f = click.option("--grace", default=None, metavar="DURATION",
                     help="Look at differing rows again after DURATION; count only those whose source row is "
                          "unchanged and whose copy still differs (default: 30s with --every, 0 once).")(f)  # fmt: skip
    return click.option("--every", default=None, metavar="DURATION",
                        help="Run a round every DURATION (30s, 5m, 1h) until Ctrl-C, instead of once.")(f)  # fmt: skip


def _check_schedule(every: str | None, grace: str | None) -> float | None:
    """--every in seconds (None: once); a bad --every or --grace is refused before anything connects."""
    interval = _duration(every) if every is not None else None
    if interval is not None and interval <= 0:
        raise click.BadParameter("--every must be longer than 0")
    if grace is not None:
        _duration(grace)
    return interval


def _sample_option(f: F) -> F:
    return click.option("--sample", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Compare N rows per round, each round the key range after the previous one "
                             "(default: every row).")(f)  # fmt: skip


def _run_rounds(cfg: CdcflowConfig, checks: list[Any], every: str | None, grace: str | None,
                metrics_port: int | None) -> None:  # fmt: skip
    """Run each check once, or every `every` until SIGTERM/SIGINT; print and publish every result (metrics,
    the verify topic). Exit 1 if a check's last result has a confirmed difference (or could not run)."""
    import signal
    import threading

    from cdcflow.metrics import serve_metrics
    from cdcflow.verify.continuous import VerifyRound
    from cdcflow.verify.publish import ResultPublisher

    interval = _check_schedule(every, grace)
    grace_s = _duration(grace) if grace is not None else (30.0 if interval is not None else 0.0)
    # The config's port is for the long-running form; a single round serves metrics only when asked.
    port = metrics_port if metrics_port is not None else (cfg.metrics.verify_port if interval is not None else None)
    if port is not None:
        serve_metrics(port, cfg.metrics.host)
    try:
        kafka = wiring.kafka(cfg)
    except CdcflowError as exc:  # the result is still printed (and in the metrics)
        click.echo(f"note: results are not published to {cfg.verify.topic}: {exc}", err=True)
        kafka = None
    publisher = ResultPublisher(kafka, cfg.verify.topic)
    stop = threading.Event()
    if interval is not None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    last: dict[str, VerifyRound] = {}
    while True:
        started = time.monotonic()
        for check in checks:
            try:
                result = check.round(grace_s, stop)
            except CdcflowError as exc:
                if interval is None:
                    raise
                now = int(time.time() * 1000)
                result = VerifyRound(check.name, now, now, 0, "", "", outstanding=len(check.outstanding),
                                     error=str(exc))  # fmt: skip
            last[check.name] = result
            publisher.publish(result)
            click.echo(f"{time.strftime('%H:%M:%S ') if interval is not None else ''}{result.summary()}")
            for example in result.examples:
                click.echo(f"  {example}")
        if interval is None or stop.wait(max(0.0, interval - (time.monotonic() - started))):
            break
    sys.exit(0 if last and all(r.clean for r in last.values()) else 1)


@verify.command("hbase")
@_config_option
@click.argument("source")
@click.argument("sink")
@click.option("--sink-zk", default=None, help="ZooKeeper of the sink cluster (default: the source's).")
@click.option("--max-versions", type=int, default=1, show_default=True, help="Cell versions per column to compare.")
@_sample_option
@_schedule_options
def verify_hbase_cmd(
    config_path: Path | None,
    source: str,
    sink: str,
    sink_zk: str | None,
    max_versions: int,
    sample: int | None,
    every: str | None,
    grace: str | None,
    metrics_port: int | None,
) -> None:
    """Compare HBase table SOURCE with SINK cell by cell (timestamps included). Exit 1 on a confirmed
    difference (with --every: when stopped, if the last round had one). Each round's result goes to the
    verify topic and the metrics (docs/operations.md)."""
    from cdcflow.clients.hbase import connect
    from cdcflow.verify.continuous import HBaseRangeCheck

    cfg = wiring.load(config_path)
    _check_schedule(every, grace)
    src = connect(wiring.source_zk(cfg), cfg.hbase.znode_parent)
    dst = connect(sink_zk, "/hbase") if sink_zk else src
    try:
        _run_rounds(cfg, [HBaseRangeCheck(src, source, dst, sink, max_versions, sample)], every, grace, metrics_port)
    finally:
        src.close()
        if dst is not src:
            dst.close()


@verify.command("hbase-delta")
@_config_option
@click.argument("source")
@click.argument("delta_path")
@click.option("--max-versions", type=int, default=1, show_default=True, help="Cell versions per column to compare.")
@_sample_option
@_schedule_options
def verify_hbase_delta_cmd(
    config_path: Path | None,
    source: str,
    delta_path: str,
    max_versions: int,
    sample: int | None,
    every: str | None,
    grace: str | None,
    metrics_port: int | None,
) -> None:
    """Compare HBase table SOURCE with the Delta current-state table at DELTA_PATH. Exit 1 on a confirmed
    difference; --every, --sample and --grace as for `verify hbase`."""
    from cdcflow.clients.hbase import connect
    from cdcflow.pipeline.session import build_session
    from cdcflow.pipeline.sinks.delta.state import hbase_state_rows
    from cdcflow.verify.continuous import DeltaRangeCheck

    cfg = wiring.load(config_path)
    _check_schedule(every, grace)
    spark = build_session("cdcflow-verify", cfg.pipeline.master, conf=cfg.pipeline.spark_conf)
    spark.sparkContext.setLogLevel("ERROR")
    src = connect(wiring.source_zk(cfg), cfg.hbase.znode_parent)

    def read_range(start: bytes, stop: bytes) -> Any:
        return hbase_state_rows(spark, delta_path, max_versions, start, stop)

    try:
        check = DeltaRangeCheck(src, source, delta_path, read_range, max_versions, sample)
        _run_rounds(cfg, [check], every, grace, metrics_port)
    finally:
        src.close()
        spark.stop()


@verify.command("mysql-phoenix")
@_config_option
@click.argument("tables", metavar="DB.TABLE...", nargs=-1, required=True)
@click.option("--url", default=None, help="Phoenix JDBC URL (default: the phoenix sink's, else the local stack's).")
@_schedule_options
def verify_mysql_phoenix_cmd(
    config_path: Path | None,
    tables: tuple[str, ...],
    url: str | None,
    every: str | None,
    grace: str | None,
    metrics_port: int | None,
) -> None:
    """Compare each MySQL table DB.TABLE with its Phoenix copy (names and table_map from the phoenix sink's
    options), whole tables, one line per table. Exit 1 if any has a confirmed difference; --every and --grace
    as for `verify hbase`."""
    from cdcflow.clients.phoenix import PhoenixJvm
    from cdcflow.verify.continuous import TableCheck
    from cdcflow.verify.phoenix import mysql_phoenix_rows

    cfg = wiring.load(config_path)
    _check_schedule(every, grace)
    names = []
    for table in tables:
        db, dot, name = table.partition(".")
        if not dot:
            raise click.UsageError(f"{table!r}: each TABLE must be DB.TABLE")
        names.append((table, db, name))
    sink = next((s for s in cfg.pipeline.sinks if s.type == "phoenix"), None)
    options = dict(sink.options) if sink else {}
    url = url or options.get("url") or Stack(cfg.stack.resolved_home()).endpoints("phoenix")["jdbc_url"]
    ep = wiring.mysql_endpoint(cfg, admin=True)
    with PhoenixJvm.launch(str(url)) as phoenix:  # one JVM for all tables

        def look(db: str, name: str, keys: tuple[str, ...]) -> Any:
            return lambda: mysql_phoenix_rows(ep, db, name, phoenix, options.get("table_map", {}),
                                              str(options.get("name_case", "upper")), keys, cfg.mysql.name)  # fmt: skip

        checks = [TableCheck(f"mysql-phoenix {table}", look(db, name, tuple(cfg.mysql.key_columns.get(table, ()))))
                  for table, db, name in names]  # fmt: skip
        _run_rounds(cfg, checks, every, grace, metrics_port)


def _report(report: VerifyReport) -> None:
    click.echo(report.summary())
    for example in report.examples:
        click.echo(f"  {example}")
    sys.exit(0 if report.clean else 1)


def entrypoint() -> None:
    try:
        main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except CdcflowError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    entrypoint()
