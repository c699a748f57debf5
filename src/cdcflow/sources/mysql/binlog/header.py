"""The binlog's event header (v4: 19 bytes, little-endian), the base of every decoded event, and MySQL's
length-encoded integers: what events.py (the decoder and the events both servers write) and mysql_events.py
(MySQL 8's own events) share. Pure."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event size, end position, flags
HEADER_LEN = 19
ARTIFICIAL_FLAG = 0x20  # LOG_EVENT_ARTIFICIAL_F: made up by the server for this stream (fake rotate, ...)


@dataclass(frozen=True)
class EventHeader:
    timestamp: int  # seconds since the epoch, when the statement started on the source
    type: int
    server_id: int
    size: int
    log_pos: int  # end position of this event in its binlog file (0 for some artificial events)
    flags: int

    @property
    def start_pos(self) -> int:
        return self.log_pos - self.size if self.log_pos else 0

    @property
    def artificial(self) -> bool:
        return bool(self.flags & ARTIFICIAL_FLAG)


@dataclass(frozen=True)
class BinlogEvent:
    header: EventHeader


def read_lenenc(buf: bytes, off: int) -> tuple[int, int]:
    """MySQL's length-encoded integer."""
    if off >= len(buf):
        raise BinlogDecodeError(f"length-encoded integer at offset {off}: end of data")
    first = buf[off]
    if first < 0xFB:
        return first, off + 1
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None or off + 1 + size > len(buf):
        raise BinlogDecodeError(f"bad length-encoded integer 0x{first:02x} at offset {off}")
    return int.from_bytes(buf[off + 1 : off + 1 + size], "little"), off + 1 + size
