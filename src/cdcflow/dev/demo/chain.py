"""`cdcflow run`: the whole default chain on the local stack, with demo workloads and a live view.

    demo workload → HBase → cdcflow peer ─────┐
                                              ├→ Kafka → pipeline → HBase copies, Delta tables, Phoenix
    demo transactions → MariaDB → mysql capture ┘

The peer, the MySQL capture and the pipeline run as child processes (`cdcflow hbase run`,
`cdcflow mysql run`, `cdcflow pipeline run`),
exactly as a user would run them, with logs under <stack home>/run/. This process writes the
demo workload and redraws the progress view; Ctrl-C, SIGTERM or SIGHUP stops everything in order
(workload, then the children with SIGTERM, which finish their in-flight work). The children are
supervised (demo/children.py): they end when this process ends however it ends, and one that dies
is started again with back-off.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import CdcflowConfig
from cdcflow.dev.demo.children import Child, stop_children
from cdcflow.dev.demo.hbase_workload import HBaseWorkload
from cdcflow.dev.testing.mysql import WORKLOAD_TABLES, MySqlWorkload


@dataclass
class DemoWriter:
    """Writes the demo workload at a steady rate in a thread."""

    workload: HBaseWorkload
    rate: float
    limit: int | None
    stop: threading.Event = field(default_factory=threading.Event)
    error: str | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            while not self.stop.is_set() and (self.limit is None or self.workload.mutations < self.limit):
                batch = 100 if self.limit is None else min(100, self.limit - self.workload.mutations)
                self.workload.step(batch)
                ahead = self.workload.mutations / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    self.stop.wait(ahead)
        except Exception as exc:  # shown in the progress view; the chain keeps running
            self.error = f"{type(exc).__name__}: {exc}"


@dataclass
class MySqlDemoWriter:
    """Random MariaDB transactions (every column type, key changes, deletes, rollbacks) at a steady rate."""

    workload: MySqlWorkload
    rate: float
    stop: threading.Event = field(default_factory=threading.Event)
    error: str | None = None

    def run(self) -> None:
        started = time.monotonic()
        try:
            while not self.stop.is_set():
                self.workload.transaction()
                done = self.workload.transactions + self.workload.rollbacks
                ahead = done / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    self.stop.wait(ahead)
        except Exception as exc:  # shown in the progress view; the chain keeps running
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.workload.close()


def _wait_for_capture(child: Child, timeout_s: float = 60) -> None:
    """Until the MySQL capture has chosen its start position (what is written next is captured)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and child.proc is not None and child.proc.poll() is None:
        text = child.log.read_text(errors="replace") if child.log.exists() else ""
        tail = text.rsplit("MySQL source", 1)[-1] if "MySQL source" in text else ""
        if "no checkpoint for" in tail or "resuming" in tail:
            return
        time.sleep(0.2)


