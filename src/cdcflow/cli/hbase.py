"""`cdcflow hbase`: the HBase capture (run, peer, scope, backfill, status)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import config_option
from cdcflow.errors import CdcflowError


@click.group()
def hbase() -> None:
    """Capture HBase changes: run the replication peer, manage peers and replication scopes."""


@hbase.command("run")
@config_option
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
    asyncio.run(run_peer(hb, wiring.kafka_config(cfg), endpoints, port, metrics_host=cfg.metrics.host))


@hbase.group()
def peer() -> None:
    """Add, enable, disable, remove and list replication peers on the source HBase (over RPC)."""


@peer.command("add")
@config_option
@click.option(
    "--table", "tables", multiple=True, help="Replicate only this table (repeatable): TABLE or TABLE=cf1,cf2."
)
@click.option("--serial/--no-serial", default=None, help="Serial replication (default from config: on).")
@click.option("--disabled", is_flag=True, help="Add the peer disabled.")
@click.option("--rpc-key", is_flag=True, help="Use the hbase+rpc:// cluster key naming the running instances "
              "(HBase 3.0 source clusters only; 2.x refuses it) instead of the ZooKeeper one.")  # fmt: skip
def peer_add(config_path: Path | None, tables: tuple[str, ...], serial: bool | None, disabled: bool,
             rpc_key: bool) -> None:  # fmt: skip
    """Add this cdcflow peer (hbase.peer.* in the config) to the source cluster."""
    from cdcflow.clients.hbase import admin

    cfg = wiring.load(config_path)
    p = cfg.hbase.peer
    zk_key, rpc = _cluster_keys(cfg)
    key = rpc if rpc_key and rpc else zk_key
    if rpc_key and not rpc:
        admin.rpc_cluster_key([])  # raises, saying to start the instances first
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
    click.echo(f"cluster keys: {zk_key} (any HBase); {rpc or 'hbase+rpc:// (no instance registered yet)'} "
               "(HBase 3.0)")  # fmt: skip


@peer.command("keys")
@config_option
def peer_keys(config_path: Path | None) -> None:
    """Print this peer's cluster keys: the ZooKeeper one (any HBase source) and the hbase+rpc:// one naming the
    running instances (HBase 3.0 sources), to add the peer by hand (`add_peer` in the HBase shell)."""
    zk_key, rpc = _cluster_keys(wiring.load(config_path))
    click.echo(f"zookeeper  {zk_key}")
    click.echo(f"rpc        {rpc or '(no instance registered: start cdcflow hbase run)'}")


def _cluster_keys(cfg: Any) -> tuple[str, str | None]:
    """(ZooKeeper cluster key, hbase+rpc:// key of the instances registered now, or None)."""
    from cdcflow.clients.hbase import admin
    from cdcflow.protocols.hbase.cluster_calls import ServerAddress
    from cdcflow.sources.hbase.peer.registry import PeerRegistry

    p = cfg.hbase.peer
    quorum = p.zk_quorum or wiring.source_zk(cfg)
    registry = PeerRegistry(quorum, p.znode_parent)
    try:
        servers = [ServerAddress.parse(name) for name in registry.servers()]
    finally:
        registry.zk.close()
    rpc = admin.rpc_cluster_key([(s.host, s.port) for s in servers]) if servers else None
    return admin.cluster_key(quorum, p.znode_parent), rpc


@peer.command("list")
@config_option
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
    @config_option
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
@config_option
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
@config_option
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
@config_option
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
