"""Where the rows of prepared XA transactions wait: the source's XA topic (compacted), one record per row.

A checkpoint may pass an `XA PREPARE` only if the prepared rows survive a restart, so they are
written to the XA topic as part of the prepare group (acknowledged before any checkpoint after it)
and the checkpoint lists the prepared transactions with their row counts. `XA COMMIT` publishes
them, `XA ROLLBACK` drops them; their XA-topic records are deleted (tombstones) once a stored
checkpoint is past the completion. On start the capture reads back exactly what its checkpoint
lists, checks the counts, and deletes anything else (left by a run that stopped in between).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdcflow.errors import TerminalError

_SEP = "\x1f"


@dataclass(frozen=True)
class HoldingKey:
    source: str
    xid: str
    gtid: str  # the prepare group's GTID: one XA id can be prepared again after it completed
    seq: int

    def to_bytes(self) -> bytes:
        return _SEP.join((self.source, self.xid, self.gtid, str(self.seq))).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> HoldingKey | None:
        """None for keys of another shape (not written by cdcflow)."""
        parts = data.decode("utf-8", "replace").split(_SEP)
        if len(parts) != 4 or not parts[3].isdigit():
            return None
        return cls(parts[0], parts[1], parts[2], int(parts[3]))


def check_complete(xid: str, gtid: str, expected: int, found: dict[int, bytes]) -> list[bytes]:
    """The held rows of one prepared transaction in order, or a loud error if any is missing."""
    if sorted(found) != list(range(expected)):
        raise TerminalError(
            f"the XA topic lost rows of prepared XA transaction {xid} (prepared in {gtid}): the checkpoint "
            f"lists {expected}, the topic holds {len(found)}; its XA COMMIT could not be published completely"
        )
    return [found[i] for i in range(expected)]
