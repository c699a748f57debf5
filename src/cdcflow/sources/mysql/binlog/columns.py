"""Column types of row events and how each value is decoded from its binlog bytes. Pure: no I/O.

A TABLE_MAP event describes a table (column types, per-type metadata and, with
`binlog_row_metadata=FULL`, names, signedness, charsets, ENUM/SET labels and the primary key).
`compile_table` turns that description into one reader per column, so decoding a row is a loop
over ready-made functions. The JSON rendering of each type is documented in docs/mysql.md.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from cdcflow.sources.mysql.binlog.decimals import decimal_reader
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.mysql_json import to_text

# MySQL/MariaDB field types as they appear in TABLE_MAP (include/mysql_com.h, enum_field_types).
DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = 10, 11, 12, 13, 14, 15, 16, 17, 18, 19
VARCHAR_COMPRESSED, BLOB_COMPRESSED = 140, 141  # MariaDB compressed columns
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING, GEOMETRY = 249, 250, 251, 252, 253, 254, 255

TYPE_NAMES = {
    DECIMAL: "DECIMAL(old)", TINY: "TINYINT", SHORT: "SMALLINT", LONG: "INT", FLOAT: "FLOAT", DOUBLE: "DOUBLE",
    NULL: "NULL", TIMESTAMP: "TIMESTAMP(old)", LONGLONG: "BIGINT", INT24: "MEDIUMINT", DATE: "DATE",
    TIME: "TIME(old)", DATETIME: "DATETIME(old)", YEAR: "YEAR", NEWDATE: "NEWDATE", VARCHAR: "VARCHAR", BIT: "BIT",
    TIMESTAMP2: "TIMESTAMP", DATETIME2: "DATETIME", TIME2: "TIME", VARCHAR_COMPRESSED: "VARCHAR COMPRESSED",
    BLOB_COMPRESSED: "BLOB COMPRESSED", JSON: "JSON", NEWDECIMAL: "DECIMAL", ENUM: "ENUM", SET: "SET",
    TINY_BLOB: "TINYBLOB", MEDIUM_BLOB: "MEDIUMBLOB", LONG_BLOB: "LONGBLOB", BLOB: "BLOB", VAR_STRING: "VARCHAR",
    STRING: "CHAR", GEOMETRY: "GEOMETRY",
}  # fmt: skip

# How many metadata bytes each type has in TABLE_MAP (all others: none).
METADATA_SIZE = {
    FLOAT: 1, DOUBLE: 1, BIT: 2, VARCHAR: 2, VAR_STRING: 2, NEWDECIMAL: 2, BLOB: 1, GEOMETRY: 1, JSON: 1,
    TINY_BLOB: 1, MEDIUM_BLOB: 1, LONG_BLOB: 1, STRING: 2, ENUM: 2, SET: 2, TIMESTAMP2: 1, DATETIME2: 1, TIME2: 1,
    VARCHAR_COMPRESSED: 2, BLOB_COMPRESSED: 1,
}  # fmt: skip

# Columns the optional metadata counts as numeric (SIGNEDNESS bits) and as character (charsets).
NUMERIC_TYPES = frozenset({TINY, SHORT, INT24, LONG, LONGLONG, NEWDECIMAL, FLOAT, DOUBLE, YEAR})
CHARACTER_TYPES = frozenset({STRING, VAR_STRING, VARCHAR, BLOB, GEOMETRY})  # GEOMETRY: MariaDB counts it
MYSQL_CHARACTER_TYPES = CHARACTER_TYPES - {GEOMETRY}  # MySQL 8.0 does not (seen in its TABLE_MAP events)
BINARY_COLLATION = 63

# MySQL charset name -> Python codec. Anything else is refused with a clear error at TABLE_MAP time.
CHARSET_CODECS = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252", "ascii": "ascii",
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "cp1250": "cp1250",
    "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257", "latin2": "iso8859-2", "latin5": "iso8859-9",
    "latin7": "iso8859-13", "greek": "iso8859-7", "hebrew": "iso8859-8", "koi8r": "koi8-r", "koi8u": "koi8-u",
    "cp850": "cp850", "cp852": "cp852", "cp866": "cp866", "macroman": "mac-roman", "macce": "mac-latin2",
    "gbk": "gbk", "gb2312": "gb2312", "gb18030": "gb18030", "big5": "big5", "sjis": "shift_jis", "cp932": "cp932",
    "ujis": "euc_jp", "eucjpms": "euc_jp", "euckr": "euc_kr", "tis620": "tis-620",
}  # fmt: skip
# The common collations, so decoding works before (or without) reading information_schema.COLLATIONS.
DEFAULT_COLLATIONS = {
    8: "latin1", 47: "latin1", 48: "latin1", 49: "latin1", 5: "latin1", 15: "latin1", 31: "latin1", 94: "latin1",
    11: "ascii", 65: "ascii", 33: "utf8mb3", 83: "utf8mb3", 45: "utf8mb4", 46: "utf8mb4", 224: "utf8mb4",
    255: "utf8mb4", 63: "binary",
}  # fmt: skip

Reader = Callable[[bytes, int], tuple[object, int]]
# (column name, kind, a, b) as native/src/lib.rs `read_value` takes them.
NativeColumn = tuple[str, int, int, int]


@dataclass(frozen=True)
class Column:
    name: str
    type: int  # the type in TABLE_MAP (for CHAR/ENUM/SET: the real type from the metadata)
    metadata: int
    unsigned: bool
    collation: int | None  # character columns, ENUM and SET
    labels: tuple[str, ...] = ()  # ENUM / SET labels in definition order
    nullable: bool = True
    read: Reader | None = None
    invisible: bool = False  # MySQL 8.0.23+ INVISIBLE columns (a generated invisible primary key is one)

    @property
    def type_name(self) -> str:
        base = TYPE_NAMES.get(self.type, f"type {self.type}")
        if self.type in (STRING, VAR_STRING, VARCHAR, BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB):
            if self.collation == BINARY_COLLATION:
                base = {STRING: "BINARY", VAR_STRING: "VARBINARY", VARCHAR: "VARBINARY"}.get(self.type, base)
            elif self.type == BLOB:
                base = "TEXT"
        return base + (" UNSIGNED" if self.unsigned else "")

    @property
    def sql_type(self) -> str:
        """The type with what TABLE_MAP tells of its size: "DECIMAL(10,2)", "DATETIME(6)", "BIT(12)".
        Sinks that create typed tables (Phoenix) need the exact precision; CHAR/VARCHAR lengths
        are in bytes in TABLE_MAP, so they are left out rather than guessed."""
        t, meta = self.type, self.metadata
        if t == NEWDECIMAL:
            return f"DECIMAL({meta >> 8},{meta & 0xFF})" + (" UNSIGNED" if self.unsigned else "")
        if t in (TIME2, DATETIME2, TIMESTAMP2):
            return f"{TYPE_NAMES[t]}({meta})"
        if t == BIT:
            return f"BIT({(meta >> 8) * 8 + (meta & 0xFF)})"
        if t == STRING and self.collation == BINARY_COLLATION:
            return f"BINARY({meta})"  # binary "characters" are bytes, so the byte length is exact
        return self.type_name


@dataclass(frozen=True)
class TableSchema:
    """A table as of one TABLE_MAP event: enough to decode its rows without asking the server."""

    table_id: int
    db: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[int, ...]  # column indexes, in key order; () if the table has none
    # Per column, how the compiled row decoder (cdcflow._native.mysql_rows) reads it; None: a column
    # it does not decode, so the table's rows take the Python readers.
    native: tuple[NativeColumn, ...] | None = field(default=None, compare=False)

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.table}"

    def describe(self) -> list[dict[str, object]]:
        """The schema as plain data, for the schema-history topic and error messages. Made once per
        schema: the capture compares it at every TABLE_MAP (once per transaction)."""
        described: list[dict[str, object]] | None = self.__dict__.get("_described")
        if described is None:
            described = self._describe()
            object.__setattr__(self, "_described", described)
        return described

    def _describe(self) -> list[dict[str, object]]:
        return [
            {
                "name": c.name,
                "type": c.type_name,
                "sql_type": c.sql_type,
                "nullable": c.nullable,
                "key": i in self.primary_key,
                # position in the primary key (its order is the row-key order a sink should keep)
                "key_order": self.primary_key.index(i) if i in self.primary_key else None,
                **({"invisible": True} if c.invisible else {}),
            }
            for i, c in enumerate(self.columns)
        ]


# -- readers: each takes (buffer, offset) and returns (value, new offset) ------------------------------


def _need(buf: bytes, off: int, n: int, what: str) -> None:
    if off + n > len(buf):
        raise BinlogDecodeError(f"{what}: needs {n} bytes at offset {off}, row data has {len(buf) - off}")


def _int_reader(size: int, unsigned: bool) -> Reader:
    fmt = {1: "B", 2: "H", 4: "I", 8: "Q"}.get(size)
    if fmt is not None:
        st = struct.Struct("<" + (fmt if unsigned else fmt.lower()))
        unpack = st.unpack_from

        def read_int(buf: bytes, off: int) -> tuple[object, int]:
            try:
                return unpack(buf, off)[0], off + size
            except struct.error as exc:
                raise BinlogDecodeError(f"integer at offset {off}: {exc}") from None

        return read_int

    def read_int24(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, 3, "MEDIUMINT")
        return int.from_bytes(buf[off : off + 3], "little", signed=not unsigned), off + 3

    return read_int24


def _float_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 4, "FLOAT")
    raw = buf[off : off + 4]
    value: float = struct.unpack("<f", raw)[0]
    # The shortest decimal that reads back as the same float32: what the server shows for FLOAT.
    if value == value and value not in (float("inf"), float("-inf")):
        for digits in range(6, 10):
            short = float(f"{value:.{digits}g}")
            if struct.pack("<f", short) == raw:
                return short, off + 4
    return value, off + 4


_DOUBLE = struct.Struct("<d")


def _double_reader(buf: bytes, off: int) -> tuple[object, int]:
    try:
        return _DOUBLE.unpack_from(buf, off)[0], off + 8
    except struct.error as exc:
        raise BinlogDecodeError(f"DOUBLE at offset {off}: {exc}") from None


def _json_reader(meta: int, where: str) -> Reader:
    """MySQL's binary JSON, as the JSON text MySQL prints (mysql_json.py)."""
    raw = _length_prefixed(meta, where)

    def read_json(buf: bytes, off: int) -> tuple[object, int]:
        data, off = raw(buf, off)
        try:
            return to_text(data), off
        except BinlogDecodeError as exc:
            raise BinlogDecodeError(f"{where}: {exc}") from None

    return read_json


