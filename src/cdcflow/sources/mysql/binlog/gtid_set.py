"""MySQL GTID sets: the text form servers print and the binary form of the binlog.

A MySQL GTID is `<server uuid>:<transaction number>`; a GTID set holds, per server UUID, the
numbers as inclusive intervals: `3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,<uuid>:1-3`. After a
failover a set holds several UUIDs (one per server that ever originated transactions).

The binary form (MySQL's `Gtid_set::encode`, used by the PREVIOUS_GTIDS event and by
COM_BINLOG_DUMP_GTID): the number of UUIDs (8 bytes little-endian), then per UUID its 16 bytes,
the number of intervals (8 bytes) and each interval as start and end, 8 bytes each, the end
*exclusive*. MySQL 8.3's tagged GTIDs use another format (not produced by 8.0 servers); a set
that announces them is refused.

Pure functions of text and bytes: no I/O.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError

_U64 = struct.Struct("<Q")
_UUID_TEXT = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
MAX_GNO = 2**63 - 1  # MySQL's GNO_END - 1


def _normalized(intervals: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, overlapping and adjacent intervals joined (inclusive bounds)."""
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return tuple((s, e) for s, e in out)


@dataclass(frozen=True)
class GtidSet:
    """Server UUID (lower-case text) → its transaction numbers as sorted inclusive intervals."""

    intervals: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, intervals: Mapping[str, Iterable[tuple[int, int]]]) -> GtidSet:
        for sid, spans in intervals.items():
            for start, end in spans:
                if not 1 <= start <= end <= MAX_GNO:
                    raise ValueError(f"GTID interval {sid}:{start}-{end} is out of range (1 ≤ start ≤ end < 2^63)")
        return cls({sid: n for sid, spans in sorted(intervals.items()) if (n := _normalized(spans))})

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """`@@gtid_executed` / `gtid_purged` text (whitespace and newlines between UUIDs allowed)."""
        spans: dict[str, list[tuple[int, int]]] = {}
        for part in (p.strip() for p in text.replace("\n", "").split(",")):
            if not part:
                continue
            sid_text, *ranges = part.split(":")
            sid = _sid(sid_text.strip())
            if not ranges:
                raise ValueError(f"GTID set {text!r}: {sid_text!r} has no transaction numbers")
            for r in ranges:
                m = re.fullmatch(r"\s*(\d+)(?:\s*-\s*(\d+))?\s*", r)
                if m is None:
                    raise ValueError(f"GTID set {text!r}: {r!r} is not a number or a range a-b")
                start, end = int(m[1]), int(m[2] or m[1])
                if start > end:
                    raise ValueError(f"GTID set {text!r}: the range {r!r} runs backwards")
                spans.setdefault(sid, []).append((start, end))
        return cls.of(spans)

    def __str__(self) -> str:
        return ",".join(
            sid + "".join(f":{s}" if s == e else f":{s}-{e}" for s, e in spans) for sid, spans in self.intervals.items()
        )

    def __contains__(self, gtid: object) -> bool:
        if not isinstance(gtid, tuple) or len(gtid) != 2:
            return False
        sid, gno = gtid
        return any(s <= gno <= e for s, e in self.intervals.get(str(sid).lower(), ()))

    def __iter__(self) -> Iterator[str]:
        return iter(self.intervals)

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def add(self, sid: str, gno: int) -> GtidSet:
        """This set plus one transaction."""
        return self.union(GtidSet.of({_sid(sid): [(gno, gno)]}))

    def union(self, other: GtidSet) -> GtidSet:
        merged: dict[str, list[tuple[int, int]]] = {sid: list(spans) for sid, spans in self.intervals.items()}
        for sid, spans in other.intervals.items():
            merged.setdefault(sid, []).extend(spans)
        return GtidSet.of(merged)

    def issubset(self, other: GtidSet) -> bool:
        """Every transaction of this set is in `other` (a server's executed set must cover a
        checkpoint's: else the history changed under it)."""
        for sid, spans in self.intervals.items():
            theirs = other.intervals.get(sid, ())
            for start, end in spans:
                if not any(s <= start and end <= e for s, e in theirs):
                    return False
        return True

    def encode(self) -> bytes:
        """MySQL's binary form (PREVIOUS_GTIDS body, COM_BINLOG_DUMP_GTID data)."""
        out = [_U64.pack(len(self.intervals))]
        for sid, spans in self.intervals.items():
            out.append(uuid.UUID(sid).bytes)
            out.append(_U64.pack(len(spans)))
            for start, end in spans:
                out.append(_U64.pack(start) + _U64.pack(end + 1))
        return b"".join(out)

    @classmethod
    def decode(cls, data: bytes) -> GtidSet:
        """The binary form back; a set that does not fit its bytes exactly is refused."""
        if len(data) < 8:
            raise BinlogDecodeError(f"GTID set of {len(data)} bytes: shorter than its count")
        count = _U64.unpack_from(data)[0]
        if count >> 56:
            raise BinlogDecodeError("GTID set in the tagged format (MySQL 8.3+): not supported")
        p = 8
        spans: dict[str, list[tuple[int, int]]] = {}
        for _ in range(count):
            if p + 24 > len(data):
                raise BinlogDecodeError(f"GTID set: UUID {len(spans) + 1} of {count} beyond its {len(data)} bytes")
            sid = str(uuid.UUID(bytes=data[p : p + 16]))
            n = _U64.unpack_from(data, p + 16)[0]
            p += 24
            if n > (len(data) - p) // 16:
                raise BinlogDecodeError(f"GTID set: {n} intervals of {sid} do not fit in {len(data) - p} bytes")
            for _ in range(n):
                start, end = _U64.unpack_from(data, p)[0], _U64.unpack_from(data, p + 8)[0]
                p += 16
                if not 1 <= start < end <= MAX_GNO + 1:
                    raise BinlogDecodeError(f"GTID set: interval [{start}, {end}) of {sid} is not valid")
                spans.setdefault(sid, []).append((start, end - 1))
        if p != len(data):
            raise BinlogDecodeError(f"GTID set: {len(data) - p} bytes left after {count} UUID(s)")
        return cls.of(spans)


