from __future__ import annotations

from cdcflow.events.cells import Cell, CellType
from cdcflow.verify.hbase import compare_rows, rows_of


def cells(*items: tuple[bytes, bytes, int, bytes]) -> list[Cell]:
    return [Cell(r, b"cf", q, ts, CellType.PUT, v) for r, q, ts, v in items]


def test_identical_tables_are_clean() -> None:
    data = cells((b"a", b"x", 1, b"1"), (b"a", b"y", 1, b"2"), (b"b", b"x", 1, b"3"))
    report = compare_rows(rows_of(data), rows_of(list(data)))
    assert report.clean and report.rows_compared == 2


def test_missing_extra_and_different_rows_are_counted() -> None:
    source = cells((b"a", b"x", 1, b"1"), (b"b", b"x", 1, b"2"), (b"c", b"x", 1, b"3"))
    sink = cells((b"b", b"x", 2, b"2"), (b"c", b"x", 1, b"3"), (b"d", b"x", 1, b"4"))
    report = compare_rows(rows_of(source), rows_of(sink))
    assert (report.missing, report.extra, report.different) == (1, 1, 1)  # a missing, d extra, b's timestamp differs
    assert not report.clean and "DIFFERENCES" in report.summary()
    assert any("row b'b'" in e for e in report.examples)