def _frac_reader_size(fsp: int) -> int:
    if not 0 <= fsp <= 6:
        raise BinlogDecodeError(f"fractional seconds precision {fsp} is not 0..6")
    return (fsp + 1) // 2


def _frac_text(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def _datetime2_reader(fsp: int) -> Reader:
    nfrac = _frac_reader_size(fsp)
    scale = (0, 10000, 100, 1)[nfrac]

    def read_datetime2(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, 5 + nfrac, "DATETIME")
        packed = int.from_bytes(buf[off : off + 5], "big") - 0x8000000000
        micro = int.from_bytes(buf[off + 5 : off + 5 + nfrac], "big") * scale if nfrac else 0
        if packed < 0:
            raise BinlogDecodeError(f"DATETIME bytes {buf[off : off + 5].hex()} are below the format's range")
        ymd, hms = packed >> 17, packed & 0x1FFFF
        ym, day = ymd >> 5, ymd & 31
        year, month = divmod(ym, 13)
        text = f"{year:04d}-{month:02d}-{day:02d} {hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}"
        return text + _frac_text(micro, fsp), off + 5 + nfrac

    return read_datetime2


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _timestamp2_reader(fsp: int) -> Reader:
    nfrac = _frac_reader_size(fsp)
    scale = (0, 10000, 100, 1)[nfrac]

    def read_timestamp2(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, 4 + nfrac, "TIMESTAMP")
        seconds = int.from_bytes(buf[off : off + 4], "big")
        micro = int.from_bytes(buf[off + 4 : off + 4 + nfrac], "big") * scale if nfrac else 0
        return _render_timestamp(seconds, micro, fsp), off + 4 + nfrac

    return read_timestamp2


def _render_timestamp(seconds: int, micro: int, fsp: int) -> str:
    """A TIMESTAMP is an instant (UTC seconds in the binlog): ISO 8601 in UTC with a Z."""
    if seconds == 0 and micro == 0:
        return "0000-00-00T00:00:00Z"  # MySQL's zero timestamp; not NULL
    t = _EPOCH + dt.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + _frac_text(micro, fsp) + "Z"


def _time2_reader(fsp: int) -> Reader:
    nfrac = _frac_reader_size(fsp)

    def read_time2(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, 3 + nfrac, "TIME")
        if nfrac == 3:
            packed = int.from_bytes(buf[off : off + 6], "big") - 0x800000000000
        else:
            intpart = int.from_bytes(buf[off : off + 3], "big") - 0x800000
            frac = int.from_bytes(buf[off + 3 : off + 3 + nfrac], "big") if nfrac else 0
            if intpart < 0 and frac:  # negative times store the fraction as its complement
                intpart += 1
                frac -= 0x100 if nfrac == 1 else 0x10000
            packed = (intpart << 24) + frac * (10000 if nfrac == 1 else 100 if nfrac == 2 else 0)
        sign = "-" if packed < 0 else ""
        packed = abs(packed)
        hms, micro = packed >> 24, packed & 0xFFFFFF
        text = f"{sign}{(hms >> 12) & 0x3FF:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}"
        return text + _frac_text(micro, fsp), off + 3 + nfrac

    return read_time2


def _date_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 3, "DATE")
    v = int.from_bytes(buf[off : off + 3], "little")
    return f"{v >> 9:04d}-{(v >> 5) & 15:02d}-{v & 31:02d}", off + 3


