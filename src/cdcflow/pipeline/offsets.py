"""`cdcflow pipeline offsets show | reset`: where each sink's query stands in Kafka, and moving it while the
pipeline is stopped (Kafka Connect's KIP-875 for sink connectors).

A sink's position is its Spark checkpoint: `offsets/<batch>` holds, per batch, the Kafka offsets the batch
ends at; `commits/<batch>` says the batch was applied. A reset appends one more batch, already
committed, whose offsets are the new position, so the next batch starts there. Batch numbers keep
growing: the sinks' own idempotence by batch number (the Delta sinks' transaction versions, the
progress records) still holds, and only Kafka offsets move. Moving back replays changes the sinks
already hold; every sink guards by source position, so they change nothing. Moving forward skips
changes for good.

A running pipeline holds `<checkpoint root>/.cdcflow-pipeline.lock` (flock); a reset takes it too, so
it is refused while the pipeline runs. (Only for a checkpoint root on a local file system.)
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cdcflow.clients.kafka import KafkaEndpoint
from cdcflow.clients.kafka.client import partition_offsets
from cdcflow.errors import ConfigError

LOCK_FILE = ".cdcflow-pipeline.lock"
Positions = dict[str, dict[str, int]]  # topic -> partition (as Spark writes it, a string) -> offset


class PipelineRunning(ConfigError):
    """The checkpoint root is in use by a running pipeline."""


@contextmanager
def checkpoint_lock(root: Path, what: str) -> Iterator[None]:
    """Exclusive use of a checkpoint root: held by `pipeline run` while it runs, and by a reset."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise PipelineRunning(f"checkpoint root {root} is in use by {holder}: stop it before {what}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()})".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


@dataclass(frozen=True)
class SinkPosition:
    sink: str
    batch: int | None  # the last batch whose offsets are written (None: the query never ran)
    committed: bool  # that batch was applied (else it is replayed first on the next start)
    positions: Positions


def _batches(folder: Path) -> list[int]:
    return sorted(int(p.name) for p in folder.glob("*") if p.name.isdigit()) if folder.is_dir() else []


def read_position(root: Path, sink: str) -> SinkPosition:
    folder = root / sink
    if not folder.is_dir():
        raise ConfigError(f"no checkpoint for sink {sink!r} under {root} (sinks there: "
                          f"{', '.join(sorted(p.name for p in root.iterdir() if p.is_dir())) or 'none'})")  # fmt: skip
    batches = _batches(folder / "offsets")
    if not batches:
        return SinkPosition(sink, None, False, {})
    last = batches[-1]
    lines = (folder / "offsets" / str(last)).read_text().splitlines()
    if len(lines) != 3 or not lines[0].startswith("v"):
        raise ConfigError(f"sink {sink}: offsets/{last} has {len(lines)} lines; cdcflow's queries have one Kafka "
                          "source (a version line, the batch metadata, the source's offsets)")  # fmt: skip
    return SinkPosition(sink, last, last in _batches(folder / "commits"), json.loads(lines[2]))


def target_positions(kafka: KafkaEndpoint, current: Positions, to: str) -> Positions:
    """`earliest`, `latest`, or an ISO time / epoch milliseconds: the offsets of those topic partitions there."""
    timestamp_ms: int | None = None
    if to not in ("earliest", "latest"):
        timestamp_ms = _timestamp_ms(to)
    out: Positions = {}
    for topic, partitions in current.items():
        found = partition_offsets(kafka, topic, [int(p) for p in partitions], to if timestamp_ms is None else None,
                                  timestamp_ms)  # fmt: skip
        out[topic] = {str(p): o for p, o in found.items()}
    return out


def _timestamp_ms(text: str) -> int:
    if re.fullmatch(r"\d{10,16}", text):
        return int(text)
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--to {text!r}: earliest, latest, epoch milliseconds or an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def write_reset(root: Path, sink: str, positions: Positions) -> int:
    """Append a committed batch ending at `positions`; its number."""
    current = read_position(root, sink)
    if current.batch is None:
        raise ConfigError(f"sink {sink} has not run yet: its first start reads from the beginning of its topics")
    if not current.committed:
        raise ConfigError(f"sink {sink}: batch {current.batch} was planned but not applied; start the pipeline once "
                          "so it finishes, then reset")  # fmt: skip
    folder = root / sink
    lines = (folder / "offsets" / str(current.batch)).read_text().splitlines()
    batch = current.batch + 1
    _write_atomically(folder / "offsets" / str(batch), f"{lines[0]}\n{lines[1]}\n{json.dumps(positions)}")
    commit = (folder / "commits" / str(current.batch)).read_text()
    _write_atomically(folder / "commits" / str(batch), commit)
    return batch


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.cdcflow-tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
