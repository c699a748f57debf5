"""KeyValueCodec / KeyValueCodecWithTags cell blocks: pure decode and encode.

One cell on the wire (all big-endian):

    int32 cell_len | int32 key_len | int32 value_len
    key:   int16 row_len, row, int8 family_len, family, qualifier, int64 timestamp, uint8 type
    value
    [int16 tags_len, tags]      present only when cell_len > 8 + key_len + value_len

A block is the plain concatenation of cells. Every length is checked against what is left of
the block before slicing, so a corrupt block raises WireProtocolError instead of misreading.
"""

from __future__ import annotations

import struct

from cdcflow.errors import WireProtocolError
from cdcflow.events.cells import Cell, CellType

KEY_VALUE_CODEC = "org.apache.hadoop.hbase.codec.KeyValueCodec"
KEY_VALUE_CODEC_WITH_TAGS = "org.apache.hadoop.hbase.codec.KeyValueCodecWithTags"
SUPPORTED_CODECS = frozenset({KEY_VALUE_CODEC, KEY_VALUE_CODEC_WITH_TAGS})

_HEAD = struct.Struct(">iii")
_ROW_LEN = struct.Struct(">H")
_TS = struct.Struct(">q")
_TAGS_LEN = struct.Struct(">H")
# row_len(2) + family_len(1) + timestamp(8) + type(1)
_KEY_FIXED = 12
_TYPES = {t.value: t for t in CellType}


def decode_cells(block: bytes, limit: int | None = None) -> list[Cell]:
    """Decode every cell of `block` (at most `limit`; more is an error).

    One loop with everything in local names: it runs for every cell the capture receives."""
    cells: list[Cell] = []
    append = cells.append
    head = _HEAD.unpack_from
    row_len_at = _ROW_LEN.unpack_from
    ts_at = _TS.unpack_from
    types = _TYPES
    make = tuple.__new__  # what Cell(...) does, without the keyword handling
    max_cells = len(block) if limit is None else limit
    pos = 0
    end = len(block)
    while pos < end:
        if len(cells) >= max_cells:
            raise WireProtocolError(f"cell block holds more than the {limit} cells announced")
        if end - pos < 12:
            raise WireProtocolError(f"truncated cell header at byte {pos}")
        cell_len, key_len, value_len = head(block, pos)
        cell_end = pos + 4 + cell_len
        if cell_len < 8 or cell_end > end:
            raise WireProtocolError(f"cell length {cell_len} at byte {pos} overruns the block")
        if key_len < _KEY_FIXED or value_len < 0 or 8 + key_len + value_len > cell_len:
            raise WireProtocolError(f"cell at byte {pos}: key {key_len} / value {value_len} do not fit {cell_len}")
        k = pos + 12
        key_end = k + key_len
        fam_pos = k + 2 + row_len_at(block, k)[0]
        if fam_pos + 1 > key_end:
            raise WireProtocolError(f"cell at byte {pos}: row length {fam_pos - k - 2} overruns the key")
        qual_pos = fam_pos + 1 + block[fam_pos]
        qual_end = key_end - 9
        if qual_pos > qual_end:
            raise WireProtocolError(f"cell at byte {pos}: family length {block[fam_pos]} overruns the key")
        cell_type = types.get(block[key_end - 1])
        if cell_type is None:
            raise WireProtocolError(f"cell at byte {pos}: unknown KeyValue type {block[key_end - 1]}")
        tags_pos = key_end + value_len
        tags = _tags(block, pos, tags_pos, cell_end) if tags_pos < cell_end else b""
        append(make(Cell, (block[k + 2 : fam_pos], block[fam_pos + 1 : qual_pos], block[qual_pos:qual_end],
                           ts_at(block, qual_end)[0], cell_type, block[key_end:tags_pos], tags)))  # fmt: skip
        pos = cell_end
    return cells


def _tags(block: bytes, pos: int, tags_pos: int, cell_end: int) -> bytes:
    if cell_end - tags_pos < 2:
        raise WireProtocolError(f"cell at byte {pos}: truncated tags length")
    (tags_len,) = _TAGS_LEN.unpack_from(block, tags_pos)
    if tags_pos + 2 + tags_len != cell_end:
        raise WireProtocolError(f"cell at byte {pos}: tags length {tags_len} does not match the cell")
    return block[tags_pos + 2 : cell_end]


def encode_cell(cell: Cell) -> bytes:
    """The exact bytes KeyValueCodecWithTags writes (no tags section when there are none)."""
    key = (
        _ROW_LEN.pack(len(cell.row)) + cell.row + bytes([len(cell.family)]) + cell.family + cell.qualifier
        + _TS.pack(cell.timestamp) + bytes([cell.type])
    )  # fmt: skip
    tail = _TAGS_LEN.pack(len(cell.tags)) + cell.tags if cell.tags else b""
    body = struct.pack(">ii", len(key), len(cell.value)) + key + cell.value + tail
    return struct.pack(">i", len(body)) + body


def encode_cells(cells: list[Cell]) -> bytes:
    return b"".join(encode_cell(c) for c in cells)