def _old_datetime_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 8, "DATETIME(old)")
    v = int.from_bytes(buf[off : off + 8], "little")
    d, t = divmod(v, 1000000)
    return (
        f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d} {t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}",
        off + 8,
    )


def _old_timestamp_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 4, "TIMESTAMP(old)")
    return _render_timestamp(int.from_bytes(buf[off : off + 4], "little"), 0, 0), off + 4


def _old_time_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 3, "TIME(old)")
    v = int.from_bytes(buf[off : off + 3], "little", signed=True)
    sign, v = ("-" if v < 0 else ""), abs(v)
    return f"{sign}{v // 10000:02d}:{v // 100 % 100:02d}:{v % 100:02d}", off + 3


def _year_reader(buf: bytes, off: int) -> tuple[object, int]:
    _need(buf, off, 1, "YEAR")
    v = buf[off]
    return (1900 + v if v else 0), off + 1


def _bit_reader(meta: int) -> Reader:
    nbytes = (meta >> 8) + (1 if meta & 0xFF else 0)

    def read_bit(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, nbytes, "BIT")
        return int.from_bytes(buf[off : off + nbytes], "big"), off + nbytes

    return read_bit


def _length_prefixed(prefix: int, what: str) -> Callable[[bytes, int], tuple[bytes, int]]:
    def read_raw(buf: bytes, off: int) -> tuple[bytes, int]:
        _need(buf, off, prefix, what)
        n = int.from_bytes(buf[off : off + prefix], "little")
        start = off + prefix
        _need(buf, start, n, what)
        return buf[start : start + n], start + n

    return read_raw


