"""Test lanes on one shared stack (`make test`): the run's folder.

`make test` runs pytest with two worker processes (pytest-xdist, `-n 2`, the scheduler in tests/conftest.py).
The Spark test files run one after another on one worker: they are CPU-bound (a local Spark driver,
pipelines as subprocesses) and would only slow each other down side by side. Everything else (captures, fault
tests, Flink, unit tests, mostly waiting on servers) runs on the other worker meanwhile. Both use one stack in
the run's folder, started on first use under a lock (`ServiceHarness`) and stopped by the controlling process
at the end. A test that stops a service (Kafka down for 15 s, a server killed) starts a private one in its own
folder (`Stack(tmp_path / ...)`), so the other lane never sees it go.
"""

from __future__ import annotations

import os
from pathlib import Path

# The run's folder (the shared stack's home), set by the controlling process for its workers; not meant to be
# set by hand.
RUN_DIR_ENV = "CDCFLOW_TEST_RUN_DIR"


def run_dir() -> Path | None:
    value = os.environ.get(RUN_DIR_ENV)
    return Path(value) if value else None
