"""`cdcflow pipeline`: the Spark pipeline (run, submit, status, offsets)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import config_option


@click.group()
def pipeline() -> None:
    """The Spark pipeline that applies change events to the configured sinks."""


@pipeline.command("run")
@config_option
@click.option("--available-now", is_flag=True, help="Apply what is in Kafka now, then stop (batch-like run).")
@click.option("--metrics-port", type=int, default=None, help="Serve per-sink Prometheus metrics on this port "
              "(default: metrics.pipeline_port; 0: any free port).")  # fmt: skip
def pipeline_run(config_path: Path | None, available_now: bool, metrics_port: int | None) -> None:
    """Run one streaming query per sink (plus dead letters) until Ctrl-C."""
    sys.exit(wiring.run_pipeline(wiring.load(config_path), available_now, metrics_port))


@pipeline.command("submit", context_settings={"ignore_unknown_options": True})
@config_option
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
@config_option
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
@config_option
def pipeline_offsets_show(config_path: Path | None) -> None:
    """Per sink: its last batch, whether it was applied, and its Kafka offsets against each partition's end. A sink
    in a group: its group's query, or where its catch-up stands when it is behind."""
    from cdcflow.clients.kafka import end_offsets
    from cdcflow.pipeline import groups, offsets

    cfg = wiring.load(config_path)
    root = wiring.checkpoint_root(cfg)
    kafka = wiring.kafka(cfg)
    for sink in cfg.pipeline.sinks:
        folder = groups.group_folder(root, sink.group).name if sink.group else sink.name
        ledger = groups.load_ledger(root, sink.name) if sink.group else None
        if not (root / folder).is_dir() or (sink.group and ledger is None):
            click.echo(f"{sink.name}: no checkpoint yet (its first start reads its topics from the beginning)")
            continue
        if ledger is not None and not ledger.joined:
            click.echo(f"{sink.name}: in group {sink.group}, BEHIND ({ledger.reason}); its catch-up stands at")
            positions = ledger.position
        else:
            pos = offsets.read_position(root, folder)
            state = "applied" if pos.committed else "planned, not applied (replayed first on the next start)"
            group = f" (group {sink.group}'s query {folder})" if sink.group else ""
            click.echo(f"{sink.name}: batch {pos.batch} {state}{group}")
            positions = pos.positions
        for topic, partitions in sorted(positions.items()):
            ends = end_offsets(kafka, topic)
            for partition, offset in sorted(partitions.items(), key=lambda kv: int(kv[0])):
                end = ends.get(int(partition))
                behind = f", {end - offset} behind" if end is not None else ""
                click.echo(f"  {topic}[{partition}] at {offset} (end {end}{behind})")


@pipeline_offsets.command("reset")
@config_option
@click.argument("sink")
@click.option("--to", "to", required=True, help="earliest, latest, epoch milliseconds or an ISO 8601 time.")
def pipeline_offsets_reset(config_path: Path | None, sink: str, to: str) -> None:
    """Move SINK's query (pipeline stopped) so its next batch reads from --to. Back: the sink is given
    changes it holds and ignores them (position guard). Forward: the changes in between are skipped.
    A sink in a group is moved alone: it catches up from --to and joins its group again; `group.<name>`
    moves the group's query (every sink of the group that is not behind)."""
    from cdcflow.pipeline import groups, offsets

    cfg = wiring.load(config_path)
    grouped = {s.name: s.group for s in cfg.pipeline.sinks if s.group}
    queries = {s.name for s in cfg.pipeline.sinks} | {f"{groups.GROUP_PREFIX}{g}" for g in grouped.values()}
    if sink not in queries:
        raise click.UsageError(f"no sink or group {sink!r} in the config ({', '.join(sorted(queries))})")
    root = wiring.checkpoint_root(cfg)
    with offsets.checkpoint_lock(root, f"cdcflow pipeline offsets reset {sink}"):
        if sink in grouped:
            ledger = groups.load_ledger(root, sink)
            folder = groups.group_folder(root, grouped[sink]).name
            if ledger is None:
                raise click.UsageError(f"sink {sink} has not run yet: its first start reads from the beginning")
            current = ledger.position if not ledger.joined else offsets.read_position(root, folder).positions
            target = offsets.target_positions(wiring.kafka(cfg), current, to)
            ledger.fall_behind(target, f"offsets reset to {to}")
            groups.save_ledger(root, sink, ledger)
            where = f"catches up from {to} and then joins group {grouped[sink]}'s batches again"
        else:
            current = offsets.read_position(root, sink).positions
            target = offsets.target_positions(wiring.kafka(cfg), current, to)
            where = f"batch {offsets.write_reset(root, sink, target)} ends at {to}; the next batch reads from there"
    moved = sum(target[t][p] - o for t, parts in current.items() for p, o in parts.items() if p in target[t])
    click.echo(f"{sink}: {where} ({'+' if moved >= 0 else ''}{moved} records across "
               f"{sum(len(p) for p in target.values())} partitions)")  # fmt: skip


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
    unapplied = [
        f"{'':16}{table}: {n} change(s) NOT APPLIED (oversize, parts gone: in the dead-letter topic)"
        for table, n in sorted((doc.get("unapplied") or {}).items())
    ]
    folds = (format_fold(path, t, now_ms) for path, t in sorted((doc.get("tables") or {}).items()))
    cuts = (format_cut(source, c, now_ms) for source, c in sorted((doc.get("consistent_cuts") or {}).items()))
    return "\n".join([line, *unapplied, *folds, *cuts])


def format_cut(source: str, cut: dict[str, Any], now_ms: int) -> str:
    """A Delta sink's consistent cut of a MySQL source: the newest transaction it holds whole, what the next waits
    for."""
    ts = cut.get("source_ts_ms")
    at = f"after {cut.get('gtid')} ({(now_ms - ts) / 1000:.0f}s ago at the source)" if cut.get("gtid") and ts else (
        "no transaction whole yet")  # fmt: skip
    waiting = ", ".join(f"{t} {have}/{want}" for t, (have, want) in sorted((cut.get("waiting_for") or {}).items()))
    problem = f"  CANNOT MOVE: {cut['problem']}" if cut.get("problem") else ""
    return (f"{'':16}consistent cut of {source}: {at}, {cut.get('pending_transactions', 0)} transaction(s) waiting"
            f"{f' (next: {waiting})' if waiting else ''}{problem}")  # fmt: skip


def format_fold(path: str, table: dict[str, Any], now_ms: int) -> str:
    """A merge-on-read Delta table's freshness: changes not folded yet, the last fold."""
    last = table.get("last_fold_ms")
    folded = f"folded {(now_ms - last) / 1000:.0f}s ago in {table.get('fold_seconds')}s" if last else "not folded yet"
    stale = table.get("stale")
    warn = "  STALE: the state table is older than fold_interval_s + the folds' rest + 30 s" if stale else ""
    error = f"  fold failing: {table['fold_error']}" if table.get("fold_error") else ""
    return (f"{'':16}{path}: {table.get('pending_rows', 0)} pending (oldest {table.get('pending_age_s', 0)}s), "
            f"{folded}{warn}{error}")  # fmt: skip
