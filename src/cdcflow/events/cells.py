"""HBase cells as the change-event contract carries them: plain data, shared by the capture, the
sinks and the HBase client (which writes and reads the same cells)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

# A row as verify and the state sinks compare it: row key and its set of (family, qualifier, timestamp, value).
RowCells = tuple[bytes, frozenset[tuple[bytes, bytes, int, bytes]]]


class CellType(enum.IntEnum):
    """KeyValue.Type codes, as they appear on the wire and in WAL cells."""

    PUT = 4
    DELETE = 8  # one version of one column
    DELETE_FAMILY_VERSION = 10  # one timestamp across a whole family
    DELETE_COLUMN = 12  # all versions of a column up to a timestamp
    DELETE_FAMILY = 14  # all columns of a family up to a timestamp


@dataclass(frozen=True, order=True)
class Cell:
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
