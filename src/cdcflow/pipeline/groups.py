"""Sinks that share one query (a `group`): each change is read from Kafka and parsed once, then handed to every
sink of the group (docs/decisions/0022-sink-groups.md).

What a shared query must not lose is what one query per sink gives for free: a sink that fails must not stop the
others, and it must later apply exactly what it missed. So each sink of a group keeps a small ledger of its own
(`<checkpoint root>/<sink>/cdcflow-group.json`) beside the group's Spark checkpoint (`<root>/group.<name>`):

- `joined`: the sink is applied in every batch of the group's query; the group's checkpoint is its position.
- behind (`joined` false): the sink applies what it has not applied from bounded Kafka reads of its own, a
  chunk at a time, from `position` up to the end of the group's newest committed batch. A chunk is written to
  the ledger before it is applied (`pending`), so a crash replays the same offsets under the same chunk id,
  which the sinks' own guards see as a replay. When its position is the start of a group batch, the sink joins
  that batch.

A sink falls behind when its part of a group batch fails (from the batch's start), when it is added to a group
that has run before (from its own old checkpoint, or the topics' start), and when its offsets are reset.
Each time it falls behind it starts a new catch-up `episode`, whose chunks the sinks see as batches of a query
of its own (`<group query id>.catch-up.<episode>`): the chunk ids restart at 0 under a query id no batch
used before.

Pure bookkeeping: no Spark, no Kafka client. Positions are Spark's Kafka offsets: topic -> partition (a
string, as Spark writes it) -> the next offset to read.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cdcflow.errors import ConfigError

Positions = dict[str, dict[str, int]]
LEDGER_FILE = "cdcflow-group.json"
GROUP_PREFIX = "group."  # a group's checkpoint folder: group.<name> (sink names have no dots)
CATCH_UP = "catch-up"


def group_folder(root: Path, group: str) -> Path:
    return root / f"{GROUP_PREFIX}{group}"


@dataclass
class Chunk:
    """Offsets a behind sink applies as one batch: from `start` (a partition missing there: from its first
    record) up to `end`."""

    id: int
    start: Positions
    end: Positions


@dataclass
class Ledger:
    group: str
    joined: bool = True
    position: Positions = field(default_factory=dict)  # behind: what the sink has applied up to
    episode: int = 0  # how many times the sink fell behind
    next_chunk: int = 0
    pending: Chunk | None = None
    reason: str = ""  # why it fell behind (the status page shows it)

    def catch_up_query(self, group_query: str) -> str:
        return f"{group_query}.{CATCH_UP}.{self.episode}"

    def fall_behind(self, position: Positions, reason: str) -> None:
        """Behind from `position`, in a new episode (an earlier episode's chunks are never replayed)."""
        self.joined = False
        self.position = {t: dict(p) for t, p in position.items()}
        self.episode += 1
        self.next_chunk = 0
        self.pending = None
        self.reason = reason


def ledger_path(root: Path, sink: str) -> Path:
    return root / sink / LEDGER_FILE


def load_ledger(root: Path, sink: str) -> Ledger | None:
    path = ledger_path(root, sink)
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        pending = doc.get("pending")
        return Ledger(
            group=str(doc["group"]), joined=bool(doc["joined"]), position=_positions(doc.get("position") or {}),
            episode=int(doc.get("episode", 0)), next_chunk=int(doc.get("next_chunk", 0)),
            pending=None if not pending else Chunk(int(pending["id"]), _positions(pending["start"]),
                                                   _positions(pending["end"])),
            reason=str(doc.get("reason", "")),
        )  # fmt: skip
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"sink {sink}: its group ledger {path} is unreadable ({exc}); it says which changes the "
                          "sink has applied, so cdcflow will not guess: restore it, or remove it to have the sink "
                          "apply its group's topics from their start again (idempotent)") from exc  # fmt: skip


def save_ledger(root: Path, sink: str, ledger: Ledger) -> None:
    path = ledger_path(root, sink)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(asdict(ledger), indent=1, sort_keys=True))
    os.replace(tmp, path)  # readers see the old ledger or the new one


def _positions(doc: Any) -> Positions:
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in dict(doc).items()}


# --- the group's Spark checkpoint -------------------------------------------------------------------------------


def _numbered(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.glob("*") if p.name.isdigit()) if folder.is_dir() else []


def batch_end(checkpoint: Path, batch: int) -> Positions | None:
    """The Kafka offsets group batch `batch` ends at (Spark's `offsets/<batch>`), None when not written."""
    path = checkpoint / "offsets" / str(batch)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) != 3:
        raise ConfigError(f"{path} has {len(lines)} lines; a cdcflow query has one Kafka source (a version line, the "
                          "batch metadata, the source's offsets)")  # fmt: skip
    return _positions(json.loads(lines[2]))


def batch_start(checkpoint: Path, batch: int) -> Positions:
    """Where group batch `batch` starts: where the batch before it ended ({}: every partition from its first
    record, as the group's query starts)."""
    return (batch_end(checkpoint, batch - 1) or {}) if batch > 0 else {}


def newest_committed(checkpoint: Path) -> tuple[int, Positions] | None:
    """The group's newest applied batch and the offsets it ends at; None before its first."""
    commits = _numbered(checkpoint / "commits")
    if not commits:
        return None
    end = batch_end(checkpoint, commits[-1])
    return None if end is None else (commits[-1], end)


# --- offsets arithmetic --------------------------------------------------------------------------------------


def same_position(a: Positions, b: Positions) -> bool:
    """Whether two positions name the same offsets of the same partitions."""
    return {(t, p, o) for t, ps in a.items() for p, o in ps.items()} == {
        (t, p, o) for t, ps in b.items() for p, o in ps.items()
    }


def reached(position: Positions, target: Positions) -> bool:
    """Whether `position` is at or past `target` in each of target's partitions (a missing one: not)."""
    return all(position.get(t, {}).get(p, -1) >= o for t, ps in target.items() for p, o in ps.items())


def chunk_end(position: Positions, target: Positions, first: Positions, limit: int) -> Positions:
    """Where the next chunk from `position` towards `target` ends: at most `limit` records in all, shared
    between the partitions in proportion to what each has left, as Spark's maxOffsetsPerTrigger does.
    `first` holds the first offsets of partitions `position` lacks (those start there)."""
    left: dict[tuple[str, str], tuple[int, int]] = {}
    for t, ps in target.items():
        for p, end in ps.items():
            start = position.get(t, {}).get(p, first.get(t, {}).get(p, 0))
            if end > start:
                left[(t, p)] = (start, end)
    total = sum(end - start for start, end in left.values())
    out: Positions = {t: dict(ps) for t, ps in position.items()}
    for (t, p), (start, end) in left.items():
        share = end - start if total <= limit else max(1, (end - start) * limit // total)
        out.setdefault(t, {})[p] = min(end, start + share)
    for t, ps in target.items():  # partitions with nothing left are at their target (or past it)
        for p, end in ps.items():
            out.setdefault(t, {}).setdefault(p, max(end, first.get(t, {}).get(p, end)))
    return out


def records_between(start: Positions, end: Positions, first: Positions) -> int:
    return sum(
        max(0, o - start.get(t, {}).get(p, first.get(t, {}).get(p, 0))) for t, ps in end.items() for p, o in ps.items()
    )
