"""`cdcflow run`: the whole default chain on the local stack, with a demo workload and a live view.

    demo workload → HBase → cdcflow peer → Kafka → pipeline → HBase copies + Delta state tables

The peer and the pipeline run as child processes (`cdcflow hbase run`, `cdcflow pipeline run`),
exactly as a user would run them, with logs under <stack home>/run/. This process writes the
demo workload and redraws the progress view; Ctrl-C stops everything in order (workload, then
the children with SIGTERM, which finish their in-flight work).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cdcflow.config import CdcflowConfig
from cdcflow.demo import HBaseWorkload
from cdcflow.hbase.client import HBaseClient


@dataclass
class Child:
    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self, config: Path | None) -> None:
        cmd = [sys.executable, "-m", "cdcflow.cli.main", *self.args]
        if config is not None:
            cmd += ["--config", str(config)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def state(self) -> str:
        if self.proc is None:
            return "not started"
        rc = self.proc.poll()
        return f"running (pid {self.proc.pid})" if rc is None else f"EXITED with {rc}; see {self.log}"

    def stop(self, timeout_s: float = 60) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


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


def run_chain(
    cfg: CdcflowConfig,
    config_path: Path | None,
    client: HBaseClient,
    stack_home: Path,
    progress_lines: Callable[[], list[str]],
    refresh_s: float = 2.0,
) -> None:
    """Start the demo, the peer and the pipeline; show progress until Ctrl-C (or the children die)."""
    run_dir = stack_home / "run"
    peer = Child("capture (cdcflow hbase run)", ["hbase", "run"], run_dir / "peer.log")
    pipeline = Child("pipeline (cdcflow pipeline run)", ["pipeline", "run"], run_dir / "pipeline.log")
    writer: DemoWriter | None = None
    if cfg.demo.enabled:
        workload = HBaseWorkload(client, cfg.demo.tables, cfg.demo.rows_per_table, seed=int(time.time()))
        workload.create_tables(with_copies=True, exist_ok=True)
        writer = DemoWriter(workload, cfg.demo.mutations_per_second, cfg.demo.max_mutations)
    peer.start(config_path)
    if cfg.pipeline.sinks:
        pipeline.start(config_path)
    if writer is not None:
        threading.Thread(target=writer.run, name="demo-writer", daemon=True).start()
    started = time.monotonic()
    interactive = sys.stdout.isatty()
    try:
        while True:
            lines = [f"cdcflow run: {time.monotonic() - started:.0f}s  (Ctrl-C stops; logs in {run_dir})", ""]
            if writer is not None:
                done = writer.workload.mutations
                error = f"  ERROR {writer.error}" if writer.error else ""
                rate = cfg.demo.mutations_per_second
                lines.append(
                    f"demo workload : {done} mutations into {', '.join(cfg.demo.tables)} ({rate:.0f}/s){error}"
                )
            lines.append(f"{peer.name:32}: {peer.state()}")
            if cfg.pipeline.sinks:
                lines.append(f"{pipeline.name:32}: {pipeline.state()}")
            lines += ["", "sinks:", *progress_lines()]
            if interactive:
                sys.stdout.write("\x1b[2J\x1b[H" + "\n".join(lines) + "\n")
            else:
                sys.stdout.write("\n".join(lines) + "\n\n")
            sys.stdout.flush()
            if peer.proc is not None and peer.proc.poll() is not None:
                break
            time.sleep(refresh_s if interactive else max(refresh_s, 10))
    except KeyboardInterrupt:
        pass
    finally:
        if writer is not None:
            writer.stop.set()
        print("\nstopping: pipeline, then capture ...")
        pipeline.stop()
        peer.stop()
    if writer is not None:
        t = cfg.demo.tables[0]
        delta = stack_home / "pipeline" / "delta" / "default" / t
        print(f"\nwrote {writer.workload.mutations} demo mutations. Compare source and sinks:\n"
              f"  .venv/bin/cdcflow pipeline run --available-now   # apply anything still in Kafka\n"
              f"  .venv/bin/cdcflow verify hbase {t} {t}_copy --max-versions 1000\n"
              f"  .venv/bin/cdcflow verify hbase-delta {t} {delta} --max-versions 1000")  # fmt: skip