def _text_or_binary(raw_reader: Callable[[bytes, int], tuple[bytes, int]], codec: str | None, what: str,
                    pad_to: int = 0) -> Reader:  # fmt: skip
    if codec is None:

        def read_binary(buf: bytes, off: int) -> tuple[object, int]:
            value, off = raw_reader(buf, off)
            if pad_to and len(value) < pad_to:  # BINARY(n): the binlog drops trailing zero bytes
                value = value + b"\x00" * (pad_to - len(value))
            return base64.b64encode(value).decode("ascii"), off

        return read_binary

    def read_text(buf: bytes, off: int) -> tuple[object, int]:
        value, off = raw_reader(buf, off)
        try:
            return value.decode(codec), off
        except UnicodeDecodeError as exc:
            raise BinlogDecodeError(f"{what}: bytes are not valid {codec}: {exc}") from None

    return read_text


def _enum_reader(size: int, labels: tuple[str, ...], name: str) -> Reader:
    def read_enum(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, size, "ENUM")
        index = int.from_bytes(buf[off : off + size], "little")
        if index == 0:
            return "", off + size  # the server's "invalid value" entry
        if index > len(labels):
            raise BinlogDecodeError(f"ENUM column {name}: index {index} but only {len(labels)} labels")
        return labels[index - 1], off + size

    return read_enum


def _set_reader(size: int, labels: tuple[str, ...], name: str) -> Reader:
    def read_set(buf: bytes, off: int) -> tuple[object, int]:
        _need(buf, off, size, "SET")
        bits = int.from_bytes(buf[off : off + size], "little")
        if bits >> len(labels):
            raise BinlogDecodeError(f"SET column {name}: bit beyond its {len(labels)} labels")
        # The server's own rendering: the members in definition order, comma-separated.
        return ",".join(label for i, label in enumerate(labels) if bits >> i & 1), off + size

    return read_set


