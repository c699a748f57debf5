"""The stack's state file: which service runs where. Other commands and the tests read it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILE = "state.json"


@dataclass
class ServiceState:
    name: str
    pid: int | None
    start_ticks: int | None
    ports: dict[str, int]
    endpoints: dict[str, Any]
    log: str
    started_at: float
    extra: dict[str, Any] = field(default_factory=dict)


def load(home: Path) -> dict[str, ServiceState]:
    path = home / STATE_FILE
    if not path.exists():
        return {}
    raw = json.loads(path.read_text())
    return {name: ServiceState(**entry) for name, entry in raw.get("services", {}).items()}


def save(home: Path, services: dict[str, ServiceState]) -> None:
    """Write atomically, so a reader never sees half a file."""
    home.mkdir(parents=True, exist_ok=True)
    tmp = home / f".{STATE_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps({"services": {n: asdict(s) for n, s in services.items()}}, indent=2) + "\n")
    tmp.replace(home / STATE_FILE)
