"""`cdcflow run`'s children: one that dies is started again with back-off, and says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdcflow.dev.demo.children import CHILD_RESTARTS, CHILD_UP, MAX_BACKOFF_S, Child

pytestmark = pytest.mark.unit


def wait_exit(child: Child) -> None:
    assert child.proc is not None
    child.proc.wait(60)


def test_a_child_that_dies_is_started_again_with_doubling_back_off(tmp_path: Path) -> None:
    child = Child("short-lived", ["--help"], tmp_path / "child.log")  # exits at once, like a crash
    child.start(None)
    assert child.label == "cdcflow --help" and CHILD_UP.labels(child.label)._value.get() == 1
    restarts = CHILD_RESTARTS.labels(child.label)._value.get()
    wait_exit(child)
    t = time.monotonic()
    child.supervise(None, now=t)
    assert CHILD_UP.labels(child.label)._value.get() == 0  # reported as ended (metric, then the status page)
    assert child.restart_at == t + 1.0 and "EXITED with 0; restarting in" in child.state()
    assert "ended (exit code 0" in child.log.read_text() and "starting it again in 1 s" in child.log.read_text()
    first = child.proc
    child.supervise(None, now=t + 0.5)  # not yet
    assert child.proc is first and child.restarts == 0
    child.supervise(None, now=t + 1.01)
    assert child.proc is not first and child.restarts == 1
    assert CHILD_RESTARTS.labels(child.label)._value.get() == restarts + 1
    assert CHILD_UP.labels(child.label)._value.get() == 1
    wait_exit(child)
    child.supervise(None, now=time.monotonic())
    assert "starting it again in 2 s" in child.log.read_text()  # doubled
    child.backoff_s = MAX_BACKOFF_S
    child.restart_at = None
    child.supervise(None)
    assert child.backoff_s == MAX_BACKOFF_S  # capped
    child.stop()
    assert child.restart_at is None  # a stopped child is not started again


def test_a_child_that_ran_a_minute_starts_again_at_the_shortest_back_off(tmp_path: Path) -> None:
    child = Child("long-lived", ["--help"], tmp_path / "child.log")
    child.start(None)
    wait_exit(child)
    child.backoff_s = 32.0
    child.supervise(None, now=child.started_at + 61)
    assert child.restart_at == child.started_at + 61 + 1.0


# A process whose stop never finishes (the pipeline's graceful stop can hang, e.g. while Spark starts under load).
STUCK_STOP = """
import logging, sys, threading, time
from cdcflow.cli.wiring import stop_on_signals
logging.basicConfig(level=logging.INFO)
stop = threading.Event()
stop_on_signals(stop, parent=int(sys.argv[1]), orphan_stop_s=1.0)
print("ready", flush=True)
stop.wait(60)
print("stop seen", flush=True)
time.sleep(60)
"""


def start_stuck(parent: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", STUCK_STOP, str(parent)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_an_orphaned_pipeline_whose_stop_hangs_exits_soon_after_the_signal() -> None:
    proc = start_stuck(parent=-1)  # not its parent: as if `cdcflow run` had died and it was re-parented
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(15) == 143
    finally:
        proc.kill()
    _, err = proc.communicate()
    assert "the parent process is gone and the pipeline did not stop within 1 s: exiting now" in err


def test_a_pipeline_with_its_parent_alive_is_left_to_stop_by_itself() -> None:
    proc = start_stuck(parent=os.getpid())  # its real parent is this test process, still alive
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "stop seen"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(3)  # three times the deadline an orphan gets: still running
    finally:
        proc.kill()
        proc.wait(15)
