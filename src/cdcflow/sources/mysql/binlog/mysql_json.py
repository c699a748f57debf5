"""MySQL's binary JSON (the JSON column type of MySQL 5.7+; MariaDB's JSON is plain text) → JSON text.

The text is the one MySQL itself prints for the value (`SELECT j`): keys in stored order (MySQL
sorts them by length, then bytes, when it stores a document), `", "` and `": "` separators, the
same string escapes, DECIMAL and temporal scalars as MySQL renders them. So a change event's JSON
column equals `SELECT *` of the row.

Layout (MySQL 8.0 `sql-common/json_binary.cc`), every integer little-endian:

    value        type (1 byte), then its data
    type         0/1 object small/large, 2/3 array small/large, 4 literal (0 null, 1 true,
                 2 false), 5/6 int16/uint16, 7/8 int32/uint32, 9/10 int64/uint64, 11 double,
                 12 string (length as 7-bit groups, low first, then UTF-8), 15 opaque (a MySQL
                 column type byte, length as 7-bit groups, bytes)
    object       count, size (2 bytes each when small, 4 when large), count key entries
                 (offset, length 2), count value entries (type 1, offset, or the value itself
                 when it fits: literals, int16/uint16, and in large containers int32/uint32),
                 then keys and values; offsets count from the byte after the type
    array        the same without key entries

Pure functions of bytes. `parse` gives the document as Python values (partial updates edit it,
`partial_json.py`); `render` prints it as MySQL does.
"""

from __future__ import annotations

import base64
import decimal
import struct
from dataclasses import dataclass
from typing import Any

from cdcflow.sources.mysql.binlog.decimals import decimal_text
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY, LITERAL = 0, 1, 2, 3, 4
INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 5, 6, 7, 8, 9, 10, 11, 12, 15
_LITERALS: dict[int, Any] = {0: None, 1: True, 2: False}
_FIXED = {INT16: struct.Struct("<h"), UINT16: struct.Struct("<H"), INT32: struct.Struct("<i"),
          UINT32: struct.Struct("<I"), INT64: struct.Struct("<q"), UINT64: struct.Struct("<Q"),
          DOUBLE: struct.Struct("<d")}  # fmt: skip
_MAX_DEPTH = 150  # MySQL refuses documents nested deeper than 100


@dataclass(frozen=True)
class Opaque:
    """A scalar JSON has no type for (DECIMAL, DATE, TIME, DATETIME, binary), kept as MySQL prints it."""

    text: str
    number: bool = False  # DECIMAL prints as a number, the rest as a string


def parse(data: bytes) -> Any:
    """A whole binary JSON value → dict / list / str / int / float / bool / None / Opaque.
    An empty value is JSON null (MySQL writes that for a JSON column set to NULL in JSON)."""
    if not data:
        return None
    try:
        return _value(data[0], data, 1, len(data), 0)
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise BinlogDecodeError(f"binary JSON value is malformed ({exc!r})") from None


def parse_value(type_byte: int, data: bytes) -> Any:
    """A value whose type byte is given apart from its data (partial update diffs)."""
    return parse(bytes([type_byte]) + data)


def _value(t: int, buf: bytes, start: int, end: int, depth: int) -> Any:
    if t in (SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY):
        if depth > _MAX_DEPTH:
            raise BinlogDecodeError("binary JSON nested too deeply")
        return _container(t, buf, start, end, depth + 1)
    if t == LITERAL:
        if buf[start] not in _LITERALS:
            raise BinlogDecodeError(f"binary JSON literal {buf[start]}")
        return _LITERALS[buf[start]]
    fixed = _FIXED.get(t)
    if fixed is not None:
        if start + fixed.size > end:
            raise BinlogDecodeError("binary JSON number beyond its value")
        return fixed.unpack_from(buf, start)[0]
    if t == STRING:
        n, p = _varlen(buf, start, end)
        if p + n > end:
            raise BinlogDecodeError("binary JSON string beyond its value")
        return buf[p : p + n].decode("utf-8")
    if t == OPAQUE:
        field_type = buf[start]
        n, p = _varlen(buf, start + 1, end)
        if p + n > end:
            raise BinlogDecodeError("binary JSON opaque value beyond its value")
        return _opaque(field_type, buf[p : p + n])
    raise BinlogDecodeError(f"binary JSON value type {t}")


