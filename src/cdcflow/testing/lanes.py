"""Two test lanes on one shared stack (`make test`): the run folder and the gate between lanes.

`make test` runs pytest with two worker processes (pytest-xdist, `-n 2`, the scheduler in tests/conftest.py).
The Spark test files run one after another on one worker: they are CPU-bound (a local Spark driver,
pipelines as subprocesses) and would only slow each other down side by side. Everything else (captures, fault tests,
Flink, unit tests, mostly waiting on servers) runs on the other worker meanwhile. Both use one stack,
started on first use under a lock (`ServiceHarness`) and stopped by the controlling process at the end.

A few tests stop a service the others share (Kafka down for 15 s); they are marked `exclusive` and run
while no other test runs. `LaneGate` is a reader-writer lock across the worker processes made of two
flock(2)ed files: every test holds the room shared, an exclusive test holds it alone; the turnstile is
taken on the way in, so the other lane's next tests queue behind a waiting exclusive test instead of
keeping the room busy for ever.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The run's folder (the shared stack's home and the gate's files), set by the controlling process for its
# workers; not meant to be set by hand.
RUN_DIR_ENV = "CDCFLOW_TEST_RUN_DIR"


def run_dir() -> Path | None:
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value else None


class LaneGate:
    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # Opened once per process: flock belongs to the open file, so each worker is one holder.
        self._turnstile = (folder / "turnstile.lock").open("a")
        self._room = (folder / "room.lock").open("a")

    @contextmanager
    def hold(self, *, exclusive: bool) -> Iterator[float]:
        """Hold the room for one test (alone when `exclusive`); yields the seconds spent waiting for it."""
        asked = time.monotonic()
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._room, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)
        try:
            yield time.monotonic() - asked
        finally:
            fcntl.flock(self._room, fcntl.LOCK_UN)

    def close(self) -> None:
        self._turnstile.close()
        self._room.close()
