"""The local stack's endpoints, read from the state file the stack writes (`<home>/state.json`): how runtime code
(the CLI's defaults when a config names no server) finds the local services without importing the development
side that runs them (cdcflow.dev.stack writes the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cdcflow.errors import StackError

STATE_FILE = "state.json"


def endpoints(home: Path, name: str) -> dict[str, Any]:
    """Where the local stack's service `name` listens (its endpoints as the stack recorded them)."""
    path = home / STATE_FILE
    try:
        services = json.loads(path.read_text()).get("services", {}) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise StackError(f"the local stack's state file {path} cannot be read: {exc}") from exc
    entry = services.get(name)
    if not isinstance(entry, dict) or entry.get("pid") is None:
        raise StackError(f"{name} is not started in stack {home}; run `cdcflow stack up {name}`, or give its "
                         "address in the config")  # fmt: skip
    return dict(entry.get("endpoints") or {})
