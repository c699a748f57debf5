"""Faults of the production-shaped HBase (`cdcflow stack up hbase-cluster`): a region server SIGKILLed or stopped
and kept down, or let back."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.zookeeper import ZooKeeper


class RegionServers:
    def __init__(self, endpoints: dict[str, Any]) -> None:
        self.zk_quorum = str(endpoints["zk_quorum"])
        self.znode_parent = str(endpoints["znode_parent"])
        self.servers: dict[int, dict[str, str]] = {int(i): s for i, s in endpoints["regionservers"].items()}

    def number_of(self, host: str, port: int) -> int:
        """Which of the cluster's region servers listens on host:port."""
        address = f"{host}:{port}"
        return next(i for i, s in self.servers.items() if s["address"] == address)

    def live(self) -> list[str]:
        """The region servers registered in ZooKeeper now (host,port,startcode)."""
        zk = ZooKeeper(self.zk_quorum)
        try:
            return zk.children(f"{self.znode_parent}/rs")
        finally:
            zk.close()

    def kill(self, number: int) -> int:
        """SIGKILL the region server and keep it down (until `release`); the pid it had."""
        Path(self.servers[number]["down_file"]).touch()
        pid = int(Path(self.servers[number]["pid_file"]).read_text().strip())
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self, number: int) -> int:
        """SIGTERM the region server (a clean shutdown) and keep it down (until `release`); the pid it had."""
        Path(self.servers[number]["down_file"]).touch()
        pid = int(Path(self.servers[number]["pid_file"]).read_text().strip())
        os.kill(pid, signal.SIGTERM)
        return pid

    def release(self, number: int) -> None:
        """Let a server kept down start again (its loop starts a new incarnation)."""
        Path(self.servers[number]["down_file"]).unlink(missing_ok=True)

    def wait_gone(self, number: int, timeout_s: float = 90.0) -> None:
        """Until ZooKeeper expired the killed server's session (the master then handles its crash)."""
        port = self.servers[number]["address"].rsplit(":", 1)[1]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not any(f",{port}," in rs for rs in self.live()):
                return
            time.sleep(0.5)
        raise AssertionError(f"region server {number} still registered after {timeout_s:.0f} s")
