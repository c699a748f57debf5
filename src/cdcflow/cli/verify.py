"""`cdcflow verify`: sources compared with their sinks, once or every so often."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import F, config_option
from cdcflow.config import CdcflowConfig, local_stack
from cdcflow.errors import CdcflowError


@click.group()
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
@config_option
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
@config_option
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
    from cdcflow.pipeline.sinks.delta.views import hbase_state_rows
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


def _db_tables(tables: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(DB.TABLE, DB, TABLE) of each argument; a usage error for one without a database."""
    names = []
    for table in tables:
        db, dot, name = table.partition(".")
        if not dot:
            raise click.UsageError(f"{table!r}: each TABLE must be DB.TABLE")
        names.append((table, db, name))
    return names


@verify.command("mysql-phoenix")
@config_option
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
    names = _db_tables(tables)
    sink = next((s for s in cfg.pipeline.sinks if s.type == "phoenix"), None)
    options = dict(sink.options) if sink else {}
    url = url or options.get("url") or local_stack.endpoints(cfg.stack.resolved_home(), "phoenix")["jdbc_url"]
    ep = wiring.mysql_endpoint(cfg, admin=True)
    with PhoenixJvm.launch(str(url)) as phoenix:  # one JVM for all tables

        def look(db: str, name: str, keys: tuple[str, ...]) -> Any:
            return lambda: mysql_phoenix_rows(ep, db, name, phoenix, options.get("table_map", {}),
                                              str(options.get("name_case", "upper")), keys, cfg.mysql.name)  # fmt: skip

        checks = [TableCheck(f"mysql-phoenix {table}", look(db, name, tuple(cfg.mysql.key_columns.get(table, ()))))
                  for table, db, name in names]  # fmt: skip
        _run_rounds(cfg, checks, every, grace, metrics_port)


@verify.command("mysql-delta")
@config_option
@click.argument("tables", metavar="DB.TABLE...", nargs=-1, required=True)
@click.option("--sink", "sink_name", default=None,
              help="The delta sink whose tables to read (default: the config's only one).")  # fmt: skip
@click.option("--path", "state_path", default=None,
              help="Read this state table instead of the sink's (one DB.TABLE only).")  # fmt: skip
@_sample_option
@_schedule_options
def verify_mysql_delta_cmd(
    config_path: Path | None,
    tables: tuple[str, ...],
    sink_name: str | None,
    state_path: str | None,
    sample: int | None,
    every: str | None,
    grace: str | None,
    metrics_port: int | None,
) -> None:
    """Compare each MySQL table DB.TABLE with its Delta current view (the sink's state plus the changes it has
    not folded yet: as of its last applied batch), one line per table: whole tables, or with --sample N the
    next N keys each round (in the table's key order). Exit 1 if any has a confirmed difference; --every and
    --grace as for `verify hbase`."""
    from cdcflow.config.sinks import DeltaStateOptions
    from cdcflow.pipeline.session import build_session
    from cdcflow.pipeline.sinks.delta.sink import table_path, with_default_path
    from cdcflow.verify.continuous import TableCheck
    from cdcflow.verify.delta import MySqlDeltaWindows, mysql_delta_rows

    cfg = wiring.load(config_path)
    _check_schedule(every, grace)
    names = _db_tables(tables)
    if state_path is not None and len(names) != 1:
        raise click.UsageError("--path reads one state table: name one DB.TABLE")
    paths: dict[str, str] = {}
    if state_path is not None:
        paths[names[0][0]] = state_path
    else:
        sinks = [s for s in cfg.pipeline.sinks if s.type == "delta" and (sink_name is None or s.name == sink_name)]
        if len(sinks) != 1:
            known = ", ".join(s.name for s in cfg.pipeline.sinks if s.type == "delta") or "none"
            raise click.UsageError(f"name the delta sink with --sink (delta sinks in the config: {known}), or "
                                   "give the state table with --path")  # fmt: skip
        options = sinks[0].typed_options
        assert isinstance(options, DeltaStateOptions)
        options = with_default_path(options, str(wiring.data_dir(cfg)))
        paths = {table: table_path(sinks[0].name, options, cfg.mysql.name, db, name) for table, db, name in names}
    ep = wiring.mysql_endpoint(cfg, admin=True)
    spark = build_session("cdcflow-verify", cfg.pipeline.master, conf=cfg.pipeline.spark_conf)
    spark.sparkContext.setLogLevel("ERROR")

    def check(table: str, db: str, name: str) -> TableCheck:
        keys = tuple(cfg.mysql.key_columns.get(table, ()))
        if sample is not None:
            windows = MySqlDeltaWindows(ep, db, name, spark, paths[table], keys, sample)
            return TableCheck(f"mysql-delta {table}", windows.look, windows)
        return TableCheck(f"mysql-delta {table}", lambda: mysql_delta_rows(ep, db, name, spark, paths[table], keys))

    try:
        checks = [check(table, db, name) for table, db, name in names]
        _run_rounds(cfg, checks, every, grace, metrics_port)
    finally:
        spark.stop()