def make_reader(col: Column, codec_for: Callable[[int], str | None]) -> Reader:
    """The reader of one column, from its type and metadata. Raises BinlogDecodeError if unsupported."""
    t, meta, where = col.type, col.metadata, f"column {col.name} ({col.type_name})"
    if t in (TINY, SHORT, LONG, LONGLONG, INT24):
        return _int_reader({TINY: 1, SHORT: 2, INT24: 3, LONG: 4, LONGLONG: 8}[t], col.unsigned)
    if t == FLOAT:
        return _float_reader
    if t == DOUBLE:
        return _double_reader
    if t == NEWDECIMAL:
        return decimal_reader(meta >> 8, meta & 0xFF)
    if t in (DATE, NEWDATE):
        return _date_reader
    if t == DATETIME2:
        return _datetime2_reader(meta)
    if t == TIMESTAMP2:
        return _timestamp2_reader(meta)
    if t == TIME2:
        return _time2_reader(meta)
    if t == DATETIME:
        return _old_datetime_reader
    if t == TIMESTAMP:
        return _old_timestamp_reader
    if t == TIME:
        return _old_time_reader
    if t == YEAR:
        return _year_reader
    if t == BIT:
        return _bit_reader(meta)
    if t == ENUM:
        return _enum_reader(meta & 0xFF, col.labels, col.name)
    if t == SET:
        return _set_reader(meta & 0xFF, col.labels, col.name)
    if t in (VARCHAR, VAR_STRING):
        prefix = 1 if meta < 256 else 2
        return _text_or_binary(_length_prefixed(prefix, where), codec_for(col.collation or 0), where)
    if t == STRING:
        prefix = 1 if meta < 256 else 2
        codec = codec_for(col.collation or 0)
        return _text_or_binary(_length_prefixed(prefix, where), codec, where, pad_to=meta if codec is None else 0)
    if t in (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB):
        if not 1 <= meta <= 4:
            raise BinlogDecodeError(f"{where}: length prefix of {meta} bytes")
        return _text_or_binary(_length_prefixed(meta, where), codec_for(col.collation or 0), where)
    if t == GEOMETRY:
        if not 1 <= meta <= 4:
            raise BinlogDecodeError(f"{where}: length prefix of {meta} bytes")
        return _text_or_binary(_length_prefixed(meta, where), None, where)  # WKB with SRID, base64
    if t == JSON:
        if not 1 <= meta <= 4:
            raise BinlogDecodeError(f"{where}: length prefix of {meta} bytes")
        return _json_reader(meta, where)
    if t in (VARCHAR_COMPRESSED, BLOB_COMPRESSED):
        raise BinlogDecodeError(f"{where}: MariaDB compressed columns are not supported")
    raise BinlogDecodeError(f"{where}: column type {t} is not supported")


# Column kinds of the compiled row decoder (native/src/lib.rs); each decodes exactly as the reader above.
_NATIVE_INT, _NATIVE_DOUBLE, _NATIVE_DECIMAL, _NATIVE_DATE, _NATIVE_DATETIME2 = 1, 2, 3, 4, 5
_NATIVE_TIMESTAMP2, _NATIVE_YEAR, _NATIVE_UTF8, _NATIVE_ASCII, _NATIVE_BINARY = 6, 7, 8, 9, 10
_NATIVE_CODECS = {"utf-8": _NATIVE_UTF8, "ascii": _NATIVE_ASCII, None: _NATIVE_BINARY}


def native_column(col: Column, codec: str | None) -> NativeColumn | None:
    """How the compiled decoder reads `col` (`codec`: its character set's, None for binary), or None if
    it does not decode that type: the common types only, the rest stays with the Python readers."""
    t, meta, name = col.type, col.metadata, col.name
    if t in (TINY, SHORT, LONG, LONGLONG, INT24):
        return name, _NATIVE_INT, {TINY: 1, SHORT: 2, INT24: 3, LONG: 4, LONGLONG: 8}[t], int(col.unsigned)
    if t == DOUBLE:
        return name, _NATIVE_DOUBLE, 0, 0
    if t == NEWDECIMAL:
        return name, _NATIVE_DECIMAL, meta >> 8, meta & 0xFF
    if t in (DATE, NEWDATE):
        return name, _NATIVE_DATE, 0, 0
    if t == DATETIME2:
        return name, _NATIVE_DATETIME2, meta, 0
    if t == TIMESTAMP2:
        return name, _NATIVE_TIMESTAMP2, meta, 0
    if t == YEAR:
        return name, _NATIVE_YEAR, 0, 0
    kind = _NATIVE_CODECS.get(codec, 0)
    if not kind:
        return None
    if t in (VARCHAR, VAR_STRING):
        return name, kind, 1 if meta < 256 else 2, 0
    if t == STRING:
        return name, kind, 1 if meta < 256 else 2, meta if codec is None else 0
    if t in (BLOB, TINY_BLOB, MEDIUM_BLOB, LONG_BLOB):
        return name, kind, meta, 0
    return None
