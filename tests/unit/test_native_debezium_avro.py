"""The compiled Debezium Avro records (cdcflow._native.debezium_avro_rows, native/src/debezium_avro.rs) against
the Python path they stand in for (columns.py's conversions, AvroTable's key and envelope, DebeziumRecords'
choice of records): rows events of a table with a column of every kind, with values in the forms the capture
renders and in others (NULLs, zero dates, wide decimals, wrong types, bad base64), give the same records, the
same transaction counts, or the same error."""

from __future__ import annotations

import base64
import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from cdcflow.events.debezium import avro_native
from cdcflow.events.debezium.avro import AvroTable
from cdcflow.sources.mysql.binlog import columns as t
from cdcflow.sources.mysql.binlog.columns import Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, RowsEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.debezium_records import DebeziumOutput, DebeziumRecords

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(avro_native.debezium_avro_rows is None, reason="cdcflow._native is not built"),
]

UTF8, BINARY = 45, 63
COLUMNS = (
    Column("id", t.LONGLONG, 0, False, None, nullable=False),
    Column("code", t.VARCHAR, 40, False, UTF8, nullable=False),
    Column("u32", t.LONG, 0, True, None), Column("i8", t.TINY, 0, False, None), Column("i16", t.SHORT, 0, False, None),
    Column("u64", t.LONGLONG, 0, True, None), Column("y", t.YEAR, 0, False, None),
    Column("amount", t.NEWDECIMAL, 12 << 8 | 2, False, None), Column("wide", t.NEWDECIMAL, 65 << 8 | 30, False, None),
    Column("whole", t.NEWDECIMAL, 9 << 8 | 0, False, None), Column("f", t.FLOAT, 4, False, None),
    Column("d", t.DOUBLE, 8, False, None), Column("day", t.DATE, 0, False, None),
    Column("day_nn", t.DATE, 0, False, None, nullable=False), Column("at0", t.DATETIME2, 0, False, None),
    Column("at3", t.DATETIME2, 3, False, None, nullable=False), Column("at6", t.DATETIME2, 6, False, None),
    Column("ts0", t.TIMESTAMP2, 0, False, None), Column("ts4", t.TIMESTAMP2, 4, False, None),
    Column("tm", t.TIME2, 0, False, None), Column("tm3", t.TIME2, 3, False, None),
    Column("flag", t.BIT, 1, False, None),
    Column("bits", t.BIT, 1 << 8 | 4, False, None), Column("e", t.ENUM, 1, False, UTF8, labels=("a", "b")),
    Column("s", t.SET, 1, False, UTF8, labels=("x", "y")), Column("j", t.JSON, 4, False, None),
    Column("g", t.GEOMETRY, 4, False, None), Column("name", t.VARCHAR, 200, False, UTF8),
    Column("vb", t.VARCHAR, 64, False, BINARY), Column("blob", t.BLOB, 3, False, BINARY),
)  # fmt: skip


_B64 = st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode())
_DATE = st.dates().map(lambda d: d.isoformat()) | st.just("0000-00-00")
_DATETIME = st.datetimes().map(lambda d: d.isoformat(sep=" ")) | st.sampled_from(
    ["0000-00-00 00:00:00", "2026-01-02 03:04:05.1", "1969-12-31 23:59:59.999"])  # fmt: skip
_TIME = st.builds(lambda neg, h, m, s, f: f"{'-' if neg else ''}{h:02d}:{m:02d}:{s:02d}{f}", st.booleans(),
                  st.integers(0, 838), st.integers(0, 59), st.integers(0, 59),
                  st.sampled_from(["", ".5", ".123", ".000001"]))  # fmt: skip
# the server's form: the SRID (4 bytes, little-endian), then the WKB
_GEOMETRY = st.builds(
    lambda srid, wkb: base64.b64encode(srid.to_bytes(4, "little") + wkb).decode(),
    st.integers(0, 2**31 - 1),
    st.binary(max_size=25),
)
_WIDE = st.decimals(-(10**7), 10**7, places=30, allow_nan=False, allow_infinity=False).map(lambda d: f"{d:.30f}")


