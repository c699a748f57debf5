"""Test harness helpers (kazoo-style public testing module): session-wide real services.

`ServiceHarness` starts each service once, on first use, through the same `Stack` code as
`cdcflow stack up`, or attaches to an already-running stack when CDCFLOW_TEST_STACK_HOME
points at its home (then it never stops anything). When a test run has several worker processes
(`make test`: pytest-xdist, two lanes; see `lanes`), the workers share one stack in the run's folder:
each starts what it needs under a file lock, and the run's controlling process stops it at the end.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cdcflow.dev.stack import Stack, state_file
from cdcflow.dev.stack.process import tail
from cdcflow.dev.testing.lanes import run_dir

EXISTING_STACK_ENV = "CDCFLOW_TEST_STACK_HOME"
SOAK_ENV = "CDCFLOW_SOAK"  # `make soak`: the long randomized tests at full size


def soak_size(quick: int, full: int) -> int:
    """A randomized test's size: `quick` in `make test`, `full` when CDCFLOW_SOAK=1 (`make soak`)."""
    return full if os.environ.get(SOAK_ENV, "") not in ("", "0") else quick


class ServiceHarness:
    def __init__(self, fresh_home: Path) -> None:
        existing = os.environ.get(EXISTING_STACK_ENV)
        shared = run_dir()
        self.reuse = bool(existing)
        self.shared = not existing and shared is not None
        if shared is not None:
            fresh_home = shared / "stack"
        self.stack = Stack(Path(existing) if existing else fresh_home)
        self.started: list[str] = []

    def endpoints(self, name: str) -> dict[str, Any]:
        if self.reuse:
            return self.stack.endpoints(name)
        if name not in self.started:
            with self._starting():
                self.stack.up([name])  # idempotent: a service another worker started is left as it is
            self.started.append(name)
        return self.stack.endpoints(name)

    @contextmanager
    def _starting(self) -> Iterator[None]:
        if not self.shared:
            yield
            return
        self.stack.home.mkdir(parents=True, exist_ok=True)
        with (self.stack.home / ".start.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one worker starts a service while the others wait for it
            yield

    def log_tails(self, lines: int = 60) -> dict[str, str]:
        names = list(state_file.load(self.stack.home)) if self.shared else self.started
        return {name: tail(self.stack.log_path(name), lines) for name in names}

    def close(self) -> None:
        if not self.reuse and not self.shared:  # a shared stack is stopped by the run's controlling process
            # A test session's stack is thrown away with its folder: no need to wait for HBase's
            # graceful shutdown (about 20 s at the end of every `make test`).
            self.stack.down(grace_s=3.0)


def unique_name(prefix: str) -> str:
    """Names that never collide across tests and runs (topics, tables, databases)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"
