"""`cdcflow mysql`: the MySQL/MariaDB capture (run, preflight, status, offsets)."""

from __future__ import annotations

from pathlib import Path

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import config_option


@click.group()
def mysql() -> None:
    """Capture MySQL/MariaDB changes from the binlog, as a replica."""


@mysql.command("run")
@config_option
@click.option("--metrics-port", type=int, default=None, help="Serve Prometheus metrics on this port "
              "(default: metrics.mysql_port; 0: any free port).")  # fmt: skip
def mysql_run(config_path: Path | None, metrics_port: int | None) -> None:
    """Stream the binlog to Kafka, checkpointing at acknowledged commits. Stops on SIGTERM/SIGINT."""
    import signal
    import threading

    from prometheus_client import REGISTRY

    from cdcflow.metrics import add_probe, serve_metrics
    from cdcflow.sources.mysql.capture import MySqlCapture
    from cdcflow.sources.mysql.metrics import MySqlCaptureCollector
    from cdcflow.sources.mysql.stats import run_forever

    cfg = wiring.load(config_path)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    capture = MySqlCapture(cfg.mysql, wiring.kafka_config(cfg), wiring.mysql_endpoint(cfg), wiring.bootstrap(cfg))
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
@config_option
def mysql_preflight(config_path: Path | None) -> None:
    """Check that the server can be captured (binlog settings, version); print what was found."""
    from cdcflow.sources.mysql.preflight import preflight

    cfg = wiring.load(config_path)
    info = preflight(wiring.mysql_endpoint(cfg), cfg.mysql.server_id)
    click.echo(f"ok: {info.version}, server_id {info.server_id}, binlog GTID position {info.gtid_binlog_pos or '-'}")


@mysql.command("status")
@config_option
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
@config_option
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
@config_option
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
@config_option
def mysql_offsets_reset(config_path: Path | None) -> None:
    """Delete a stopped capture's checkpoint: the next start begins at mysql.start (latest or earliest)."""
    from cdcflow.sources.mysql import offsets

    cfg = wiring.load(config_path)
    offsets.refuse_if_running(wiring.mysql_endpoint(cfg), cfg.mysql.server_id, cfg.mysql.name)
    offsets.reset(wiring.kafka(cfg), cfg.mysql.offsets_topic, cfg.mysql.name)
    click.echo(f"{cfg.mysql.name}: checkpoint deleted; the next start begins at mysql.start ({cfg.mysql.start})")


@mysql.group("signal")
def mysql_signal() -> None:
    """Ask a running capture for something, through mysql.snapshot.signal_table (Debezium's signals)."""


@mysql_signal.command("snapshot")
@config_option
@click.argument("tables", nargs=-1, required=True)
@click.option("--id", "signal_id", default=None, help="The signal's id (default: a new one).")
def mysql_signal_snapshot(config_path: Path | None, tables: tuple[str, ...], signal_id: str | None) -> None:
    """Snapshot TABLES ("db.table" patterns) again from their start while the capture runs: an `execute-snapshot`
    row in the signal table, which the capture reads from the binlog. Progress: `cdcflow mysql status`."""
    import uuid

    from cdcflow.errors import ConfigError
    from cdcflow.sources.mysql.signals import create_signal_table, send_snapshot_signal

    cfg = wiring.load(config_path)
    table = cfg.mysql.snapshot.signal_table
    if table is None:
        raise ConfigError("mysql.snapshot.signal_table is not set: the capture reads no signals (set it, restart "
                          "the capture, then signal)")  # fmt: skip
    if not all("." in t for t in tables):
        raise ConfigError(f'tables are "db.table" names or patterns: {", ".join(tables)}')
    ep = wiring.mysql_endpoint(cfg)
    create_signal_table(ep, table)
    signal_id = signal_id or f"snapshot-{uuid.uuid4().hex[:12]}"
    send_snapshot_signal(ep, table, signal_id, tables)
    click.echo(f"signal {signal_id} written to {table}: snapshot of {', '.join(tables)}")
