"""Binlog events only Oracle MySQL writes (issue #33): its GTID events and PREVIOUS_GTIDS.

MariaDB marks a transaction with its own GTID event (`domain-server-seq`, events.py); MySQL 5.6+
writes GTID_LOG_EVENT (`server uuid:number`) or, with `gtid_mode=OFF`, ANONYMOUS_GTID_LOG_EVENT
before every transaction, and starts each binlog file with PREVIOUS_GTIDS_LOG_EVENT: the set of
every GTID in the files before it. Layouts (MySQL 8.0 `libbinlogevents/src/control_events.cpp`):

    GTID / ANONYMOUS_GTID   flags 1, sid 16, gno 8, lt_type 1 (= 2), last_committed 8,
                            sequence_number 8, then (8.0.1+) immediate_commit_timestamp 7 (top
                            bit set: original_commit_timestamp 7 follows), transaction_length
                            (packed integer), immediate_server_version 4 (top bit set:
                            original_server_version 4 follows); later fields may follow.
    PREVIOUS_GTIDS          a GTID set in binary form (`gtid_set.GtidSet.decode`).
    ROWS_QUERY              1 byte (a length the server truncates; ignored), the statement text.

Pure functions of bytes.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import BinlogEvent, EventHeader, read_lenenc
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet

ROWS_QUERY = 29
MYSQL_GTID = 33
ANONYMOUS_GTID = 34
PREVIOUS_GTIDS = 35
PARTIAL_UPDATE_ROWS = 39

_FIXED = struct.Struct("<B16sqBqq")  # flags, sid, gno, lt_type, last_committed, sequence_number
_LOGICAL_TIMESTAMP = 2
_TOP_BIT_56 = 1 << 55
_TOP_BIT_32 = 1 << 31


@dataclass(frozen=True)
class MySqlGtidEvent(BinlogEvent):
    """The start of a MySQL transaction: `sid:gno` (anonymous: no GTID, gtid_mode=OFF)."""

    sid: str
    gno: int
    last_committed: int
    sequence_number: int
    commit_ts_us: int | None  # immediate commit time, microseconds since the epoch (8.0.1+)
    transaction_length: int | None  # bytes of the whole transaction in the binlog, this event included
    anonymous: bool

    @property
    def gtid(self) -> str:
        return "" if self.anonymous else f"{self.sid}:{self.gno}"


@dataclass(frozen=True)
class PreviousGtidsEvent(BinlogEvent):
    gtids: GtidSet


@dataclass(frozen=True)
class RowsQueryEvent(BinlogEvent):
    """The statement that wrote the rows events after it (`binlog_rows_query_log_events=ON`)."""

    query: str


def decode_gtid(header: EventHeader, body: bytes) -> MySqlGtidEvent:
    if len(body) < _FIXED.size:
        raise BinlogDecodeError(f"GTID event of {len(body)} bytes: shorter than its {_FIXED.size}-byte header")
    _flags, sid, gno, lt_type, last_committed, sequence_number = _FIXED.unpack_from(body)
    anonymous = header.type == ANONYMOUS_GTID
    if lt_type != _LOGICAL_TIMESTAMP:
        raise BinlogDecodeError(f"GTID event with logical timestamp type {lt_type} (expected {_LOGICAL_TIMESTAMP})")
    if not anonymous and not 1 <= gno < 2**63:
        raise BinlogDecodeError(f"GTID event with transaction number {gno}")
    p = _FIXED.size
    commit_ts: int | None = None
    length: int | None = None
    if p + 7 <= len(body):
        commit_ts = int.from_bytes(body[p : p + 7], "little")
        p += 7
        if commit_ts & _TOP_BIT_56:  # the original commit time follows (a replica's binlog)
            commit_ts &= _TOP_BIT_56 - 1
            p += 7
        if p < len(body):
            try:
                length, p = read_lenenc(body, p)
            except (BinlogDecodeError, IndexError, struct.error) as exc:
                raise BinlogDecodeError(f"GTID event: transaction length unreadable ({exc})") from None
    if p > len(body):
        raise BinlogDecodeError("GTID event: its optional fields run past the event")
    return MySqlGtidEvent(
        header, str(uuid.UUID(bytes=sid)), gno, last_committed, sequence_number, commit_ts, length, anonymous
    )


def decode_previous_gtids(header: EventHeader, body: bytes) -> PreviousGtidsEvent:
    return PreviousGtidsEvent(header, GtidSet.decode(body))


def decode_rows_query(header: EventHeader, body: bytes) -> RowsQueryEvent:
    if not body:
        raise BinlogDecodeError("ROWS_QUERY event without its length byte")
    return RowsQueryEvent(header, body[1:].decode("utf-8", "replace"))


def decode(header: EventHeader, body: bytes) -> BinlogEvent:
    """One of MySQL's own events (`BinlogDecoder.decode` hands them here)."""
    if header.type in (MYSQL_GTID, ANONYMOUS_GTID):
        return decode_gtid(header, body)
    if header.type == PREVIOUS_GTIDS:
        return decode_previous_gtids(header, body)
    if header.type == ROWS_QUERY:
        return decode_rows_query(header, body)
    raise BinlogDecodeError(f"event type {header.type} is not one of MySQL's own")
