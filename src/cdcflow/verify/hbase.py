"""Compare a source table with a sink table: rows missing from the sink, extra in it, or different.

Both sides are read in row-key order and merged, so memory holds one row per side at a time
(plus the sampled examples). HBase rows compare as their full cell sets, timestamps included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import groupby

from cdcflow.clients.hbase import HBaseClient
from cdcflow.events.cells import Cell, RowCells
from cdcflow.verify.report import VerifyReport


def rows_of(cells: Iterable[Cell]) -> Iterator[RowCells]:
    """Group a row-ordered cell stream into (row, cell set)."""
    for row, group in groupby(cells, key=lambda c: c.row):
        yield row, frozenset((c.family, c.qualifier, c.timestamp, c.value) for c in group)


# Called with each differing row: key, source cells (None: missing there), sink cells (None: missing there).
OnDifference = Callable[[bytes, frozenset[tuple[bytes, bytes, int, bytes]] | None,
                         frozenset[tuple[bytes, bytes, int, bytes]] | None], None]  # fmt: skip


def _ignore(_row: bytes, _src: object, _dst: object) -> None:
    pass


def compare_rows(
    source: Iterable[RowCells], sink: Iterable[RowCells], on_difference: OnDifference = _ignore
) -> VerifyReport:
    """Merge two row-ordered streams."""
    report = VerifyReport()
    src_it, dst_it = iter(source), iter(sink)
    src, dst = next(src_it, None), next(dst_it, None)
    while src is not None or dst is not None:
        report.rows_compared += 1
        if dst is None or (src is not None and src[0] < dst[0]):
            assert src is not None
            report.missing += 1
            report.note(f"missing: row {src[0]!r}")
            on_difference(src[0], src[1], None)
            src = next(src_it, None)
        elif src is None or dst[0] < src[0]:
            report.extra += 1
            report.note(f"extra: row {dst[0]!r}")
            on_difference(dst[0], None, dst[1])
            dst = next(dst_it, None)
        else:
            if src[1] != dst[1]:
                report.different += 1
                only_src, only_dst = sorted(src[1] - dst[1])[:2], sorted(dst[1] - src[1])[:2]
                report.note(f"different: row {src[0]!r}: source-only {only_src!r}, sink-only {only_dst!r}")
                on_difference(src[0], src[1], dst[1])
            src, dst = next(src_it, None), next(dst_it, None)
    return report


def verify_hbase(source_client: HBaseClient, source: str, sink_client: HBaseClient, sink: str,
                 max_versions: int = 1) -> VerifyReport:  # fmt: skip
    return compare_rows(
        rows_of(source_client.scan(source, max_versions=max_versions)),
        rows_of(sink_client.scan(sink, max_versions=max_versions)),
    )
