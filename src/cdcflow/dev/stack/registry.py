"""The local stack's schema registry: cdcflow's own, with Confluent's REST API (cdcflow.dev.registry, decision
0017), for Avro topics (`mysql.output.serialization: avro`). Not in the default stack: `cdcflow stack up
registry`. Its schemas live in <home>/registry/data/schemas.log, so they survive a restart.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from cdcflow.dev.stack import process
from cdcflow.dev.stack.service import Service


class RegistryService(Service):
    name = "registry"
    port_names: tuple[str, ...] = ("http",)
    start_timeout_s = 60.0
    stop_grace_s = 10.0

    def install(self) -> None:
        """Nothing to download: it is part of cdcflow."""

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        cmd = [sys.executable, "-m", "cdcflow.dev.registry", "--port", str(ports["http"]), "--data", str(home / "data")]
        pid = process.spawn(cmd, log, cwd=home)
        return pid, {"url": f"http://127.0.0.1:{ports['http']}"}

    def check(self, endpoints: dict[str, Any]) -> str:
        with urllib.request.urlopen(f"{endpoints['url']}/subjects", timeout=3) as resp:
            subjects = json.loads(resp.read())
        return f"{len(subjects)} subject(s)"