def _null(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return strategy | st.none()


# What the capture renders for each column (NULL where the column can hold it)
CANONICAL = st.fixed_dictionaries({
    "id": st.integers(-(2**63), 2**63 - 1), "code": st.text(max_size=6),
    "u32": _null(st.integers(0, 2**32 - 1)), "i8": _null(st.integers(-128, 127)),
    "i16": _null(st.integers(-(2**15), 2**15 - 1)), "u64": _null(st.integers(0, 2**64 - 1)),
    "y": _null(st.integers(1901, 2155) | st.just(0)),
    "amount": _null(st.decimals(-(10**10) + 1, 10**10 - 1, places=2).map(str)), "wide": _null(_WIDE),
    "whole": _null(st.integers(-999_999_999, 999_999_999).map(str)),
    "f": _null(st.floats(width=32, allow_nan=False, allow_infinity=False)), "d": _null(st.floats(allow_nan=False)),
    "day": _null(_DATE), "day_nn": _DATE, "at0": _null(_DATETIME), "at3": _DATETIME, "at6": _null(_DATETIME),
    "ts0": _null(st.sampled_from(["2026-01-02T03:04:05Z", "0000-00-00T00:00:00Z"])),
    "ts4": _null(st.sampled_from(["2026-01-02T03:04:05.1234Z", "0000-00-00T00:00:00.0000Z"])),
    "tm": _null(_TIME), "tm3": _null(_TIME), "flag": _null(st.integers(0, 1)), "bits": _null(st.integers(0, 4095)),
    "e": _null(st.sampled_from(["a", "b"])), "s": _null(st.sampled_from(["", "x", "x,y"])),
    "j": _null(st.just('{"a": [1, 2]}')), "g": _null(_GEOMETRY),
    "name": _null(st.text(max_size=20)), "vb": _null(_B64), "blob": _null(_B64),
})  # fmt: skip
# Anything else, one column at a time: the compiled path must decline it (or agree)
ODD = (
    st.sampled_from(
        [
            "",
            "x",
            "12:00",
            "1e5",
            "-",
            "2026-01-02T03:04:05",
            "00:00:00.",
            "AAA",
            "2026-00-10",
            "2026-02-30",
            "1.5",
            "1" * 40 + "." + "0" * 30,
            "/////w==",
            "\ud800",
            b"\x00",
            None,
            True,
            -1,
            2**64,
            2**70,
            1e300,
        ]
    )
    | st.floats()
)


@st.composite
def images(draw: st.DrawFn) -> dict[str, Any]:
    image = draw(CANONICAL)
    if draw(st.integers(0, 9)) == 0:
        image[draw(st.sampled_from(sorted(image)))] = draw(ODD)
    return image


SCHEMA_IDS: dict[tuple[str, str], int] = {}


def register(subject: str, schema: Any) -> int:
    """The same id for the same schema, as a registry gives."""
    return SCHEMA_IDS.setdefault((subject, json.dumps(schema, sort_keys=True)), len(SCHEMA_IDS) + 1)


def records(compiled: bool, ev: RowsEvent, keys: tuple[str, ...], handling: str, tombstones: bool,
            identities: bool, in_hypothesis: bool = True, gtid: str | None = "0-11-42",
            seq: int = 42) -> tuple[Any, int, dict[str, int]]:  # fmt: skip
    out = DebeziumOutput("src", "mariadb", False, tombstones, handling, "avro", identities=identities)
    native = avro_native.debezium_avro_rows

    def counted(*args: Any) -> Any:
        made = native(*args)
        if in_hypothesis:  # --hypothesis-show-statistics shows the split
            event("compiled" if made is not None else "declined")
        return made

    with mock.patch.object(avro_native, "debezium_avro_rows", counted if compiled else None):
        made = DebeziumRecords(out, register)
        txn = TxnContext("0-11-42", gtid, "mariadb-bin.000003", seq, event_index=3, order=5,
                         table_orders={"db.t": 2})  # fmt: skip
        try:
            got: Any = made.rows(ev, txn, keys, "src.db.t")
        except Exception as exc:  # the error itself is what is compared
            got = (type(exc), str(exc))
    return got, txn.order, txn.table_orders


SCHEMA = TableSchema(7, "db", "t", COLUMNS, (0,))


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(["insert", "update", "delete"]),
    pairs=st.lists(st.tuples(images(), images()), max_size=4),
    same_key=st.booleans(),
    keys=st.sampled_from([("id",), ("code", "id"), ()]),
    handling=st.sampled_from(["precise", "string", "double"]),
    tombstones=st.booleans(),
    identities=st.booleans(),
    gtid=st.sampled_from(["0-11-42", None]),
    seq=st.integers(0, 2**63 - 1),
)
def test_compiled_records_are_the_python_paths(kind: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]],
                                               same_key: bool, keys: tuple[str, ...], handling: str, tombstones: bool,
                                               identities: bool, gtid: str | None, seq: int) -> None:  # fmt: skip
    rows: list[tuple[Any, Any]] = []
    for before, after in pairs:
        if same_key:
            after = {**after, "id": before["id"], "code": before["code"]}
        rows.append((None, after) if kind == "insert" else (before, None) if kind == "delete" else (before, after))
    ev = RowsEvent(EventHeader(1_700_000_000, 30, 11, 200, 9079, 0), kind, 7, SCHEMA, tuple(rows))
    with mock.patch("time.time_ns", return_value=1_700_000_123_456_789_000):
        compiled = records(True, ev, keys, handling, tombstones, identities, gtid=gtid, seq=seq)
        assert compiled == records(False, ev, keys, handling, tombstones, identities, gtid=gtid, seq=seq)