def _sid(text: str) -> str:
    if not _UUID_TEXT.match(text):
        raise ValueError(f"{text!r} is not a server UUID")
    return str(uuid.UUID(text))


class ExecutedGtids:
    """The growing set of transactions a capture has passed, with its size kept as it grows.

    The size is what orders MySQL change events (`source.pos`): every transaction a server writes
    adds one GTID, so the count after it grows by one per transaction in commit order, and it is
    the same on every server that executed the same transactions (a replica promoted after a
    failover continues it), unlike a GTID's own number, which restarts at 1 for each server UUID.
    Adding to the newest interval of a UUID, the usual case, costs O(1).
    """

    def __init__(self, start: GtidSet | None = None) -> None:
        self._spans: dict[str, list[list[int]]] = {}
        self.count = 0
        for sid, spans in (start.intervals if start else {}).items():
            self._spans[sid] = [[s, e] for s, e in spans]
            self.count += sum(e - s + 1 for s, e in spans)

    def add(self, sid: str, gno: int) -> bool:
        """Record `sid:gno`; False (and nothing changes) if it is already in the set."""
        spans = self._spans.setdefault(sid, [])
        if spans and spans[-1][1] + 1 == gno:
            spans[-1][1] = gno
        elif spans and spans[-1][1] < gno:
            spans.append([gno, gno])
        elif any(s <= gno <= e for s, e in spans):
            return False
        else:  # filling a gap (a replica's out-of-order history): rebuild this UUID's intervals
            self._spans[sid] = [[a, b] for a, b in _normalized([*((a, b) for a, b in spans), (gno, gno)])]
        self.count += 1
        return True

    def to_set(self) -> GtidSet:
        return GtidSet.of({sid: [(s, e) for s, e in spans] for sid, spans in self._spans.items()})

    def __str__(self) -> str:
        return str(self.to_set())
