"""The gate between `make test`'s two lanes: real flock(2) locks held by separate processes."""

from __future__ import annotations

import multiprocessing as mp
import time
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from cdcflow.testing.lanes import LaneGate

pytestmark = pytest.mark.unit


def hold_shared(folder: str, holding: Event, release: Event) -> None:
    gate = LaneGate(Path(folder))
    with gate.hold(exclusive=False):
        holding.set()
        release.wait(30)


def enter_shared(folder: str, entered: Event) -> None:
    gate = LaneGate(Path(folder))
    with gate.hold(exclusive=False):
        entered.set()


def test_both_lanes_hold_the_room_at_once(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    holding, release = ctx.Event(), ctx.Event()
    other = ctx.Process(target=hold_shared, args=(str(tmp_path), holding, release))
    other.start()
    try:
        assert holding.wait(30)
        with LaneGate(tmp_path).hold(exclusive=False) as waited_s:
            assert waited_s < 5
    finally:
        release.set()
        other.join(30)


def test_an_exclusive_test_waits_for_the_other_lane_and_then_keeps_it_out(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    holding, release, entered = ctx.Event(), ctx.Event(), ctx.Event()
    other = ctx.Process(target=hold_shared, args=(str(tmp_path), holding, release))
    other.start()
    assert holding.wait(30)
    gate = LaneGate(tmp_path)
    late: mp.process.BaseProcess | None = None
    try:
        # the other lane leaves its test after 1.5 s; the exclusive test can only start then
        releaser = ctx.Process(target=_set_later, args=(release, 1.5))
        releaser.start()
        with gate.hold(exclusive=True) as waited_s:
            assert waited_s >= 1.0, "the exclusive test started while the other lane was in a test"
            late = ctx.Process(target=enter_shared, args=(str(tmp_path), entered))
            late.start()
            assert not entered.wait(1.5), "the other lane started a test during the exclusive one"
        assert entered.wait(30), "the other lane never got back in"
        releaser.join(30)
    finally:
        release.set()
        other.join(30)
        if late is not None:
            late.join(30)


def _set_later(event: Event, delay_s: float) -> None:
    time.sleep(delay_s)
    event.set()
