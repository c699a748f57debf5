"""The source position a MySQL capture resumes from, and the bookkeeping that decides when it may advance.

A checkpoint is written only for a transaction boundary, and only once Kafka acknowledged every
event of that transaction and of every transaction before it (`AckFrontier`). It is stored the way
Kafka Connect stores source offsets: as the newest record under the source's name in a compacted
topic, so a restart on any machine resumes from the same place.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

from cdcflow.errors import TerminalError


@dataclass(frozen=True)
class Checkpoint:
    gtid_state: str | None  # MariaDB: last committed GTID per domain ("0-1-100,1-2-7"); resume point
    file: str  # binlog file and end position of the last committed transaction (informative on MariaDB)
    pos: int
    server_id: int = 0
    ts_ms: int = 0  # source time of that transaction
    # Snapshot progress per table: {"db.table": {"last_key": [...] | None, "done": bool, "rows": n}}
    snapshot: dict[str, Any] = field(default_factory=dict)
    # Prepared XA transactions not yet committed or rolled back at this point of the stream:
    # {xid: {"gtid": prepare group's GTID, "records": n}}; their rows wait in the source's XA topic.
    xa_prepared: dict[str, Any] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return orjson.dumps({**asdict(self), "written_ms": int(time.time() * 1000)})

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        try:
            raw = orjson.loads(data)
            return cls(
                gtid_state=raw["gtid_state"], file=str(raw["file"]), pos=int(raw["pos"]),
                server_id=int(raw.get("server_id", 0)), ts_ms=int(raw.get("ts_ms", 0)),
                snapshot=dict(raw.get("snapshot") or {}), xa_prepared=dict(raw.get("xa_prepared") or {}),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise TerminalError(f"stored MySQL checkpoint is unreadable ({exc}): {data[:200]!r}") from exc


class PendingTxn:
    """Acknowledgements still owed for one source transaction. `on_delivery` is the producer callback
    of all its records (librdkafka's shape: error or None, message)."""

    __slots__ = ("checkpoint", "frontier", "outstanding", "released")

    def __init__(self, frontier: AckFrontier) -> None:
        self.outstanding = 0
        self.checkpoint: Checkpoint | None = None  # set at its commit event
        self.frontier = frontier
        # Done once a stored checkpoint covers this transaction (clean-up of XA topic records).
        self.released: list[bytes] = []

    def on_delivery(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.outstanding -= 1
        elif self.frontier.failure is None:
            self.frontier.failure = f"{err.str() if hasattr(err, 'str') else err}"


class AckFrontier:
    """Transactions in source order; the frontier is the newest commit with nothing unacknowledged before it."""

    def __init__(self) -> None:
        self._txns: deque[PendingTxn] = deque()
        self.failure: str | None = None  # first delivery failure seen: the capture must resume from a checkpoint
        self.released: list[bytes] = []

    def begin(self) -> PendingTxn:
        txn = PendingTxn(self)
        self._txns.append(txn)
        return txn

    def sending(self, txn: PendingTxn) -> None:
        txn.outstanding += 1

    def delivered(self, txn: PendingTxn, error: str | None) -> None:
        txn.on_delivery(error, None)

    def commit(self, txn: PendingTxn, checkpoint: Checkpoint) -> None:
        txn.checkpoint = checkpoint

    def advance(self) -> Checkpoint | None:
        """Pop every leading transaction that is committed and fully acknowledged; the newest one's checkpoint.
        Their `released` items collect in `self.released` until the caller takes them."""
        newest = None
        while self._txns and self._txns[0].checkpoint is not None and self._txns[0].outstanding == 0:
            txn = self._txns.popleft()
            newest = txn.checkpoint
            self.released.extend(txn.released)
        return newest

    @property
    def open_transactions(self) -> int:
        return len(self._txns)
