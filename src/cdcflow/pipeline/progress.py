"""Each sink's progress document (<checkpoint>/cdcflow-progress.json): what `cdcflow pipeline status`,
the live view of `cdcflow run` and the status page show. Plain files, no Spark: readers import this
module alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROGRESS_FILE = "cdcflow-progress.json"


def write_progress(checkpoint: Path, doc: dict[str, Any]) -> None:
    checkpoint.mkdir(parents=True, exist_ok=True)
    tmp = checkpoint / f".{PROGRESS_FILE}"
    tmp.write_text(json.dumps(doc))
    tmp.replace(checkpoint / PROGRESS_FILE)  # readers see the old document or the new one, never half of one


def read_progress(checkpoint_root: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(checkpoint_root.glob(f"*/{PROGRESS_FILE}")):
        out[path.parent.name] = json.loads(path.read_text())
    return out
