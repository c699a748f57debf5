"""Cell-block codec: a golden vector written from HBase's KeyValue layout, round trips, fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import WireProtocolError
from cdcflow.events.cells import Cell, CellType
from cdcflow.protocols.hbase.cellblock import decode_cells, encode_cells

# row "r", family "f", qualifier "q", ts 1, Put, value "v": 15-byte key, 24-byte cell body.
GOLDEN = bytes.fromhex("000000180000000f0000000100017201667100000000000000010476")


def test_golden_put_cell() -> None:
    assert decode_cells(GOLDEN) == [Cell(b"r", b"f", b"q", 1, CellType.PUT, b"v")]
    assert encode_cells([Cell(b"r", b"f", b"q", 1, CellType.PUT, b"v")]) == GOLDEN


def test_cell_with_tags_and_delete_family_with_empty_qualifier() -> None:
    tagged = Cell(b"row", b"cf", b"", 2**40, CellType.DELETE_FAMILY, b"", tags=b"\x00\x03\x08ab")
    block = encode_cells([tagged, Cell(b"r2", b"cf", b"x", 5, CellType.DELETE, b"")])
    cells = decode_cells(block)
    assert cells[0] == tagged and cells[0].qualifier == b"" and cells[0].tags == b"\x00\x03\x08ab"
    assert cells[1].type is CellType.DELETE
    # tags present iff cell_len > 8 + key_len + value_len
    (cell_len, key_len, value_len) = struct.unpack_from(">iii", block, 0)
    assert cell_len == 8 + key_len + value_len + 2 + 5


cells_strategy = st.builds(
    Cell,
    row=st.binary(min_size=1, max_size=40),
    family=st.binary(min_size=1, max_size=20),
    qualifier=st.binary(max_size=30),
    timestamp=st.integers(min_value=0, max_value=2**63 - 1),
    type=st.sampled_from(list(CellType)),
    value=st.binary(max_size=200),
    tags=st.binary(max_size=20),
)


@given(st.lists(cells_strategy, max_size=20))
def test_roundtrip(cells: list[Cell]) -> None:
    assert decode_cells(encode_cells(cells)) == cells


def test_limit_and_unknown_type_and_truncation() -> None:
    block = encode_cells([Cell(b"r", b"f", b"q", 1, CellType.PUT, b"v")] * 3)
    with pytest.raises(WireProtocolError, match="more than the 2"):
        decode_cells(block, limit=2)
    bad_type = bytearray(GOLDEN)
    bad_type[-2] = 7
    with pytest.raises(WireProtocolError, match="unknown KeyValue type"):
        decode_cells(bytes(bad_type))
    with pytest.raises(WireProtocolError):
        decode_cells(GOLDEN[:-1])


@settings(max_examples=1000)
@given(st.binary(max_size=300))
def test_garbage_only_raises_wire_protocol_error(data: bytes) -> None:
    try:
        decode_cells(data)
    except WireProtocolError:
        pass


@settings(max_examples=500)
@given(st.lists(cells_strategy, min_size=1, max_size=5), st.data())
def test_corrupted_blocks_only_raise_wire_protocol_error(cells: list[Cell], data: st.DataObject) -> None:
    block = bytearray(encode_cells(cells))
    i = data.draw(st.integers(min_value=0, max_value=len(block) - 1))
    block[i] = data.draw(st.integers(min_value=0, max_value=255))
    try:
        decode_cells(bytes(block))
    except WireProtocolError:
        pass