def _varlen(buf: bytes, p: int, end: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if p >= end or shift > 28:
            raise BinlogDecodeError("binary JSON length runs past its value")
        byte = buf[p]
        p += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, p
        shift += 7


def _container(t: int, buf: bytes, start: int, end: int, depth: int) -> Any:
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    is_object = t in (SMALL_OBJECT, LARGE_OBJECT)
    w = 4 if large else 2
    unpack = struct.Struct("<I" if large else "<H").unpack_from
    count, size = unpack(buf, start)[0], unpack(buf, start + w)[0]
    if start + size > end:
        raise BinlogDecodeError(f"binary JSON container of {size} bytes beyond its value")
    limit = start + size
    keys: list[str] = []
    p = start + 2 * w
    if is_object:
        for _ in range(count):
            offset, length = unpack(buf, p)[0], int.from_bytes(buf[p + w : p + w + 2], "little")
            if start + offset + length > limit:
                raise BinlogDecodeError("binary JSON key beyond its object")
            keys.append(buf[start + offset : start + offset + length].decode("utf-8"))
            p += w + 2
    values: list[Any] = []
    for _ in range(count):
        vt = buf[p]
        if vt == LITERAL or vt in (INT16, UINT16) or (large and vt in (INT32, UINT32)):
            values.append(_value(vt, buf, p + 1, p + 1 + w, depth))  # stored in the entry itself
        else:
            offset = unpack(buf, p + 1)[0]
            if start + offset >= limit:
                raise BinlogDecodeError("binary JSON value offset beyond its container")
            values.append(_value(vt, buf, start + offset, limit, depth))
        p += 1 + w
    if p > limit:
        raise BinlogDecodeError("binary JSON entries beyond their container")
    return dict(zip(keys, values, strict=True)) if is_object else values


# -- opaque scalars -------------------------------------------------------------------------------------

_DECIMAL, _DATE, _TIME, _DATETIME, _TIMESTAMP, _NEWDATE, _DATETIME2, _TIMESTAMP2, _TIME2 = (
    246, 10, 11, 12, 7, 14, 18, 17, 19)  # fmt: skip
_TEMPORAL = frozenset({_DATE, _NEWDATE, _DATETIME, _DATETIME2, _TIMESTAMP, _TIMESTAMP2, _TIME, _TIME2})


def _opaque(field_type: int, data: bytes) -> Opaque:
    if field_type == _DECIMAL and len(data) >= 2:
        return Opaque(decimal_text(data[2:], data[0], data[1]), number=True)
    if (
        field_type in (_DATE, _NEWDATE, _DATETIME, _DATETIME2, _TIMESTAMP, _TIMESTAMP2, _TIME, _TIME2)
        and len(data) >= 8
    ):
        packed = int.from_bytes(data[:8], "little", signed=True)
        negative, packed = packed < 0, abs(packed)
        frac, whole = packed % (1 << 24), packed >> 24
        if field_type in (_TIME, _TIME2):
            hms = whole
            text = f"{hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{frac:06d}"
            return Opaque(("-" if negative else "") + text)
        ymd, hms = whole >> 17, whole & ((1 << 17) - 1)
        year_month, day = ymd >> 5, ymd & 31
        date = f"{year_month // 13:04d}-{year_month % 13:02d}-{day:02d}"
        if field_type in (_DATE, _NEWDATE):
            return Opaque(date)
        return Opaque(f"{date} {hms >> 12:02d}:{hms >> 6 & 63:02d}:{hms & 63:02d}.{frac:06d}")
    return Opaque(f"base64:type{field_type}:{base64.b64encode(data).decode('ascii')}")


# -- rendering as MySQL prints it ------------------------------------------------------------------------

_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s: str) -> str:
    if s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = []
    for ch in s:
        esc = _ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _double(d: float) -> str:
    """The shortest digits that read back as `d` (Python's repr), placed as MySQL places them: in fixed
    notation while the decimal point falls within 15 places (or within the digits) of them, else as
    `1.5e16` (checked against MySQL 8.0.31 from 1e-20 to 1e25)."""
    if d != d or d in (float("inf"), float("-inf")):
        raise BinlogDecodeError(f"binary JSON double {d}: not a number JSON can hold")
    sign, digits_tuple, exponent = decimal.Decimal(repr(d)).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digits_tuple))
    minus = "-" if sign else ""
    if digits == "0":
        return minus + "0.0"
    point = len(digits) + exponent  # the value is 0.<digits> x 10^point
    if -14 <= point <= max(15, len(digits)):
        if point <= 0:
            return f"{minus}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{minus}{digits}{'0' * (point - len(digits))}.0"
        return f"{minus}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{minus}{mantissa}e{point - 1}"


def render(value: Any) -> str:
    """A parsed document as MySQL's JSON text."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _double(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Opaque):
        return value.text if value.number else _string(value.text)
    if isinstance(value, list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(k)}: {render(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


def to_text(data: bytes) -> str:
    """A JSON column's binlog bytes → the text `SELECT` shows."""
    return render(parse(data))
