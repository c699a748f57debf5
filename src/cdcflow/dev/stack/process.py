"""Start, identify and stop the background service processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def spawn(cmd: list[str], log_path: Path, cwd: Path, env: dict[str, str] | None = None) -> int:
    """Start `cmd` detached in its own session (so `down` can kill its whole group); log to `log_path`."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    return proc.pid


def start_ticks(pid: int) -> int | None:
    """The process start time in clock ticks since boot, to tell our process from a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after its closing paren are plain.
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19])


def is_ours(pid: int | None, ticks: int | None) -> bool:
    """True if `pid` runs and is the same process we started (not a zombie, not a reused pid)."""
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    if state[state.rfind(")") + 2 :].startswith("Z"):
        return False
    return ticks is None or start_ticks(pid) == ticks


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg(0) also succeeds while only zombies remain; look for a live member.
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(pid: int, grace_s: float) -> bool:
    """SIGTERM the process group of `pid`, wait up to `grace_s`, then SIGKILL. True if it was running."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(pid)
        if not _group_alive(pid):
            return True
        time.sleep(0.2)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    for _ in range(50):
        _reap(pid)
        if not _group_alive(pid):
            break
        time.sleep(0.1)
    return True


def _reap(pid: int) -> None:
    """Collect the exit status if the process is our child (it is when tests start the stack in-process)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return "\n".join(data.splitlines()[-lines:])
