"""Binlog events from bytes: `BinlogDecoder.decode(event_bytes) -> event`. Pure; no I/O, no server queries.

The decoder keeps the little state the format needs: the checksum setting and post-header sizes
from the FORMAT_DESCRIPTION event, and the table descriptions from TABLE_MAP events (row events
name their table by a number that a TABLE_MAP announced just before). Everything it needs to
decode a row comes from the binlog itself (`binlog_row_metadata=FULL`), so decoding stays right
across ALTER TABLE: each transaction's TABLE_MAP describes the table as it was when it was written.

Layouts follow the MariaDB/MySQL binlog format (event header v4, 19 bytes, little-endian).
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from cdcflow.sources.mysql.binlog import columns as ct
from cdcflow.sources.mysql.binlog import mysql_events
from cdcflow.sources.mysql.binlog.columns import Column, TableSchema
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.header import ARTIFICIAL_FLAG as ARTIFICIAL_FLAG
from cdcflow.sources.mysql.binlog.header import HEADER as HEADER
from cdcflow.sources.mysql.binlog.header import HEADER_LEN as HEADER_LEN
from cdcflow.sources.mysql.binlog.header import BinlogEvent as BinlogEvent
from cdcflow.sources.mysql.binlog.header import EventHeader as EventHeader
from cdcflow.sources.mysql.binlog.header import read_lenenc as read_lenenc

# Event types (MariaDB and MySQL share the low numbers).
QUERY, ROTATE, FORMAT_DESCRIPTION, XID, TABLE_MAP, HEARTBEAT = 2, 4, 15, 16, 19, 27
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2 = 30, 31, 32
XA_PREPARE = 38  # ends the first half of an XA transaction (XA PREPARE)
PARTIAL_UPDATE_ROWS = 39  # MySQL 8: rows events whose JSON columns hold diffs
TRANSACTION_PAYLOAD = 40  # MySQL 8 binlog transaction compression
MARIADB_ANNOTATE_ROWS, MARIADB_BINLOG_CHECKPOINT, MARIADB_GTID, MARIADB_GTID_LIST = 160, 161, 162, 163
MARIADB_START_ENCRYPTION = 164
MARIADB_COMPRESSED = frozenset(range(165, 172))  # QUERY_COMPRESSED .. DELETE_ROWS_COMPRESSED
HEARTBEAT_MARIADB = 27
# ROWS_QUERY, GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS, TRANSACTION_PAYLOAD (mysql_events.py)
_MYSQL_ONLY = frozenset({29, 33, 34, 35, 40})

ROWS_KIND = {
    WRITE_ROWS_V1: "insert", WRITE_ROWS_V2: "insert",
    UPDATE_ROWS_V1: "update", UPDATE_ROWS_V2: "update",
    DELETE_ROWS_V1: "delete", DELETE_ROWS_V2: "delete",
    PARTIAL_UPDATE_ROWS: "update",  # MySQL: JSON columns of the after image may be diffs (partial_json.py)
}  # fmt: skip


# MariaDB GTID event flags2 (sql/log_event.h, Gtid_log_event::FL_*).
GTID_STANDALONE, GTID_GROUP_COMMIT_ID, GTID_TRANSACTIONAL = 0x01, 0x02, 0x04
GTID_PREPARED_XA, GTID_COMPLETED_XA = 0x40, 0x80

# Optional metadata fields of TABLE_MAP (binlog_row_metadata=FULL).
(OPT_SIGNEDNESS, OPT_DEFAULT_CHARSET, OPT_COLUMN_CHARSET, OPT_COLUMN_NAME, OPT_SET_STR_VALUE, OPT_ENUM_STR_VALUE,
 OPT_GEOMETRY_TYPE, OPT_SIMPLE_PRIMARY_KEY, OPT_PRIMARY_KEY_WITH_PREFIX, OPT_ENUM_AND_SET_DEFAULT_CHARSET,
 OPT_ENUM_AND_SET_COLUMN_CHARSET, OPT_COLUMN_VISIBILITY) = range(1, 13)  # fmt: skip

Row = dict[str, object]

try:  # the compiled row decoder (native/, built by `make install`); without it every row takes the readers
    from cdcflow._native import mysql_rows as _native_rows
except ImportError:
    _native_rows = None  # type: ignore[assignment]

_NATIVE_KIND = {"insert": 0, "delete": 1, "update": 2}
# Column types whose reader needs the column's character set.
_TEXT_TYPES = frozenset({ct.VARCHAR, ct.VAR_STRING, ct.STRING, ct.BLOB, ct.TINY_BLOB, ct.MEDIUM_BLOB, ct.LONG_BLOB})


@dataclass(frozen=True)
class RotateEvent(BinlogEvent):
    next_file: str
    position: int


@dataclass(frozen=True)
class FormatDescriptionEvent(BinlogEvent):
    binlog_version: int
    server_version: str
    checksum: bool


@dataclass(frozen=True)
class GtidEvent(BinlogEvent):
    """MariaDB: the start of a transaction (event group) `domain-server-seq`."""

    domain_id: int
    seq_no: int
    flags2: int
    xid: str | None = None  # XA groups: the XA transaction id, as MariaDB prints it (X'gtrid',X'bqual',formatID)

    @property
    def gtid(self) -> str:
        return f"{self.domain_id}-{self.header.server_id}-{self.seq_no}"

    @property
    def standalone(self) -> bool:
        """A group of one statement with no commit event (DDL, XA COMMIT/ROLLBACK)."""
        return bool(self.flags2 & GTID_STANDALONE)

    @property
    def transactional(self) -> bool:
        """Set by MariaDB when the transaction changed transactional tables only. Only such a group
        is free of rows that a later ROLLBACK / ROLLBACK TO SAVEPOINT in the same group undoes."""
        return bool(self.flags2 & GTID_TRANSACTIONAL)

    @property
    def xa_prepare(self) -> bool:
        """The first half of an XA transaction: its rows, ended by an XA_PREPARE event."""
        return bool(self.flags2 & GTID_PREPARED_XA)

    @property
    def xa_completion(self) -> bool:
        """The second half: one XA COMMIT or XA ROLLBACK query for `xid`."""
        return bool(self.flags2 & GTID_COMPLETED_XA)


@dataclass(frozen=True)
class XaPrepareEvent(BinlogEvent):
    """End of the prepared half of an XA transaction (`XA PREPARE`, or `XA COMMIT ... ONE PHASE`)."""

    xid: str
    one_phase: bool


@dataclass(frozen=True)
class GtidListEvent(BinlogEvent):
    gtids: tuple[str, ...]


@dataclass(frozen=True)
class QueryEvent(BinlogEvent):
    db: str
    query: str
    error_code: int


@dataclass(frozen=True)
class XidEvent(BinlogEvent):
    xid: int


@dataclass(frozen=True)
class TableMapEvent(BinlogEvent):
    table_id: int
    db: str
    table: str
    schema: TableSchema | None  # None when the table is filtered out (its rows are not decoded)


@dataclass(frozen=True)
class RowsEvent(BinlogEvent):
    kind: str  # insert | update | delete
    table_id: int
    schema: TableSchema | None  # None: filtered out, rows not decoded
    # (before, after) per row; insert: (None, after), delete: (before, None). Columns missing from
    # the image are absent from the dict; SQL NULL is None.
    rows: tuple[tuple[Row | None, Row | None], ...] = ()
    end_of_statement: bool = False


@dataclass(frozen=True)
class HeartbeatEvent(BinlogEvent):
    pass


@dataclass(frozen=True)
class UnsupportedEvent(BinlogEvent):
    """An event type cdcflow must not skip silently (compressed or encrypted payloads)."""

    reason: str


@dataclass(frozen=True)
class OtherEvent(BinlogEvent):
    """An event cdcflow has no use for (binlog checkpoints, annotations, ...)."""


def _bits(data: bytes, count: int) -> list[bool]:
    """An LSB-first bitmap (column bitmaps, null bitmaps)."""
    value = int.from_bytes(data, "little")
    return [bool(value >> i & 1) for i in range(count)]


@functools.lru_cache(maxsize=1024)
def _set_bits(data: bytes, count: int) -> list[int]:
    """The indexes of the set bits of an LSB-first bitmap: the columns a rows event carries. A table's
    events repeat the same few bitmaps, so they are remembered (callers must not change the list)."""
    value = int.from_bytes(data, "little")
    return [i for i in range(count) if value >> i & 1]


def format_xid(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """An XA id the way MariaDB writes it in XA queries of the binlog: X'7831',X'',1."""
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


def _gtid(header: EventHeader, body: bytes) -> GtidEvent:
    # seq_no(8) domain_id(4) flags2(1) [commit_id(8) if GROUP_COMMIT_ID] [XA: formatID(4) gtrid_len(1)
    # bqual_len(1) data] [flags_extra ...]; padded to 19 bytes.
    if len(body) < 13:
        raise BinlogDecodeError("GTID event too short")
    seq_no, domain_id, flags2 = struct.unpack_from("<QIB", body)
    xid = None
    if flags2 & (GTID_PREPARED_XA | GTID_COMPLETED_XA):
        p = 13 + (8 if flags2 & GTID_GROUP_COMMIT_ID else 0)
        if p + 6 > len(body):
            raise BinlogDecodeError("GTID event of an XA transaction: XA id beyond the event")
        format_id = int.from_bytes(body[p : p + 4], "little", signed=True)
        gtrid_len, bqual_len = body[p + 4], body[p + 5]
        if gtrid_len > 64 or bqual_len > 64 or p + 6 + gtrid_len + bqual_len > len(body):
            raise BinlogDecodeError(f"GTID event of an XA transaction: bad XA id lengths {gtrid_len}/{bqual_len}")
        data = body[p + 6 : p + 6 + gtrid_len + bqual_len]
        xid = format_xid(format_id, data[:gtrid_len], data[gtrid_len:])
    return GtidEvent(header, domain_id, seq_no, flags2, xid)


def _xa_prepare(header: EventHeader, body: bytes) -> XaPrepareEvent:
    # one_phase(1) formatID(4) gtrid_length(4) bqual_length(4) data
    if len(body) < 13:
        raise BinlogDecodeError("XA_PREPARE event too short")
    one_phase = body[0] != 0
    format_id, gtrid_len, bqual_len = struct.unpack_from("<iII", body, 1)
    if gtrid_len > 64 or bqual_len > 64 or 13 + gtrid_len + bqual_len > len(body):
        raise BinlogDecodeError(f"XA_PREPARE event: bad XA id lengths {gtrid_len}/{bqual_len}")
    data = body[13 : 13 + gtrid_len + bqual_len]
    return XaPrepareEvent(header, format_xid(format_id, data[:gtrid_len], data[gtrid_len:]), one_phase)


def file_index(binlog_file: str) -> int:
    """`binlog.000042` -> 42: the file part of an event's sortable position."""
    _, _, suffix = binlog_file.rpartition(".")
    if not suffix.isdigit():
        raise BinlogDecodeError(f"binlog file name {binlog_file!r} has no numeric suffix")
    return int(suffix)


