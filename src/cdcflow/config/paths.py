"""Where the stack keeps downloads (shared, cached) and running state (per stack home)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Downloads (Maven jars) shared by every stack home: $CDCFLOW_CACHE_DIR or ~/.cache/cdcflow."""
    base = os.environ.get("CDCFLOW_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cdcflow"
    )
    return Path(base)


def default_stack_home() -> Path:
    """Data, logs and the state file of the dev stack: $CDCFLOW_STACK_HOME or ~/.local/state/cdcflow/stack."""
    base = os.environ.get("CDCFLOW_STACK_HOME") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "cdcflow", "stack"
    )
    return Path(base)
