"""Test harness helpers (kazoo-style public testing module): session-wide real services.

`ServiceHarness` starts each service once, on first use, through the same `Stack` code as
`cdcflow stack up`, or attaches to an already-running stack when CDCFLOW_TEST_STACK_HOME
points at its home (then it never stops anything).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from cdcflow.stack import Stack
from cdcflow.stack.process import tail

EXISTING_STACK_ENV = "CDCFLOW_TEST_STACK_HOME"
SOAK_ENV = "CDCFLOW_SOAK"  # `make soak`: the long randomized tests at full size


def soak_size(quick: int, full: int) -> int:
    """A randomized test's size: `quick` in `make test`, `full` when CDCFLOW_SOAK=1 (`make soak`)."""
    return full if os.environ.get(SOAK_ENV, "") not in ("", "0") else quick


class ServiceHarness:
    def __init__(self, fresh_home: Path) -> None:
        existing = os.environ.get(EXISTING_STACK_ENV)
        self.reuse = bool(existing)
        self.stack = Stack(Path(existing) if existing else fresh_home)
        self.started: list[str] = []

    def endpoints(self, name: str) -> dict[str, Any]:
        if self.reuse:
            return self.stack.endpoints(name)
        if name not in self.started:
            self.stack.up([name])
            self.started.append(name)
        return self.stack.endpoints(name)

    def log_tails(self, lines: int = 60) -> dict[str, str]:
        return {name: tail(self.stack.log_path(name), lines) for name in self.started}

    def close(self) -> None:
        if not self.reuse:
            # A test session's stack is thrown away with its folder: no need to wait for HBase's
            # graceful shutdown (about 20 s at the end of every `make test`).
            self.stack.down(grace_s=3.0)


def unique_name(prefix: str) -> str:
    """Names that never collide across tests and runs (topics, tables, databases)."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"
