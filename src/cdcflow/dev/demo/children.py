"""The child processes of `cdcflow run`, supervised: they end when `cdcflow run` ends, however it ends, and
one that dies is started again with back-off.

Each child runs in its own session (a Ctrl-C at the terminal reaches `cdcflow run` only, which then stops
the children in order), so no terminal signal reaches it once its parent is gone. Instead the kernel is
asked to send it SIGTERM when its parent dies (Linux `PR_SET_PDEATHSIG`): a SIGKILLed or SIGHUPed
`cdcflow run`, or one whose output pipe closed, leaves no child behind. A pipeline child's Spark JVM
follows its Python process: PySpark's gateway exits when its stdin pipe from the driver closes.

PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, so children are started from the
main thread only (the progress loop of `run_chain`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import Counter, Gauge

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
MAX_BACKOFF_S = 60.0
STABLE_AFTER_S = 60.0  # a child that ran this long before dying starts again at the shortest back-off


def die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A `preexec_fn`: SIGTERM to the child when its parent dies; exit at once if it already has."""

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent_pid:  # the parent died between fork and prctl
            os._exit(1)

    return preexec


# Served by `cdcflow run` itself (its metrics port is one of the status page's targets).
CHILD_UP = Gauge("cdcflow_run_child_up", "1 while the child process runs, 0 after it ended", ["child"])
CHILD_RESTARTS = Counter("cdcflow_run_child_restarts", "Times a child was started again after it ended", ["child"])


@dataclass
class Child:
    """One `cdcflow <args>` process, its log, and its restarts."""

    name: str
    args: list[str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    backoff_s: float = 1.0
    started_at: float = 0.0
    restart_at: float | None = None  # when a dead child is started again
    last_exit: str = ""

    def start(self, config: Path | None) -> None:
        cmd = [sys.executable, "-m", "cdcflow.cli.main", *self.args]
        if config is not None:
            cmd += ["--config", str(config)]
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=die_with_parent(os.getpid()))  # fmt: skip
        self.started_at = time.monotonic()
        self.restart_at = None
        CHILD_UP.labels(self.label).set(1)
        CHILD_RESTARTS.labels(self.label)  # the series exists (0) before the first restart

    @property
    def label(self) -> str:
        """The child's metric label: its command, e.g. `cdcflow mysql run`."""
        return " ".join(["cdcflow", *self.args[:2]])

    def state(self) -> str:
        if self.proc is None:
            return "not started"
        rc = self.proc.poll()
        restarted = f", restarted {self.restarts}x (last: {self.last_exit})" if self.restarts else ""
        if rc is None:
            return f"running (pid {self.proc.pid}){restarted}"
        wait = max(0.0, (self.restart_at or 0) - time.monotonic())
        return f"EXITED with {rc}; restarting in {wait:.0f} s; see {self.log}{restarted}"

    def supervise(self, config: Path | None, now: float | None = None) -> None:
        """Call regularly (from the main thread): a child that exited is started again after its back-off
        (1 s, doubling to 60 s; back to 1 s once a run lasted a minute), and says so in its log."""
        if self.proc is None or self.proc.poll() is None:
            return
        now = time.monotonic() if now is None else now
        if self.restart_at is None:
            CHILD_UP.labels(self.label).set(0)
            ran = now - self.started_at
            if ran >= STABLE_AFTER_S:
                self.backoff_s = 1.0
            self.restart_at = now + self.backoff_s
            self.last_exit = f"exit code {self.proc.returncode} after {ran:.0f} s"
            message = f"cdcflow run: {self.name} ended ({self.last_exit}); starting it again in {self.backoff_s:.0f} s"
            log.warning(message)
            with open(self.log, "a") as out:
                out.write(f"\n==== {message}\n")
            self.backoff_s = min(self.backoff_s * 2, MAX_BACKOFF_S)
        elif now >= self.restart_at:
            self.restarts += 1
            CHILD_RESTARTS.labels(self.label).inc()
            self.start(config)

    def stop(self, timeout_s: float = 60) -> None:
        self.restart_at = None
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def stop_children(children: list[Child]) -> None:
    """Stop the children in order, deaf to further SIGTERM/SIGINT/SIGHUP meanwhile: `timeout`, a service
    manager or an impatient second Ctrl-C sends another one, which would otherwise interrupt the stop
    half-way (the children would still end, by PR_SET_PDEATHSIG, but not in order). Each stop is bounded
    (SIGTERM, then SIGKILL after its timeout)."""
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        for child in children:
            child.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
