"""One writer per target table: an ephemeral znode per target, held while a sink writes to it.

Two pipelines (or two sinks of one pipeline) applying changes to the same Phoenix table would
each compare positions and write without seeing the other: an older change can land after a
newer one. The lease makes the second writer fail loudly instead, naming the first.

The znode is ephemeral, so a writer that dies releases it when its ZooKeeper session times out.
A writer restarted on the same host after a crash takes its own stale lease over at once (the
old process id is gone); anything else waits up to the session timeout for it to disappear.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any

from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.errors import TerminalError

log = logging.getLogger(__name__)
LEASE_ROOT = "/cdcflow/writers"


class WriterConflictError(TerminalError):
    """Another live writer holds the target table."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WriterLeases:
    def __init__(self, zk_quorum: str, owner: dict[str, Any], session_timeout_s: float = 10.0) -> None:
        self.zk = ZooKeeper(zk_quorum, timeout_s=session_timeout_s)
        self.owner = {**owner, "host": socket.gethostname(), "pid": os.getpid(), "since_ms": int(time.time() * 1000)}
        self.held: set[str] = set()
        self.session_lost = False
        self.zk.on_new_session(self._lost)

    def _lost(self) -> None:
        # Our ephemerals are gone: someone else may have taken a target meanwhile. Re-check
        # before the next write (`check`).
        self.session_lost = True

    def _path(self, target: str) -> str:
        return f"{LEASE_ROOT}/{target.replace('/', '%2F')}"

    def acquire(self, target: str) -> None:
        path, data = self._path(target), json.dumps(self.owner).encode()
        deadline = time.monotonic() + self.zk.timeout_s * 1.5
        while True:
            if self.zk.try_create_ephemeral(path, data):
                self.held.add(target)
                log.info("writer lease on %s taken (%s)", target, path)
                return
            raw = self.zk.get(path)
            if raw is None:
                continue  # released between the two calls
            holder = json.loads(raw)
            if holder == self.owner:
                self.held.add(target)
                return
            same_host = holder.get("host") == self.owner["host"]
            holder_alive = _alive(int(holder.get("pid", 0))) if same_host else None
            if holder_alive is False:
                log.info("writer lease on %s: taking over from dead process %s", target, holder.get("pid"))
                self.zk.delete(path)
                continue
            if holder_alive or time.monotonic() >= deadline:
                raise WriterConflictError(
                    f"{target} is already written by sink {holder.get('sink')!r} (checkpoint "
                    f"{holder.get('checkpoint')}, host {holder.get('host')}, pid {holder.get('pid')}); two writers "
                    "would apply changes out of order. Stop the other pipeline, or give this sink another target "
                    "with table_map"
                )
            time.sleep(0.5)

    def check(self) -> None:
        """Before writing: after a lost session, every lease is taken again (or the write refused)."""
        if not self.session_lost:
            return
        self.session_lost = False
        for target in sorted(self.held):
            self.held.discard(target)
            self.acquire(target)

    def close(self) -> None:
        self.zk.close()