def test_rows_in_the_captures_forms_take_the_compiled_path() -> None:
    """The equality above would hold trivially if the compiled path always declined: here the Python path's
    value writer is broken, and the records still come (from the compiled path)."""
    row = {"id": 7, "code": "k", "u32": 4_000_000_000, "i8": -3, "i16": 300, "u64": 2**64 - 1, "y": 2026,
           "amount": "-12.50", "wide": None, "whole": "42", "f": 1.5, "d": 0.1, "day": "2026-11-28",
           "day_nn": "0000-00-00", "at0": "2026-11-28 10:00:00", "at3": "1969-12-31 23:59:59.999",
           "at6": "2026-11-28 10:00:00.000001", "ts0": "0000-00-00T00:00:00Z", "ts4": "2026-11-28T10:00:00.1234Z",
           "tm": "-838:59:59", "tm3": "00:00:01.5", "flag": 1, "bits": 4095, "e": "a", "s": "x,y", "j": "[]",
           "g": "5hAAAAEBAAAAAAAAAAAA+D8AAAAAAAAAwA==", "name": "é", "vb": "AAE=", "blob": ""}  # fmt: skip
    ev = RowsEvent(EventHeader(1_700_000_000, 30, 11, 200, 9079, 0), "update", 7, SCHEMA,
                   ((row, {**row, "code": "other"}), (row, {**row, "name": None})))  # fmt: skip
    with mock.patch("time.time_ns", return_value=1_700_000_123_456_789_000):
        expected, order, per_table = records(False, ev, ("code", "id"), "precise", True, True, False)
        assert [v is None for _k, v, _i in expected] == [False, True, False, False]  # d, tombstone, c, u
        with mock.patch.object(AvroTable, "value", side_effect=AssertionError("the Python path ran")):
            assert records(True, ev, ("code", "id"), "precise", True, True, False) == (expected, order, per_table)
