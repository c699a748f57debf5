"""`cdcflow run`'s children (issue #36): one that dies is started again with back-off, and says so."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cdcflow.demo.children import CHILD_RESTARTS, CHILD_UP, MAX_BACKOFF_S, Child

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
