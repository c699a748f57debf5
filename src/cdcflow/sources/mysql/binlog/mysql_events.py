"""Binlog events only Oracle MySQL writes: GTIDs, PREVIOUS_GTIDS, compressed transactions.

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
    TRANSACTION_PAYLOAD     header fields, each `type, length, value` (packed integers, the value
                            taking `length` bytes): 1 payload size, 2 compression (0 ZSTD, 255
                            none), 3 uncompressed size; type 0 ends them. Then the payload: the
                            transaction's events (full headers, no checksums) as one zstd frame.

Pure functions of bytes.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import zstandard

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.binlog.header import BinlogEvent, EventHeader, read_lenenc

ROWS_QUERY = 29
MYSQL_GTID = 33
ANONYMOUS_GTID = 34
PREVIOUS_GTIDS = 35
PARTIAL_UPDATE_ROWS = 39
TRANSACTION_PAYLOAD = 40

_PAYLOAD_SIZE, _COMPRESSION, _UNCOMPRESSED_SIZE = 1, 2, 3
_ZSTD, _UNCOMPRESSED = 0, 255
MAX_INNER_EVENT = 2**30  # max_allowed_packet's ceiling: no real event is larger

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


@dataclass(frozen=True)
class TransactionPayloadEvent(BinlogEvent):
    """A whole transaction compressed into one event (`binlog_transaction_compression=ON`)."""

    compression: int
    uncompressed_size: int
    payload: bytes

    def events(self) -> Iterator[bytes]:
        """The transaction's events one at a time, each as the bytes of a whole event without a checksum and
        with the payload event's end position (MySQL leaves the inner ones' at 0): memory holds one inner
        event at a time, never the whole decompressed transaction."""
        if self.compression == _UNCOMPRESSED:
            reader: Any = io.BytesIO(self.payload)
        else:
            reader = zstandard.ZstdDecompressor().stream_reader(self.payload, read_across_frames=True)
        end_pos = self.header.log_pos.to_bytes(4, "little")
        total = 0
        try:
            while True:
                head = _read_exactly(reader, 19, allow_end=True)
                if not head:
                    break
                size = int.from_bytes(head[9:13], "little")
                if not 19 <= size <= MAX_INNER_EVENT:
                    raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: an inner event of {size} bytes")
                total += size
                if total > self.uncompressed_size:
                    raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: events run past the declared "
                                            f"{self.uncompressed_size} uncompressed bytes")  # fmt: skip
                yield head[:13] + end_pos + head[17:] + _read_exactly(reader, size - 19)
        except zstandard.ZstdError as exc:
            raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: the zstd payload is corrupt ({exc})") from None
        if total != self.uncompressed_size:
            raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: {total} bytes of events, {self.uncompressed_size} declared")


def _read_exactly(reader: Any, n: int, allow_end: bool = False) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = reader.read(n - got)
        if not chunk:
            if allow_end and got == 0:
                return b""
            raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: the payload ends inside an event ({got} of {n} bytes)")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def decode_payload(header: EventHeader, body: bytes) -> TransactionPayloadEvent:
    fields: dict[int, int] = {}
    p = 0
    try:
        while True:
            kind, p = read_lenenc(body, p)
            if kind == 0:
                break
            length, p = read_lenenc(body, p)
            value, _ = read_lenenc(body[p : p + length], 0)
            fields[kind] = value
            p += length
    except (BinlogDecodeError, IndexError, struct.error):
        raise BinlogDecodeError("TRANSACTION_PAYLOAD: header fields run past the event") from None
    compression = fields.get(_COMPRESSION, _ZSTD)
    if compression not in (_ZSTD, _UNCOMPRESSED):
        raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: compression type {compression} is not known")
    size = fields.get(_PAYLOAD_SIZE, len(body) - p)
    if size != len(body) - p:
        raise BinlogDecodeError(f"TRANSACTION_PAYLOAD: {len(body) - p} payload bytes, {size} declared")
    uncompressed = fields.get(_UNCOMPRESSED_SIZE, size if compression == _UNCOMPRESSED else -1)
    if uncompressed < 0:
        raise BinlogDecodeError("TRANSACTION_PAYLOAD: no uncompressed size")
    return TransactionPayloadEvent(header, compression, uncompressed, body[p:])


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
    if header.type == TRANSACTION_PAYLOAD:
        return decode_payload(header, body)
    raise BinlogDecodeError(f"event type {header.type} is not one of MySQL's own")