def run_chain(
    cfg: CdcflowConfig,
    config_path: Path | None,
    client: HBaseClient,
    stack_home: Path,
    progress_lines: Callable[[], list[str]],
    refresh_s: float = 2.0,
    mysql_admin: MySqlEndpoint | None = None,
    metrics_ports: dict[str, int] | None = None,
    status_url: str | None = None,
) -> None:
    """Start the demos, the captures and the pipeline; show progress until Ctrl-C (or the children die).
    `mysql_admin`: the local MariaDB's admin endpoint, for the MySQL demo (None: no MySQL part).
    `metrics_ports`: the Prometheus port of each child ("hbase", "mysql", "pipeline"); `status_url`: the
    status page's address, shown in the view."""
    run_dir = stack_home / "run"
    ports = metrics_ports or {}

    def metrics_args(name: str) -> list[str]:
        return ["--metrics-port", str(ports[name])] if ports.get(name) else []

    peer = Child("capture (cdcflow hbase run)", ["hbase", "run", *metrics_args("hbase")], run_dir / "peer.log")
    mysql = Child("capture (cdcflow mysql run)", ["mysql", "run", *metrics_args("mysql")], run_dir / "mysql.log")
    pipeline = Child("pipeline (cdcflow pipeline run)", ["pipeline", "run", *metrics_args("pipeline")],
                     run_dir / "pipeline.log")  # fmt: skip
    mysql_writer: MySqlDemoWriter | None = None
    if mysql_admin is not None and cfg.demo.enabled and cfg.demo.mysql_database:
        workload_db = MySqlWorkload(mysql_admin, cfg.demo.mysql_database, seed=int(time.time()))
        workload_db.create()
        mysql_writer = MySqlDemoWriter(workload_db, cfg.demo.mysql_transactions_per_second)
    children = [peer, *([mysql] if mysql_admin is not None else []), pipeline]
    writer: DemoWriter | None = None
    if cfg.demo.enabled:
        workload = HBaseWorkload(client, cfg.demo.tables, cfg.demo.rows_per_table, seed=int(time.time()))
        workload.create_tables(with_copies=True, exist_ok=True)
        writer = DemoWriter(workload, cfg.demo.mutations_per_second, cfg.demo.max_mutations)
    peer.start(config_path)
    if mysql_admin is not None:
        mysql.start(config_path)
        _wait_for_capture(mysql)
    if cfg.pipeline.sinks:
        pipeline.start(config_path)
    if writer is not None:
        threading.Thread(target=writer.run, name="demo-writer", daemon=True).start()
    if mysql_writer is not None:
        threading.Thread(target=mysql_writer.run, name="mysql-demo-writer", daemon=True).start()
    started = time.monotonic()
    interactive = sys.stdout.isatty()
    # SIGTERM (kill, a service manager) and SIGHUP (the terminal closed) stop the chain the way Ctrl-C
    # does: children first, then the summary. SIGINT is set too: a shell starts background jobs with it
    # ignored.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        while True:
            lines = [f"cdcflow run: {time.monotonic() - started:.0f}s  (Ctrl-C stops; logs in {run_dir})"]
            if status_url:
                lines.append(f"status page: {status_url}")
            lines.append("")
            if writer is not None:
                done = writer.workload.mutations
                error = f"  ERROR {writer.error}" if writer.error else ""
                rate = cfg.demo.mutations_per_second
                lines.append(
                    f"demo workload : {done} mutations into {', '.join(cfg.demo.tables)} ({rate:.0f}/s){error}"
                )
            if mysql_writer is not None:
                w = mysql_writer.workload
                error = f"  ERROR {mysql_writer.error}" if mysql_writer.error else ""
                lines.append(f"mysql demo    : {w.transactions} transactions ({w.rollbacks} rolled back) into "
                             f"{w.db}.{{{', '.join(WORKLOAD_TABLES)}}}{error}")  # fmt: skip
            for child in children:
                if child is not pipeline or cfg.pipeline.sinks:
                    lines.append(f"{child.name:32}: {child.state()}")
            lines += ["", "sinks:", *progress_lines()]
            if interactive:
                sys.stdout.write("\x1b[2J\x1b[H" + "\n".join(lines) + "\n")
            else:
                sys.stdout.write("\n".join(lines) + "\n\n")
            sys.stdout.flush()
            deadline = time.monotonic() + (refresh_s if interactive else max(refresh_s, 10))
            while time.monotonic() < deadline:
                for child in children:
                    if child is not pipeline or cfg.pipeline.sinks:
                        child.supervise(config_path)
                time.sleep(min(1.0, refresh_s))
    except (KeyboardInterrupt, BrokenPipeError):  # BrokenPipeError: whoever read our output is gone
        pass
    finally:
        if writer is not None:
            writer.stop.set()
        if mysql_writer is not None:
            mysql_writer.stop.set()
        print("\nstopping: pipeline, then capture ...", flush=True)
        stop_children([pipeline, mysql, peer])
    if writer is not None:
        print(f"\nwrote {writer.workload.mutations} demo mutations. Compare source and sinks:\n"
              "  .venv/bin/cdcflow pipeline run --available-now   # apply anything still in Kafka")  # fmt: skip
        for line in verify_commands(cfg, stack_home):
            print(f"  {line}")
        t = cfg.demo.tables[0]
        print(
            "while it runs, a rolling sample every 5 minutes (results on the status page):\n"
            f"  .venv/bin/cdcflow verify hbase {t} {t}_copy --max-versions 1000 --every 5m --sample 500"
        )
    if mysql_writer is not None:
        db = mysql_writer.workload.db
        tables = " ".join(f"{db}.{t}" for t in WORKLOAD_TABLES)
        print(
            f"\nwrote {mysql_writer.workload.transactions} MariaDB demo transactions. Compare MariaDB with Phoenix "
            f"and Delta:\n  .venv/bin/cdcflow verify mysql-phoenix {tables}\n"
            f"  .venv/bin/cdcflow verify mysql-delta --sink delta {tables}"
        )


def verify_commands(cfg: CdcflowConfig, stack_home: Path) -> list[str]:
    """The verify command of every demo HBase table against each of its copies (HBase sink, Delta state)."""
    lines = []
    for t in cfg.demo.tables:
        delta = stack_home / "pipeline" / "delta" / cfg.hbase.name / "default" / t
        lines.append(f".venv/bin/cdcflow verify hbase {t} {t}_copy --max-versions 1000")
        lines.append(f".venv/bin/cdcflow verify hbase-delta {t} {delta} --max-versions 1000")
    return lines


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt
