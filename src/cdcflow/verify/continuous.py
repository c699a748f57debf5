"""Continuous verification: compare a rolling sample of a source table with its sink, round after
round, and report only the differences that are confirmed.

A round compares the next `sample` rows by key: the range after the previous round's, wrapping at
the end of the table (every row when `sample` is None), so repeated rounds cover the whole table at a
bounded cost each. The sink's side of the range is read between the same keys, so rows only the sink
has (extras) are found too.

Rows changed after the sink's applied position: we **wait, then look again**. Neither HBase nor a
sink copy says which source position a row of the copy reflects, so a difference seen once may be a
change still on its way (captured, in Kafka, not yet applied). Each differing row is read again from
both sides after `grace_s` (set it above the sink's lag): if the source row changed meanwhile, it was a
change in flight and is skipped (counted as `in_flight`; a later round sees it again); if the source
row is the same and the sink still differs, the difference is **confirmed**. With `grace_s` 0 every
difference counts (for a quiet system, e.g. after `cdcflow pipeline run --available-now`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from itertools import islice
from typing import Any, Protocol

import orjson

from cdcflow.clients.hbase import HBaseClient
from cdcflow.events.cells import RowCells
from cdcflow.verify.hbase import compare_rows, rows_of
from cdcflow.verify.mysql import Row, compare_tables
from cdcflow.verify.report import VerifyReport

log = logging.getLogger(__name__)

CellSet = frozenset[tuple[bytes, bytes, int, bytes]]


@dataclass
class VerifyRound:
    """One round's result, as published (metrics, the verify topic, the status page)."""

    check: str
    started_ms: int
    finished_ms: int
    rows_compared: int
    range_start: str  # the keys compared, as text (repr of the row keys)
    range_end: str
    missing: int = 0  # confirmed: in the source, not in the sink
    extra: int = 0
    different: int = 0
    in_flight: int = 0  # differed at first, but the source row changed meanwhile: skipped
    # Confirmed differences known in the whole table: found by this round or an earlier one and not seen
    # equal again since (a rolling sample's round only looks at its range; the rest stays as last seen).
    outstanding: int = 0
    examples: list[str] = field(default_factory=list)
    error: str | None = None  # the round could not run (a source or sink unreachable)

    def confirm(self, in_source: bool, in_sink: bool) -> str:
        """Count a confirmed difference; what kind it is, for its example."""
        if not in_source:
            self.extra += 1
            return "extra in the sink"
        if not in_sink:
            self.missing += 1
            return "missing from the sink"
        self.different += 1
        return "different"

    @property
    def confirmed(self) -> int:
        return self.missing + self.extra + self.different

    @property
    def clean(self) -> bool:
        return self.error is None and self.confirmed == 0 and self.outstanding == 0

    def summary(self) -> str:
        if self.error is not None:
            return f"{self.check}: ERROR {self.error}"
        verdict = "no differences" if self.clean else "CONFIRMED DIFFERENCES"
        where = f" ({self.range_start} .. {self.range_end})" if self.range_start else ""
        return (f"{self.check}: {verdict}: {self.rows_compared} rows compared{where}, "
                f"{self.missing} missing from the sink, {self.extra} extra in the sink, "
                f"{self.different} different, {self.in_flight} changed in flight (skipped); "
                f"{self.outstanding} confirmed difference(s) known in the table")  # fmt: skip

    def to_json(self) -> bytes:
        return orjson.dumps({**asdict(self), "confirmed": self.confirmed, "clean": self.clean})

    @classmethod
    def from_json(cls, raw: bytes) -> VerifyRound:
        doc: dict[str, Any] = orjson.loads(raw)
        doc.pop("confirmed", None)
        doc.pop("clean", None)
        return cls(**doc)


class HBaseRangeCheck:
    """An HBase source table against its HBase copy (the hbase sink), cell by cell. Subclasses read
    another kind of copy (`DeltaRangeCheck`)."""

    def __init__(self, source_client: HBaseClient, source: str, sink_client: HBaseClient | None, sink: str,
                 max_versions: int = 1, sample: int | None = None) -> None:  # fmt: skip
        if sample is not None and sample < 1:
            raise ValueError("sample must be at least 1 row")
        self.src, self.source, self.dst, self.sink = source_client, source, sink_client, sink
        self.max_versions, self.sample = max_versions, sample
        self.name = f"hbase {source} -> {sink}"
        self.cursor = b""  # where the next round starts
        self.outstanding: dict[bytes, str] = {}  # confirmed differing rows not seen equal since: row -> example

    def _row(self, client: HBaseClient, table: str, key: bytes) -> CellSet | None:
        for row, cells in rows_of(client.scan(table, start_row=key, stop_row=key + b"\x00",
                                              max_versions=self.max_versions)):  # fmt: skip
            if row == key:
                return cells
        return None

    def source_row(self, key: bytes) -> CellSet | None:
        return self._row(self.src, self.source, key)

    def sink_row(self, key: bytes) -> CellSet | None:
        assert self.dst is not None
        return self._row(self.dst, self.sink, key)

    def sink_rows(self, start: bytes, stop: bytes) -> Iterable[RowCells]:
        """The copy's rows from `start` up to `stop` (b"": the end), in row-key order."""
        assert self.dst is not None
        return rows_of(self.dst.scan(self.sink, start_row=start, stop_row=stop, max_versions=self.max_versions))

    def first_look(self) -> tuple[VerifyReport, dict[bytes, tuple[CellSet | None, CellSet | None]], bytes, bytes]:
        """Compare the next range; the report, the differing rows as seen, and the range's keys."""
        start = self.cursor
        scan = self.src.scan(self.source, start_row=start, max_versions=self.max_versions)
        try:
            source_rows: list[RowCells] = list(islice(rows_of(scan), self.sample))
        finally:
            close = getattr(scan, "close", None)
            if close is not None:  # a generator: end the scan now rather than at garbage collection
                close()
        at_end = self.sample is None or len(source_rows) < self.sample
        # The range ends after the last source row read, or at the end of the table.
        stop = b"" if at_end or not source_rows else source_rows[-1][0] + b"\x00"
        self.cursor = b"" if at_end else stop
        differing: dict[bytes, tuple[CellSet | None, CellSet | None]] = {}

        def seen(row: bytes, src: CellSet | None, dst: CellSet | None) -> None:
            differing[row] = (src, dst)

        report = compare_rows(source_rows, self.sink_rows(start, stop), seen)
        return report, differing, start, stop

    def round(self, grace_s: float, stop_event: threading.Event | None = None) -> VerifyRound:
        started = int(time.time() * 1000)
        report, differing, start, stop = self.first_look()
        result = VerifyRound(self.name, started, 0, report.rows_compared, repr(start), repr(stop) if stop else "end")
        for row in [r for r in self.outstanding if r >= start and (not stop or r < stop)]:
            del self.outstanding[row]  # judged again by this round
        if differing and grace_s > 0:
            log.info("%s: %d row(s) differ; looking again in %.0f s (changes in flight settle)", self.name,
                     len(differing), grace_s)  # fmt: skip
            if stop_event is not None:
                stop_event.wait(grace_s)
            else:
                time.sleep(grace_s)
        for row, (src_then, _dst_then) in differing.items():
            src_now = self.source_row(row) if grace_s > 0 else src_then
            if src_now != src_then:
                result.in_flight += 1
                continue
            dst_now = self.sink_row(row) if grace_s > 0 else _dst_then
            if dst_now == src_now:
                result.in_flight += 1  # the sink caught up
                continue
            kind = result.confirm(src_now is not None, dst_now is not None)
            detail = ""
            if src_now is not None and dst_now is not None:
                only_src, only_dst = sorted(src_now - dst_now)[:2], sorted(dst_now - src_now)[:2]
                detail = f": source-only {only_src!r}, sink-only {only_dst!r}"
            self.outstanding[row] = f"{kind}: row {row!r}{detail}"
        result.outstanding = len(self.outstanding)
        result.examples = [self.outstanding[r] for r in sorted(self.outstanding)[:10]]
        result.finished_ms = int(time.time() * 1000)
        return result


class DeltaRangeCheck(HBaseRangeCheck):
    """An HBase source table against its Delta current-state table (the delta sink). `read_range(start, stop)`
    gives the state table's rows in that key range as `verify.hbase` compares them (b"": open end)."""

    def __init__(self, source_client: HBaseClient, source: str, delta_path: str,
                 read_range: Callable[[bytes, bytes], Iterable[RowCells]], max_versions: int = 1,
                 sample: int | None = None) -> None:  # fmt: skip
        super().__init__(source_client, source, None, delta_path, max_versions, sample)
        self.name = f"hbase-delta {source} -> {delta_path}"
        self.read_range = read_range

    def sink_rows(self, start: bytes, stop: bytes) -> Iterable[RowCells]:
        return self.read_range(start, stop)

    def sink_row(self, key: bytes) -> CellSet | None:
        for row, cells in self.read_range(key, key + b"\x00"):
            if row == key:
                return cells
        return None


class TableWindows(Protocol):
    """Rolling windows of a sampled TableCheck: `advance` moves to the next keys, which `look` then reads."""

    def advance(self) -> None: ...

    def bounds(self) -> tuple[str, str]: ...


class TableCheck:
    """A table against its copy, by key (MySQL against Phoenix or Delta): `look()` reads both sides, keyed
    alike, rendered alike. A round compares everything `look` returns: the whole table, or with `windows`
    the next window of keys (a sampled round; confirmed differences elsewhere stay as last seen). A differing
    key is looked at again after the grace period, by reading both sides again (confirmed when the source
    row is unchanged and the copy still differs)."""

    def __init__(self, name: str, look: Callable[[], tuple[Mapping[str, Row], Mapping[str, Row]]],
                 windows: TableWindows | None = None) -> None:  # fmt: skip
        self.name, self.look, self.windows = name, look, windows
        self.outstanding: dict[bytes, str] = {}

    def round(self, grace_s: float, stop_event: threading.Event | None = None) -> VerifyRound:
        started = int(time.time() * 1000)
        start, end = "", ""  # the whole table
        if self.windows is not None:
            self.windows.advance()
            start, end = self.windows.bounds()
        source, sink = self.look()
        report = compare_tables(source, sink)
        result = VerifyRound(self.name, started, 0, report.rows_compared, start, end)
        differing = [k for k in sorted(set(source) | set(sink)) if _differs(source.get(k), sink.get(k))]
        now_source, now_sink = source, sink
        if differing and grace_s > 0:
            log.info("%s: %d row(s) differ; looking again in %.0f s (changes in flight settle)", self.name,
                     len(differing), grace_s)  # fmt: skip
            if stop_event is not None:
                stop_event.wait(grace_s)
            else:
                time.sleep(grace_s)
            now_source, now_sink = self.look()
        looked = {k.encode() for k in set(source) | set(sink)}
        self.outstanding = {k: v for k, v in self.outstanding.items() if k not in looked} if self.windows else {}
        for key in differing:
            src_now, dst_now = now_source.get(key), now_sink.get(key)
            if not _same_row(src_now, source.get(key)) or not _differs(src_now, dst_now):
                result.in_flight += 1
                continue
            kind = result.confirm(src_now is not None, dst_now is not None)
            if src_now is not None and dst_now is not None:
                diff = {c: (src_now.get(c), dst_now.get(c)) for c in src_now.keys() | dst_now.keys()
                        if _differs_value(src_now.get(c), dst_now.get(c))}  # fmt: skip
                kind = f"different {diff}"
            self.outstanding[key.encode()] = f"{kind}: {key}"
        result.outstanding = len(self.outstanding)
        result.examples = [self.outstanding[k] for k in sorted(self.outstanding)[:10]]
        result.finished_ms = int(time.time() * 1000)
        return result


def _differs_value(a: Any, b: Any) -> bool:
    return not (a == b and type(a) is type(b))


def _same_row(a: Row | None, b: Row | None) -> bool:
    return not _differs(a, b)


def _differs(a: Row | None, b: Row | None) -> bool:
    if a is None or b is None:
        return a is not b
    return a.keys() != b.keys() or any(_differs_value(a[c], b[c]) for c in a)
