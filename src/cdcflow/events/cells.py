"""HBase cells as the change-event contract carries them: plain data, shared by the capture, the
sinks and the HBase client (which writes and reads the same cells)."""

from __future__ import annotations

import enum
from typing import NamedTuple

# A row as verify and the state sinks compare it: row key and its set of (family, qualifier, timestamp, value).
RowCells = tuple[bytes, frozenset[tuple[bytes, bytes, int, bytes]]]


class CellType(enum.IntEnum):
    """KeyValue.Type codes, as they appear on the wire and in WAL cells."""

    PUT = 4
    DELETE = 8  # one version of one column
    DELETE_FAMILY_VERSION = 10  # one timestamp across a whole family
    DELETE_COLUMN = 12  # all versions of a column up to a timestamp
    DELETE_FAMILY = 14  # all columns of a family up to a timestamp


class Cell(NamedTuple):
    """One HBase cell. A named tuple, not a dataclass: the capture makes one per cell of every WAL
    entry, and a tuple is made three times faster (equality, hashing and order are the tuple's)."""

    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: CellType
    value: bytes = b""
    # Serialized HBase tags (ACL, visibility, TTL, ...), only from KeyValueCodecWithTags.
    tags: bytes = b""

    @property
    def is_delete(self) -> bool:
        return self.type is not CellType.PUT


def string_binary(data: bytes) -> str:
    """Printable ASCII as is, every other byte (and the backslash itself) as \\xNN, upper-case hex.

    HBase's Bytes.toStringBinary convention, made unambiguous by escaping the backslash: the
    byte 0xFF is "\\xFF" and the four characters "\\xff" are "\\x5Cxff", so no two byte strings
    share a spelling, and the spelling reads back with `from_string_binary`."""
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02X}" for b in data)


def from_string_binary(text: str) -> bytes:
    """The inverse of `string_binary` (also accepts lower-case hex)."""
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and text[i + 1 : i + 2] == "x" and len(text) >= i + 4:
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            out += ch.encode("utf-8")
            i += 1
    return bytes(out)


def column_name(family: bytes, qualifier: bytes) -> str:
    """The one spelling of an HBase column in cdcflow ("family:qualifier", each `string_binary`):
    `after` keys, the Delta `cells` keys, value hints, typed columns and route filters all use it.
    A family never holds ':', so the first ':' splits the two."""
    return f"{string_binary(family)}:{string_binary(qualifier)}"
