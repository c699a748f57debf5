"""Where held rows wait: the open group's (until its end says whether they happened) and the prepared XA
transactions' (until XA COMMIT or XA ROLLBACK).

The capture's core decides what is held, undone, released or dropped; this carries it out. A prepared
transaction's rows are also written to the source's XA topic (xa.py) as part of the prepare group, so a
checkpoint past the XA PREPARE survives a restart: the next stream attempt reads them back from there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from cdcflow.clients.kafka import KafkaEndpoint, iter_to_end
from cdcflow.clients.kafka.producer import SyncProducer
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.txn_buffer import GroupBuffer, HeldRecord, RecordBuffer
from cdcflow.sources.mysql.xa import HoldingKey, check_complete

log = logging.getLogger(__name__)


class HeldRows:
    def __init__(self, source: str, xa_topic: str, bootstrap: KafkaEndpoint, producer: SyncProducer,
                 memory_mb: float, spill_dir: str | None) -> None:  # fmt: skip
        self.source = source
        self.xa_topic = xa_topic
        self.bootstrap = bootstrap
        self.producer = producer
        self.memory_mb = memory_mb  # per open group; beyond it, held rows spill to a temporary file
        self.spill_dir = spill_dir
        self.group: GroupBuffer | None = None  # the open group's
        self.xa: dict[str, RecordBuffer] = {}  # xid -> the rows of a prepared XA transaction
        self.garbage: list[bytes] = []  # XA-topic keys no stored checkpoint needs (deleted with the next one)

    def new_buffer(self, memory_mb: float | None) -> GroupBuffer:
        """(a prepared XA transaction's rows wait long and are rarely many: a small budget each)"""
        return GroupBuffer(int((memory_mb or self.memory_mb) * 2**20), self.spill_dir)

    # -- the open group --------------------------------------------------------------------------------

    def hold(self, records: list[HeldRecord]) -> None:
        """The records of one held rows event."""
        if self.group is None:
            self.group = self.new_buffer(None)
        self.group.start_event()
        for record in records:
            self.group.append(record)

    def undo(self, kept: int) -> int:
        """ROLLBACK TO SAVEPOINT: the records of the held rows events after the first `kept` go; how many."""
        return self.group.keep_events(kept) if self.group is not None else 0

    def take_group(self) -> GroupBuffer | None:
        """The open group's held rows, handed over at its end (the taker clears them)."""
        group, self.group = self.group, None
        return group

    def drop_group(self) -> int:
        """The group ended in ROLLBACK: its held rows go; how many."""
        group = self.take_group()
        dropped = len(group) if group is not None else 0
        if group is not None:
            group.clear()
        return dropped

    # -- prepared XA transactions ------------------------------------------------------------------------

    def load(self, start: Checkpoint) -> None:
        """A stream attempt from `start`: no open group; the held rows of the XA transactions `start` lists as
        prepared, from the XA topic, and anything else there (left by an earlier run) deleted."""
        self.drop_group()
        for held in self.xa.values():
            held.clear()
        self.xa = {}
        found: dict[tuple[str, str], dict[int, bytes]] = {}
        for rec in iter_to_end(self.bootstrap, self.xa_topic, timeout_s=120):
            key = HoldingKey.from_bytes(rec.key or b"")
            if key is None or key.source != self.source:
                continue
            rows = found.setdefault((key.xid, key.gtid), {})
            if rec.value is None:
                rows.pop(key.seq, None)
            else:
                rows[key.seq] = rec.value
        for (xid, gtid), rows in found.items():
            wanted = start.xa_prepared.get(xid)
            if wanted is None or wanted["gtid"] != gtid:
                for seq in rows:
                    self._delete(HoldingKey(self.source, xid, gtid, seq).to_bytes())
        for xid, wanted in start.xa_prepared.items():
            values = check_complete(xid, wanted["gtid"], int(wanted["records"]), found.get((xid, wanted["gtid"]), {}))
            held = self.new_buffer(4)
            for value in values:
                held.append(HeldRecord.from_bytes(value))
            self.xa[xid] = held
        if self.xa:
            log.info("%d prepared XA transactions wait for XA COMMIT/ROLLBACK: %s", len(self.xa),
                     ", ".join(sorted(self.xa)))  # fmt: skip

    def prepare(self, xid: str, gtid: str, send: Callable[[str, bytes, bytes], None]) -> int:
        """XA PREPARE in group `gtid`: the group's held rows wait under `xid`, in memory and in the XA topic
        (`send`: counted against the prepare group, so its checkpoint waits for them). How many."""
        held = self.take_group() or self.new_buffer(4)
        for seq, record in enumerate(held):
            send(self.xa_topic, HoldingKey(self.source, xid, gtid, seq).to_bytes(), record.to_bytes())
        old = self.xa.pop(xid, None)
        if old is not None:
            old.clear()
        self.xa[xid] = held
        return len(held)

    @property
    def waiting(self) -> int:
        """Prepared XA transactions holding rows of captured tables (others are tracked, not counted)."""
        return sum(1 for held in self.xa.values() if len(held))

    def complete(self, xid: str, prepared: dict[str, Any] | None) -> tuple[RecordBuffer | None, list[bytes]]:
        """XA COMMIT or ROLLBACK of `xid`: the rows held for it (None: prepared before the capture's start, so
        none), and their XA-topic keys, to delete once a stored checkpoint is past this group."""
        held = self.xa.pop(xid, None)
        if prepared is None or held is None:
            if held is not None:
                held.clear()
            return None, []
        return held, [HoldingKey(self.source, xid, prepared["gtid"], seq).to_bytes() for seq in range(len(held))]

    def delete_garbage(self) -> None:
        for key in self.garbage:
            self._delete(key)
        self.garbage = []

    def _delete(self, key: bytes) -> None:
        # A lost deletion leaves a record the next start deletes.
        self.producer.send(self.xa_topic, key, None, _ignore_ack)


def _ignore_ack(_err: object, _msg: object) -> None:
    """XA-topic deletions need no acknowledgement."""