@dataclass
class BinlogDecoder:
    """Decodes one replication stream's events in order. One instance per connection."""

    # collation id -> charset name (information_schema.COLLATIONS, read once at connect time)
    collations: dict[int, str] = field(default_factory=lambda: dict(ct.DEFAULT_COLLATIONS))
    # (db, table) -> keep? Rows of tables not kept are not decoded at all.
    table_filter: Callable[[str, str], bool] = lambda _db, _table: True
    verify_checksum: bool = True
    checksum: bool = False  # set by FORMAT_DESCRIPTION
    mariadb: bool = True  # set by FORMAT_DESCRIPTION: MySQL and MariaDB count character columns differently
    _post_header: bytes = b""
    _tables: dict[int, TableSchema | None] = field(default_factory=dict)
    _table_cache: dict[bytes, TableSchema | None] = field(default_factory=dict)
    _broken: dict[int, str] = field(default_factory=dict)

    def decode(self, data: bytes, inner: bool = False) -> BinlogEvent:
        """One event's bytes → the event. `inner`: an event from inside a TRANSACTION_PAYLOAD (no checksum)."""
        if len(data) < HEADER_LEN:
            raise BinlogDecodeError(f"event of {len(data)} bytes is shorter than its header")
        header = EventHeader(*HEADER.unpack_from(data))
        if header.size != len(data):
            raise BinlogDecodeError(f"event header says {header.size} bytes, got {len(data)}")
        if header.type == FORMAT_DESCRIPTION:
            return self._format_description(header, data)
        body_end = len(data)
        if self.checksum and header.type != HEARTBEAT and not inner:
            if len(data) < HEADER_LEN + 4:
                raise BinlogDecodeError("event too short for its checksum")
            body_end -= 4
            if self.verify_checksum and zlib.crc32(data[:body_end]) != int.from_bytes(data[body_end:], "little"):
                raise BinlogDecodeError(f"CRC32 mismatch in event type {header.type} ending at {header.log_pos}")
        body = data[HEADER_LEN:body_end]
        t = header.type
        if t in ROWS_KIND:
            return self._rows(header, body)
        if t == TABLE_MAP:
            return self._table_map(header, body)
        if t == MARIADB_GTID:
            return _gtid(header, body)
        if t == XA_PREPARE:
            return _xa_prepare(header, body)
        if t == XID:
            if len(body) < 8:
                raise BinlogDecodeError("XID event too short")
            return XidEvent(header, int.from_bytes(body[:8], "little"))
        if t == QUERY:
            return self._query(header, body)
        if t == ROTATE:
            if len(body) < 8:
                raise BinlogDecodeError("ROTATE event too short")
            return RotateEvent(header, body[8:].decode("utf-8", "replace"), int.from_bytes(body[:8], "little"))
        if t == MARIADB_GTID_LIST:
            return self._gtid_list(header, body)
        if t == HEARTBEAT:
            return HeartbeatEvent(header)
        if t in MARIADB_COMPRESSED:
            return UnsupportedEvent(header, "MariaDB compressed binlog events (log_bin_compress=ON)")
        if t in _MYSQL_ONLY:
            return mysql_events.decode(header, body)  # MySQL's own events live beside this module
        return OtherEvent(header)

    # -- individual events -----------------------------------------------------------------------------

    def _format_description(self, header: EventHeader, data: bytes) -> FormatDescriptionEvent:
        body = data[HEADER_LEN:]
        if len(body) < 57:
            raise BinlogDecodeError("FORMAT_DESCRIPTION event too short")
        version = int.from_bytes(body[:2], "little")
        server_version = body[2:52].split(b"\x00", 1)[0].decode("ascii", "replace")
        if body[56] != HEADER_LEN:
            raise BinlogDecodeError(f"event header length {body[56]}, only {HEADER_LEN} is supported")
        # Servers since MySQL 5.6.1 / MariaDB 5.3 end the event with the checksum algorithm (1 byte)
        # and its CRC (4 bytes); the post-header length array sits in between.
        alg = body[-5]
        if alg not in (0, 1):
            raise BinlogDecodeError(f"unknown binlog checksum algorithm {alg}")
        if alg == 1 and self.verify_checksum and zlib.crc32(data[:-4]) != int.from_bytes(data[-4:], "little"):
            raise BinlogDecodeError("CRC32 mismatch in FORMAT_DESCRIPTION event")
        self._post_header = body[57:-5]
        self.checksum = alg == 1
        self.mariadb = "mariadb" in server_version.lower()
        return FormatDescriptionEvent(header, version, server_version, self.checksum)

    def _post_header_len(self, event_type: int, default: int) -> int:
        if 0 < event_type <= len(self._post_header):
            return self._post_header[event_type - 1]
        return default

    def _query(self, header: EventHeader, body: bytes) -> QueryEvent:
        if len(body) < 13:
            raise BinlogDecodeError("QUERY event too short")
        db_len = body[8]
        error_code, status_len = struct.unpack_from("<HH", body, 9)
        p = self._post_header_len(QUERY, 13) + status_len
        if p + db_len + 1 > len(body):
            raise BinlogDecodeError("QUERY event: database name beyond the event")
        db = body[p : p + db_len].decode("utf-8", "replace")
        query = body[p + db_len + 1 :].decode("utf-8", "replace")
        return QueryEvent(header, db, query, error_code)

    def _gtid_list(self, header: EventHeader, body: bytes) -> GtidListEvent:
        if len(body) < 4:
            raise BinlogDecodeError("GTID_LIST event too short")
        count = int.from_bytes(body[:4], "little") & 0x0FFFFFFF
        if 4 + count * 16 > len(body):
            raise BinlogDecodeError(f"GTID_LIST event: {count} entries do not fit")
        gtids = []
        for i in range(count):
            domain, server, seq = struct.unpack_from("<IIQ", body, 4 + i * 16)
            gtids.append(f"{domain}-{server}-{seq}")
        return GtidListEvent(header, tuple(gtids))

    def _table_id(self, body: bytes, event_type: int) -> tuple[int, int]:
        """The table id and the offset after it and the 2-byte flags. (A v2 rows event's post-header
        also holds its extra-data length, which MySQL counts in the FORMAT_DESCRIPTION's post-header
        length: 10; the caller reads that field itself.)"""
        post = self._post_header_len(event_type, 8)
        id_len = 4 if post == 6 else 6
        if len(body) < id_len + 2:
            raise BinlogDecodeError("event too short for a table id")
        return int.from_bytes(body[:id_len], "little"), id_len + 2

    def _table_map(self, header: EventHeader, body: bytes) -> TableMapEvent:
        table_id, p = self._table_id(body, TABLE_MAP)
        key = body
        if key in self._table_cache:  # the same table map repeats in every transaction
            schema = self._table_cache[key]
            self._tables[table_id] = schema
            return TableMapEvent(header, table_id, schema.db if schema else "", schema.table if schema else "", schema)
        try:
            db_len = body[p]
            db = body[p + 1 : p + 1 + db_len].decode("utf-8")
            p += db_len + 2
            tbl_len = body[p]
            table = body[p + 1 : p + 1 + tbl_len].decode("utf-8")
            p += tbl_len + 2
        except (IndexError, UnicodeDecodeError) as exc:
            raise BinlogDecodeError(f"TABLE_MAP: bad table name: {exc}") from None
        if not self.table_filter(db, table):
            self._remember(key, table_id, None)
            return TableMapEvent(header, table_id, db, table, None)
        try:
            schema = self._parse_columns(body, p, table_id, db, table)
        except BinlogDecodeError as exc:
            self._tables.pop(table_id, None)
            self._broken[table_id] = f"{db}.{table}: {exc}"  # its rows events fail with this reason
            raise
        self._broken.pop(table_id, None)
        self._remember(key, table_id, schema)
        return TableMapEvent(header, table_id, db, table, schema)

    def forget_tables(self) -> None:
        """Decode every table map again from the next one on (the table filter changed)."""
        self._table_cache.clear()

    def table_of(self, data: bytes) -> str | None:
        """Best effort, for error messages: the "db.table" a TABLE_MAP or rows event is about."""
        try:
            event_type = data[4]
            body = data[HEADER_LEN:]
            if event_type == TABLE_MAP:
                _table_id, p = self._table_id(body, TABLE_MAP)
                db = body[p + 1 : p + 1 + body[p]].decode("utf-8", "replace")
                p += body[p] + 2
                return f"{db}.{body[p + 1 : p + 1 + body[p]].decode('utf-8', 'replace')}"
            if event_type in ROWS_KIND:
                table_id, _ = self._table_id(body, event_type)
                schema = self._tables.get(table_id)
                if schema is not None:
                    return schema.qualified
                broken = self._broken.get(table_id)
                return broken.split(":", 1)[0] if broken else None
        except (IndexError, BinlogDecodeError):
            return None
        return None

    def _remember(self, key: bytes, table_id: int, schema: TableSchema | None) -> None:
        if len(self._table_cache) > 4096:
            self._table_cache.clear()
        self._table_cache[key] = schema
        self._tables[table_id] = schema

    def _parse_columns(self, body: bytes, p: int, table_id: int, db: str, table: str) -> TableSchema:
        where = f"TABLE_MAP {db}.{table}"
        ncols, p = read_lenenc(body, p)
        if p + ncols > len(body):
            raise BinlogDecodeError(f"{where}: {ncols} column types do not fit")
        types = list(body[p : p + ncols])
        p += ncols
        meta_len, p = read_lenenc(body, p)
        meta_end = p + meta_len
        if meta_end > len(body):
            raise BinlogDecodeError(f"{where}: metadata block beyond the event")
        metas: list[int] = []
        for i, t in enumerate(types):
            size = ct.METADATA_SIZE.get(t, 0)
            if p + size > meta_end:
                raise BinlogDecodeError(f"{where}: metadata of column {i} beyond its block")
            if t in (ct.STRING, ct.ENUM, ct.SET):
                real, length = body[p], body[p + 1]
                if real & 0x30 != 0x30:  # CHAR longer than 255 bytes keeps length bits in the type byte
                    length |= ((real & 0x30) ^ 0x30) << 4
                    real |= 0x30
                types[i] = real
                metas.append(length)
            elif t in (ct.NEWDECIMAL, ct.BIT):
                metas.append(body[p] << 8 | body[p + 1] if t == ct.NEWDECIMAL else body[p + 1] << 8 | body[p])
            elif size == 2:
                metas.append(int.from_bytes(body[p : p + 2], "little"))
            elif size == 1:
                metas.append(body[p])
            else:
                metas.append(0)
            p += size
        p = meta_end
        nullable = _bits(body[p : p + (ncols + 7) // 8], ncols)
        p += (ncols + 7) // 8
        opt = self._optional_metadata(body, p, types, where)
        names = opt.get("names")
        if not isinstance(names, list) or len(names) != ncols:
            raise BinlogDecodeError(
                f"{where}: no column names in the binlog; the server needs binlog_row_metadata=FULL"
            )
        unsigned: list[bool] = opt.get("unsigned", [False] * ncols)  # type: ignore[assignment]
        collations: list[int | None] = opt.get("collations", [None] * ncols)  # type: ignore[assignment]
        labels: list[tuple[str, ...]] = opt.get("labels", [()] * ncols)  # type: ignore[assignment]
        invisible: list[bool] = opt.get("invisible", [False] * ncols)  # type: ignore[assignment]
        cols = []
        native: list[ct.NativeColumn | None] = []
        for i in range(ncols):
            col = Column(
                name=names[i], type=types[i], metadata=metas[i], unsigned=unsigned[i],
                collation=collations[i], labels=labels[i], nullable=nullable[i], invisible=invisible[i],
            )  # fmt: skip
            codec_for = self._codec_for(where, col.name)
            cols.append(dataclasses.replace(col, read=ct.make_reader(col, codec_for)))
            text = col.type in _TEXT_TYPES
            native.append(ct.native_column(col, codec_for(col.collation or 0) if text else None))
        pk: tuple[int, ...] = tuple(opt.get("primary_key", ()))  # type: ignore[arg-type]
        if any(i >= ncols for i in pk):
            raise BinlogDecodeError(f"{where}: primary key column index out of range")
        compiled = tuple(c for c in native if c is not None)
        use_native = _native_rows is not None and len(compiled) == ncols
        return TableSchema(table_id, db, table, tuple(cols), pk, compiled if use_native else None)

    def _codec_for(self, where: str, column: str) -> Callable[[int], str | None]:
        def codec(collation: int) -> str | None:
            charset = self.collations.get(collation)
            if charset is None:
                raise BinlogDecodeError(f"{where} column {column}: unknown collation id {collation}")
            if charset == "binary":
                return None
            codec_name = ct.CHARSET_CODECS.get(charset)
            if codec_name is None:
                raise BinlogDecodeError(f"{where} column {column}: character set {charset} is not supported")
            return codec_name

        return codec

    def _optional_metadata(self, body: bytes, p: int, types: list[int], where: str) -> dict[str, object]:
        ncols = len(types)
        numeric = [i for i, t in enumerate(types) if t in ct.NUMERIC_TYPES]
        character_types = ct.CHARACTER_TYPES if self.mariadb else ct.MYSQL_CHARACTER_TYPES
        character = [i for i, t in enumerate(types) if t in character_types]
        enum_set = [i for i, t in enumerate(types) if t in (ct.ENUM, ct.SET)]
        out: dict[str, object] = {}
        collations: list[int | None] = [None] * ncols
        labels: list[tuple[str, ...]] = [()] * ncols
        while p < len(body):
            kind = body[p]
            length, p = read_lenenc(body, p + 1)
            end = p + length
            if end > len(body):
                raise BinlogDecodeError(f"{where}: optional metadata field {kind} beyond the event")
            value = body[p:end]
            if kind == OPT_SIGNEDNESS:
                bits = int.from_bytes(value, "big")
                total = len(value) * 8
                unsigned = [False] * ncols
                for n, i in enumerate(numeric):  # MSB first, one bit per numeric column
                    unsigned[i] = bool(bits >> (total - 1 - n) & 1) if n < total else False
                out["unsigned"] = unsigned
            elif kind in (OPT_DEFAULT_CHARSET, OPT_ENUM_AND_SET_DEFAULT_CHARSET):
                targets = character if kind == OPT_DEFAULT_CHARSET else enum_set
                default, q = read_lenenc(value, 0)
                exceptions: dict[int, int] = {}
                while q < len(value):
                    idx, q = read_lenenc(value, q)
                    coll, q = read_lenenc(value, q)
                    exceptions[idx] = coll
                for n, i in enumerate(targets):
                    collations[i] = exceptions.get(n, default)
            elif kind in (OPT_COLUMN_CHARSET, OPT_ENUM_AND_SET_COLUMN_CHARSET):
                targets = character if kind == OPT_COLUMN_CHARSET else enum_set
                q = 0
                for i in targets:
                    collations[i], q = read_lenenc(value, q)
            elif kind == OPT_COLUMN_NAME:
                names, q = [], 0
                while q < len(value):
                    n, q = read_lenenc(value, q)
                    names.append(value[q : q + n].decode("utf-8", "replace"))
                    q += n
                out["names"] = names
            elif kind in (OPT_SET_STR_VALUE, OPT_ENUM_STR_VALUE):
                wanted = ct.SET if kind == OPT_SET_STR_VALUE else ct.ENUM
                targets = [i for i, t in enumerate(types) if t == wanted]
                q = 0
                for i in targets:
                    count, q = read_lenenc(value, q)
                    items = []
                    for _ in range(count):
                        n, q = read_lenenc(value, q)
                        items.append(value[q : q + n].decode("utf-8", "replace"))
                        q += n
                    labels[i] = tuple(items)
            elif kind == OPT_COLUMN_VISIBILITY:  # MySQL: one bit per column, most significant first; 1 = visible
                bits = int.from_bytes(value, "big")
                total = len(value) * 8
                out["invisible"] = [not bits >> (total - 1 - i) & 1 if i < total else False for i in range(ncols)]
            elif kind == OPT_SIMPLE_PRIMARY_KEY:
                pk, q = [], 0
                while q < len(value):
                    idx, q = read_lenenc(value, q)
                    pk.append(idx)
                out["primary_key"] = pk
            elif kind == OPT_PRIMARY_KEY_WITH_PREFIX:
                pk, q = [], 0
                while q < len(value):
                    idx, q = read_lenenc(value, q)
                    _prefix, q = read_lenenc(value, q)
                    pk.append(idx)
                out["primary_key"] = pk
            p = end
        out["collations"] = collations
        out["labels"] = labels
        return out

    def _rows(self, header: EventHeader, body: bytes) -> RowsEvent:
        kind = ROWS_KIND[header.type]
        table_id, p = self._table_id(body, header.type)
        flags = int.from_bytes(body[p - 2 : p], "little") if p >= 2 else 0
        partial = header.type == PARTIAL_UPDATE_ROWS
        if header.type in (WRITE_ROWS_V2, UPDATE_ROWS_V2, DELETE_ROWS_V2) or partial:
            if p + 2 > len(body):
                raise BinlogDecodeError("rows event too short for its extra data length")
            extra = int.from_bytes(body[p : p + 2], "little")  # counts its own two bytes
            if extra < 2:
                raise BinlogDecodeError(f"rows event with an extra data length of {extra}")
            p += extra
        if table_id not in self._tables:
            if table_id in self._broken:
                raise BinlogDecodeError(
                    f"rows of a table whose TABLE_MAP could not be decoded: {self._broken[table_id]}"
                )
            raise BinlogDecodeError(f"rows event for table id {table_id} without a TABLE_MAP before it")
        schema = self._tables[table_id]
        end_of_statement = bool(flags & 1)
        if schema is None:
            return RowsEvent(header, kind, table_id, None, (), end_of_statement)
        ncols, p = read_lenenc(body, p)
        if ncols != len(schema.columns):
            raise BinlogDecodeError(
                f"rows event for {schema.qualified} has {ncols} columns, its TABLE_MAP {len(schema.columns)}"
            )
        nbytes = (ncols + 7) // 8
        present_idx = _set_bits(body[p : p + nbytes], ncols)
        p += nbytes
        after_idx = present_idx
        if kind == "update":
            after_idx = _set_bits(body[p : p + nbytes], ncols)
            p += nbytes
        if (not present_idx or not after_idx) and p < len(body):  # a row of no columns takes no bytes: no end
            raise BinlogDecodeError(f"{schema.qualified} rows event at {header.start_pos} names no columns")
        if partial:
            partial_rows = _partial_rows(body, p, [schema.columns[i] for i in present_idx],
                                         [schema.columns[i] for i in after_idx],
                                         f"{schema.qualified} rows event at {header.start_pos}")  # fmt: skip
            return RowsEvent(header, kind, table_id, schema, partial_rows, end_of_statement)
        if schema.native is not None and _native_rows is not None:
            decoded = _native_rows(body, p, _NATIVE_KIND[kind], schema.native, present_idx, after_idx)
            if decoded is not None:
                return RowsEvent(header, kind, table_id, schema, tuple(decoded), end_of_statement)
            # else: something is wrong with the event; the Python readers below say what
        columns = schema.columns
        present = [columns[i] for i in present_idx]
        present_after = present if after_idx is present_idx else [columns[i] for i in after_idx]
        rows: list[tuple[Row | None, Row | None]] = []
        end = len(body)
        where = f"{schema.qualified} rows event at {header.start_pos}"
        while p < end:
            first, p = _read_row(body, p, present, where)
            if kind == "insert":
                rows.append((None, first))
            elif kind == "delete":
                rows.append((first, None))
            else:
                second, p = _read_row(body, p, present_after, where)
                rows.append((first, second))
        if p != end:
            raise BinlogDecodeError(f"{where}: rows overran the event by {p - end} bytes")
        return RowsEvent(header, kind, table_id, schema, tuple(rows), end_of_statement)


_PARTIAL_JSON_UPDATES = 1  # value_options bit: some JSON columns of the after image hold diffs


def _partial_rows(body: bytes, p: int, before_cols: list[Column], after_cols: list[Column],
                  where: str) -> tuple[tuple[Row | None, Row | None], ...]:  # fmt: skip
    """Rows of MySQL's Update_rows_partial: each after image starts with its value options and, when they
    say so, one bit per JSON column of the image telling whether that column holds diffs."""
    from cdcflow.sources.mysql.binlog.partial_json import apply_diffs

    json_cols = [c for c in after_cols if c.type == ct.JSON]
    rows: list[tuple[Row | None, Row | None]] = []
    end = len(body)
    while p < end:
        before, p = _read_row(body, p, before_cols, where)
        options, p = read_lenenc(body, p)
        partial: set[str] = set()
        if options & _PARTIAL_JSON_UPDATES:
            nbytes = (len(json_cols) + 7) // 8
            if p + nbytes > end:
                raise BinlogDecodeError(f"{where}: partial JSON bitmap beyond the event")
            bits = int.from_bytes(body[p : p + nbytes], "little")
            partial = {c.name for i, c in enumerate(json_cols) if bits >> i & 1}
            p += nbytes
        after, p = _read_row(body, p, after_cols, where, diffs=partial)
        for name in partial:
            if after.get(name) is not None:
                after[name] = apply_diffs(before.get(name), after[name], f"{where}, column {name}")  # type: ignore[arg-type]
        rows.append((before, after))
    if p != end:
        raise BinlogDecodeError(f"{where}: rows overran the event by {p - end} bytes")
    return tuple(rows)


def _read_row(buf: bytes, p: int, present: list[Column], where: str,
              diffs: set[str] | None = None) -> tuple[Row, int]:  # fmt: skip
    """One row image. Columns named in `diffs` (partial JSON) are returned as their raw diff bytes."""
    n = len(present)
    nbytes = (n + 7) // 8
    if p + nbytes > len(buf):
        raise BinlogDecodeError(f"{where}: null bitmap beyond the event")
    nulls = int.from_bytes(buf[p : p + nbytes], "little")
    p += nbytes
    row: Row = {}
    for i, col in enumerate(present):
        if nulls >> i & 1:
            row[col.name] = None
        elif diffs and col.name in diffs:
            size = col.metadata
            if p + size > len(buf):
                raise BinlogDecodeError(f"{where}, column {col.name}: partial JSON length beyond the event")
            n = int.from_bytes(buf[p : p + size], "little")
            if p + size + n > len(buf):
                raise BinlogDecodeError(f"{where}, column {col.name}: partial JSON diffs beyond the event")
            row[col.name] = buf[p + size : p + size + n]
            p += size + n
        else:
            try:
                row[col.name], p = col.read(buf, p)  # type: ignore[misc]
            except BinlogDecodeError as exc:
                raise BinlogDecodeError(f"{where}, column {col.name}: {exc}") from None
    return row, p
