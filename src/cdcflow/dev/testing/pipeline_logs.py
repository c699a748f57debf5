"""Reading a pipeline process's log from a test: the moments a fault is timed by."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path


def wait_for_a_fold(proc: subprocess.Popen[bytes], log_path: Path, after: int, sink: str = "state") -> str:
    """The state path of the first fold of `sink` the pipeline logs as started after byte `after` of its log."""
    deadline = time.monotonic() + 300
    pattern = re.compile(rf"sink {re.escape(sink)}: (\S+): folding \d+ changes")
    while True:
        text = log_path.read_bytes()[after:].decode(errors="replace")
        m = pattern.search(text)
        if m:
            return m.group(1)
        assert proc.poll() is None, f"pipeline exited early:\n{text[-3000:]}"
        assert time.monotonic() < deadline, "no fold started"
        time.sleep(0.02)
