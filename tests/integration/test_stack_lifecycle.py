"""`cdcflow stack up/status/down` through the real CLI, on a stack home of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cdcflow.dev.stack.ports import is_free

CLI = [sys.executable, "-m", "cdcflow.cli.main"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def live(pid: int) -> bool:
    """Running and not a zombie (this sandbox's init may not reap orphans promptly)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return not stat[stat.rfind(")") + 2 :].startswith("Z")


def status(home: Path) -> tuple[int, list[dict[str, Any]]]:
    proc = cli("stack", "status", "--json", "--home", str(home), check=False)
    return proc.returncode, json.loads(proc.stdout)


def test_up_status_down_up(tmp_path: Path) -> None:
    """Two services are enough for the lifecycle; HBase and Phoenix start through the same code in every
    session (the test harness), and `stack up` with no names starts COMPONENTS (tests/unit/test_stack_units.py)."""
    home = tmp_path / "stack"
    started = ("kafka", "mariadb")
    try:
        cli("stack", "up", *started, "--home", str(home))
        rc, services = status(home)
        assert {s["name"] for s in services if s["healthy"]} == set(started), services
        pids = [s["pid"] for s in services]
        ports = [int(p) for s in services for k, p in s["endpoints"].items() if k in ("port",)] + [
            int(s["endpoints"][k].rsplit(":", 1)[1])
            for s in services
            for k in ("bootstrap_servers", "zk_quorum", "master", "regionserver")
            if k in s["endpoints"]
        ]

        # idempotent: a second `up` keeps the running processes
        cli("stack", "up", *started, "--home", str(home))
        assert [s["pid"] for s in status(home)[1]] == pids

        cli("stack", "down", "--home", str(home))
        assert not [pid for pid in pids if live(pid)], "a service process survived `down`"
        assert all(is_free(p) for p in ports), "a port is still bound after `down`"
        rc, services = status(home)
        assert rc == 1 and not any(s["running"] for s in services)

        # up again after down
        cli("stack", "up", "kafka", "--home", str(home))
        rc, services = status(home)
        assert [s["name"] for s in services if s["healthy"]] == ["kafka"], services
    finally:
        cli("stack", "down", "--home", str(home), check=False)
