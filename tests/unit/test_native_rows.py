"""The compiled row decoder (cdcflow._native.mysql_rows, native/src/lib.rs) against the Python readers.

Rows events of a table with every column kind the compiled decoder covers are generated (valid values,
random bytes, NULLs, truncations) and decoded twice, by a decoder that uses it and one that does not:
the rows, or the error, must be the same.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_binlog_decoder import encode_decimal, golden_events  # type: ignore[import-not-found]

from cdcflow.sources.mysql.binlog import columns as ct
from cdcflow.sources.mysql.binlog import events as ev
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import BinlogDecoder, RowsEvent

pytestmark = pytest.mark.unit

UTF8, ASCII, BINARY = 45, 11, 63
# (name, type, metadata, unsigned, collation)
COLUMNS = [
    ("id", ct.LONGLONG, 0, False, None), ("u32", ct.LONG, 0, True, None), ("i8", ct.TINY, 0, False, None),
    ("u16", ct.SHORT, 0, True, None), ("i24", ct.INT24, 0, False, None), ("u24", ct.INT24, 0, True, None),
    ("u64", ct.LONGLONG, 0, True, None), ("d", ct.DOUBLE, 8, False, None),
    ("amount", ct.NEWDECIMAL, 12 << 8 | 2, False, None), ("big", ct.NEWDECIMAL, 40 << 8 | 12, False, None),
    ("whole", ct.NEWDECIMAL, 9 << 8 | 0, False, None), ("day", ct.DATE, 0, False, None),
    ("at0", ct.DATETIME2, 0, False, None), ("at3", ct.DATETIME2, 3, False, None),
    ("at6", ct.DATETIME2, 6, False, None), ("ts0", ct.TIMESTAMP2, 0, False, None),
    ("ts4", ct.TIMESTAMP2, 4, False, None), ("y", ct.YEAR, 0, False, None),
    ("name", ct.VARCHAR, 200, False, UTF8), ("long_name", ct.VARCHAR, 1000, False, UTF8),
    ("code", ct.STRING, 12, False, ASCII), ("bin8", ct.STRING, 8, False, BINARY),
    ("varbin", ct.VARCHAR, 64, False, BINARY), ("body", ct.BLOB, 2, False, UTF8), ("blob", ct.BLOB, 3, False, BINARY),
]  # fmt: skip


def schemas(table_id: int) -> tuple[ct.TableSchema, ct.TableSchema]:
    """The test table as the decoder compiles it: with the native column specs, and without."""
    decoder = BinlogDecoder()
    cols, native = [], []
    for name, t, meta, unsigned, collation in COLUMNS:
        col = ct.Column(name, t, meta, unsigned, collation)
        codec_for = decoder._codec_for("test", name)
        cols.append(dataclasses.replace(col, read=ct.make_reader(col, codec_for)))
        spec = ct.native_column(col, codec_for(collation) if collation is not None else None)
        assert spec is not None, name
        native.append(spec)
    with_native = ct.TableSchema(table_id, "db", "t", tuple(cols), (0,), tuple(native))
    return with_native, dataclasses.replace(with_native, native=None)


def _fixed(n: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=n, max_size=n)


def _prefixed(prefix: int, payload: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    return payload.map(lambda b: len(b).to_bytes(prefix, "little") + b)


def _decimal(precision: int, scale: int) -> st.SearchStrategy[bytes]:
    intg = precision - scale
    valid = st.builds(lambda neg, i, f: encode_decimal(neg, i, f, precision, scale), st.booleans(),
                      st.integers(0, 10**intg - 1), st.integers(0, 10**scale - 1 if scale else 0))  # fmt: skip
    return st.one_of(valid, valid, valid, _fixed(len(encode_decimal(False, 0, 0, precision, scale))))  # mostly valid


def _datetime2(fsp: int) -> st.SearchStrategy[bytes]:
    nfrac = (fsp + 1) // 2
    valid = st.builds(
        lambda y, mo, d, hms, frac: ((((y * 13 + mo) << 5 | d) << 17 | hms) + 0x8000000000).to_bytes(5, "big") + frac,
        st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 0x1FFFF), _fixed(nfrac),
    )  # fmt: skip
    return st.one_of(valid, _fixed(5 + nfrac))


_utf8 = st.text(max_size=20).map(str.encode)
_text = st.one_of(_utf8, _utf8, _utf8, st.binary(max_size=20))
_ascii = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=12).map(str.encode), st.binary(max_size=12)
)
VALUES: dict[str, st.SearchStrategy[bytes]] = {
    "id": _fixed(8), "u32": _fixed(4), "i8": _fixed(1), "u16": _fixed(2), "i24": _fixed(3), "u24": _fixed(3),
    "u64": _fixed(8), "d": st.floats(allow_nan=False).map(lambda f: struct.pack("<d", f)),
    "amount": _decimal(12, 2), "big": _decimal(40, 12), "whole": _decimal(9, 0), "day": _fixed(3),
    "at0": _datetime2(0), "at3": _datetime2(3), "at6": _datetime2(6),
    "ts0": st.one_of(st.just(b"\x00" * 4), _fixed(4)), "ts4": st.one_of(st.just(b"\x00" * 6), _fixed(6)),
    "y": _fixed(1), "name": _prefixed(1, _text), "long_name": _prefixed(2, _text), "code": _prefixed(1, _ascii),
    "bin8": _prefixed(1, st.binary(max_size=8)), "varbin": _prefixed(1, st.binary(max_size=30)),
    "body": _prefixed(2, _text), "blob": _prefixed(3, st.binary(max_size=30)),
}  # fmt: skip


@st.composite
def row_image(draw: st.DrawFn, present: list[int]) -> bytes:
    nulls = [draw(st.integers(0, 9)) == 0 for _ in present]
    bitmap = sum(1 << i for i, null in enumerate(nulls) if null).to_bytes((len(present) + 7) // 8, "little")
    values = b"".join(draw(VALUES[COLUMNS[c][0]]) for c, null in zip(present, nulls, strict=True) if not null)
    return bitmap + values


def bitmap(present: list[int]) -> bytes:
    return sum(1 << i for i in present).to_bytes((len(COLUMNS) + 7) // 8, "little")


def rows_event(kind: int, post_header: bytes, present: list[int], after: list[int], rows: bytes) -> bytes:
    body = post_header + bytes([len(COLUMNS)]) + bitmap(present) + (bitmap(after) if kind == 24 else b"") + rows
    size = 19 + len(body) + 4
    header = struct.pack("<IBIII", 0, kind, 1, size, 0) + b"\x00\x00"
    return header + body + b"\x00\x00\x00\x00"  # checksum not verified


def decoders() -> tuple[BinlogDecoder, BinlogDecoder, int, bytes]:
    """Two decoders that have read the golden stream's format description and one TABLE_MAP, whose
    table id then names the test table (with and without native specs)."""
    events = golden_events()
    first_rows = next(i for i, e in enumerate(events) if e[4] == 23)
    out = []
    for _ in range(2):
        d = BinlogDecoder(verify_checksum=False)
        d.checksum = True
        for e in events[:first_rows]:
            d.decode(e)
        out.append(d)
    post_header = events[first_rows][19:27]
    table_id = int.from_bytes(post_header[:6], "little")
    native, python = schemas(table_id)
    out[0]._tables[table_id], out[1]._tables[table_id] = native, python
    return out[0], out[1], table_id, post_header


NATIVE, PYTHON, TABLE_ID, POST_HEADER = decoders()


def outcome(decoder: BinlogDecoder, data: bytes) -> Any:
    try:
        event = decoder.decode(data)
    except BinlogDecodeError as exc:
        return "error", str(exc)
    assert isinstance(event, RowsEvent)
    return event.kind, event.rows


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_compiled_rows_equal_the_python_readers(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from([23, 24, 25]))
    columns = st.lists(st.integers(0, len(COLUMNS) - 1), unique=True, max_size=8).map(sorted)
    present = data.draw(columns)
    after = data.draw(columns) if kind == 24 else present
    rows = b""
    for _ in range(data.draw(st.integers(1, 4))):
        rows += data.draw(row_image(present))
        if kind == 24:
            rows += data.draw(row_image(after))
    if data.draw(st.integers(0, 4)) == 0:  # damaged: cut short, or a byte changed
        at = data.draw(st.integers(0, max(0, len(rows) - 1)))
        rows = (
            rows[:at]
            if data.draw(st.booleans())
            else rows[:at] + bytes([data.draw(st.integers(0, 255))]) + rows[at + 1 :]
        )
    event = rows_event(kind, POST_HEADER, present, after, rows)
    # repr: a NaN double (a damaged byte can make one) equals itself, and dict order counts
    assert repr(outcome(NATIVE, event)) == repr(outcome(PYTHON, event))


def test_the_compiled_decoder_serves_tables_it_covers_and_only_those() -> None:
    event = rows_event(23, POST_HEADER, [0, 18], [0, 18], b"\x00" + (7).to_bytes(8, "little") + b"\x02hi")
    calls: list[int] = []
    real = ev._native_rows
    assert real is not None, "cdcflow._native is not built: run `make install`"

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    with mock.patch.object(ev, "_native_rows", counting):
        assert outcome(NATIVE, event) == ("insert", ((None, {"id": 7, "name": "hi"}),))
        assert outcome(PYTHON, event) == ("insert", ((None, {"id": 7, "name": "hi"}),))
    assert len(calls) == 1
    assert ct.native_column(ct.Column("f", ct.FLOAT, 4, False, None), None) is None
    assert ct.native_column(ct.Column("e", ct.ENUM, 1, False, 45, ("a",)), "utf-8") is None
    assert ct.native_column(ct.Column("l", ct.VARCHAR, 10, False, 8), "cp1252") is None
