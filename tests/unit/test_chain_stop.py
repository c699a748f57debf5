"""`cdcflow run`'s shutdown: a second SIGTERM (coreutils `timeout` sends one to the command and one
to its process group) must not interrupt stopping the children half-way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdcflow.dev.demo.chain import Child, stop_children

pytestmark = pytest.mark.unit

# A child that takes a while to stop on SIGTERM, like the pipeline finishing its batch.
SLOW_TO_STOP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1.0), sys.exit(0)))\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(0.1)\n"
)


def test_a_second_sigterm_during_the_stop_leaves_no_child_running(tmp_path: Path) -> None:
    children = []
    for name in ("pipeline", "capture"):
        child = Child(name, [], tmp_path / f"{name}.log")
        with open(child.log, "wb") as out:
            child.proc = subprocess.Popen([sys.executable, "-c", SLOW_TO_STOP], stdout=out, start_new_session=True)
        children.append(child)
    deadline = time.monotonic() + 30
    while not all(c.log.read_text().startswith("ready") for c in children):
        assert time.monotonic() < deadline
        time.sleep(0.05)

    def interrupt() -> None:
        raise KeyboardInterrupt

    handler = signal.signal(signal.SIGTERM, lambda *_: interrupt())  # what `cdcflow run` installs
    interrupted = False
    try:
        # SIGTERM to ourselves while the first child is still stopping
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
        stop_children(children)
        time.sleep(0.1)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # the caller's handler is back
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, handler)
        states = [c.proc.poll() for c in children if c.proc]
        for c in children:
            if c.proc and c.proc.poll() is None:
                c.proc.kill()
                c.proc.wait()
    assert not interrupted, "the second SIGTERM interrupted the stop"
    assert states == [0, 0]  # both stopped by their SIGTERM
