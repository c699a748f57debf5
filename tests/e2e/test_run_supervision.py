"""`cdcflow run`'s children end when it ends, however it ends: SIGKILLed or hung up, the parent
leaves no child process and no Spark JVM behind within 20 s.

The parent here is a small stand-in for `cdcflow run` that starts real `cdcflow pipeline run` (with its
Spark JVM, reading the test's Kafka into a console sink) and `cdcflow ui` children through the same
`demo.children.Child` and supervises them the same way; starting the whole chain would need HBase too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from cdcflow.dev.testing import unique_name

PARENT = """
import signal, sys, time
from pathlib import Path
from cdcflow.dev.demo.children import Child
signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as from a terminal, also when the tests run under nohup
config, logs, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
commands = {"pipeline": ["pipeline", "run"], "ui": ["ui", "--port", "0"]}
kids = [Child(n, commands[n], logs / f"{n}.log") for n in names]
for k in kids:
    k.start(config)
print(" ".join(str(k.proc.pid) for k in kids), flush=True)
while True:
    for k in kids:
        k.supervise(config)
    time.sleep(0.5)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def children_of(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                continue
    return out


def start_parent(tmp_path: Path, config: Path, names: str) -> tuple[subprocess.Popen[str], list[int]]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(config), str(tmp_path), names],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == len(names.split(",")), "the stand-in parent did not start its children"
    return parent, pids


def wait_gone(pids: list[int], timeout_s: float = 20.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.2)
    return [p for p in pids if alive(p)]


def test_children_and_the_spark_jvm_end_with_a_killed_or_hung_up_parent(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    topic = unique_name("supervised")
    config = tmp_path / "cdcflow.yaml"
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": kafka["bootstrap_servers"]},
        "hbase": {"zk_quorum": hbase["zk_quorum"]},
        "pipeline": {"topics": topic, "checkpoint_dir": str(tmp_path / "checkpoints"),
                     "dead_letter_topic": f"{topic}-dead", "trigger_seconds": 1,
                     "sinks": [{"name": "out", "type": "console"}]},
    }))  # fmt: skip

    # SIGKILL: nothing runs in the parent any more; the kernel's parent-death signal stops the children
    parent, (pipeline, ui) = start_parent(tmp_path, config, "pipeline,ui")
    deadline = time.monotonic() + 120
    jvms: list[int] = []
    try:
        while not jvms:  # the pipeline's Spark JVM is up
            jvms = [p for p in children_of(pipeline) if b"java" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert time.monotonic() < deadline and alive(pipeline), (tmp_path / "pipeline.log").read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(3)  # let it get to its query
    finally:
        parent.kill()
    parent.wait()
    left = wait_gone([pipeline, ui, *jvms])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running 20 s after the parent's SIGKILL: {left} (pipeline {pipeline}, JVM {jvms})"

    # SIGHUP (the terminal closed): the parent ends without stopping anything itself
    parent, (ui,) = start_parent(tmp_path, config, "ui")
    time.sleep(2)
    parent.send_signal(signal.SIGHUP)
    parent.wait(30)
    left = wait_gone([ui])
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, "the ui child outlived its hung-up parent"
