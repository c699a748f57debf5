"""Per column: its Kafka Connect schema in Debezium's events, and how a cdcflow value becomes Debezium's.

A capture describes each column as a `Field` (its Connect type, logical name, parameters and one of the
value `KINDS` below); the source decides the mapping (sources/mysql/debezium_fields.py for MySQL), this
module only converts. Values come in as cdcflow renders them in change-event-v1 (docs/mysql.md, "Column
types and their JSON") and go out as Debezium's defaults render them (`time.precision.mode=
adaptive_time_microseconds`, `decimal.handling.mode=precise`, `bigint.unsigned.handling.mode=long`,
`binary.handling.mode=bytes`), checked against Debezium 3.5's own events (tests/integration/
test_debezium_comparison.py). Bytes are base64 strings in JSON (`binary=False`), raw `bytes` for Avro.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from cdcflow.errors import TerminalError

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NOT_AVRO = re.compile(r"[^A-Za-z0-9_]")
_TWO_64 = 1 << 64
_TWO_63 = 1 << 63


def avro_name(name: str) -> str:
    """A valid Avro name for `name` (letters, digits and _, not starting with a digit)."""
    fixed = _NOT_AVRO.sub("_", name)
    return "_" + fixed if not fixed or fixed[0].isdigit() else fixed


class UnconvertibleValue(TerminalError):
    """A value that does not have the form its column's type renders (a capture bug, never user data)."""


@dataclass(frozen=True)
class Field:
    """One column as Debezium describes it."""

    name: str
    connect_type: str  # int16 | int32 | int64 | float | double | boolean | string | bytes | struct
    kind: str  # a key of KINDS: how a cdcflow value becomes Debezium's
    optional: bool = True
    logical: str | None = None  # e.g. io.debezium.time.Date, org.apache.kafka.connect.data.Decimal
    parameters: tuple[tuple[str, str], ...] = ()  # Connect schema parameters, in Debezium's order
    fsp: int = 0  # fractional seconds digits (DATETIME, TIMESTAMP, TIME)
    scale: int = 0  # DECIMAL(p,s): s
    length: int = 0  # BIT(n): n

    def connect_schema(self) -> dict[str, Any]:
        """The field's Kafka Connect schema, as the JsonConverter writes it (`schemas.enable=true`)."""
        if self.kind == "geometry":
            return {
                "type": "struct",
                "fields": [{"type": "bytes", "optional": False, "field": "wkb"},
                           {"type": "int32", "optional": True, "field": "srid"}],
                "optional": self.optional, "name": "io.debezium.data.geometry.Geometry", "version": 1,
                "doc": "Geometry", "field": self.name,
            }  # fmt: skip
        out: dict[str, Any] = {"type": self.connect_type, "optional": self.optional}
        if self.logical:
            out["name"] = self.logical
            out["version"] = 1
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        out["field"] = self.name
        return out

    def converter(self, binary: bool) -> Callable[[Any], Any]:
        """cdcflow value -> Debezium value for this column (None stays None, except where Debezium puts
        a value in a NOT NULL column that holds MariaDB's zero date)."""
        make = KINDS.get(self.kind)
        if make is None:
            raise TerminalError(f"unknown Debezium value kind {self.kind!r} for column {self.name}")
        return make(self, binary)

    def reader(self, binary: bool) -> Callable[[Any], Any]:
        """The inverse: a Debezium value of this column -> the cdcflow value (docs/mysql.md), for readers of
        debezium-format topics (the pipeline, the tests). Exact except where Debezium's form loses
        something: zero dates (null or the epoch), decimal.handling.mode=double; an unsigned BIGINT in
        `long` mode is restored. `binary`: bytes arrive as bytes (Avro, Flink), not base64 text."""
        make = READERS.get(self.kind)
        if make is None:
            raise TerminalError(f"unknown Debezium value kind {self.kind!r} for column {self.name}")
        return make(self, binary)


# -- the conversions: each returns a function of one value ----------------------------------------------


def _identity(_f: Field, _binary: bool) -> Callable[[Any], Any]:
    return lambda v: v


def _unsigned_long(_f: Field, _binary: bool) -> Callable[[Any], Any]:
    # bigint.unsigned.handling.mode=long: values above 2^63-1 wrap around, as in Debezium
    return lambda v: None if v is None else (v - _TWO_64 if v >= _TWO_63 else v)


def _decimal(f: Field, binary: bool) -> Callable[[Any], Any]:
    """ "-12.50" -> Connect's Decimal: the unscaled value, big-endian two's complement, fewest bytes
    (Java's BigInteger.toByteArray)."""

    def convert(v: Any) -> Any:
        if v is None:
            return None
        text = str(v)
        whole, _, frac = text.partition(".")
        if len(frac) != f.scale:
            raise UnconvertibleValue(f"DECIMAL column {f.name}: {text!r} does not have {f.scale} decimals")
        unscaled = int(whole + frac)
        size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        raw = unscaled.to_bytes(size, "big", signed=True)
        return raw if binary else base64.b64encode(raw).decode("ascii")

    return convert


def _date_parts(text: str, what: str) -> tuple[int, int, int]:
    try:
        return int(text[0:4]), int(text[5:7]), int(text[8:10])
    except ValueError as exc:
        raise UnconvertibleValue(f"{what}: {text!r} is not a date") from exc


def _zero_or_none(f: Field) -> Any:
    # Debezium turns MariaDB's zero dates into null, or into the epoch where the column cannot be null
    return None if f.optional else 0


def _date(f: Field, _binary: bool) -> Callable[[Any], Any]:
    def convert(v: Any) -> Any:
        if v is None:
            return None
        y, m, d = _date_parts(v, f"DATE column {f.name}")
        if y == 0 or m == 0 or d == 0:
            return _zero_or_none(f)
        return dt.date(y, m, d).toordinal() - _EPOCH_ORDINAL

    return convert


def _datetime_micros(text: str, what: str) -> int | None:
    """ "YYYY-MM-DD HH:MM:SS[.f]" (wall clock, no zone) -> microseconds since 1970-01-01 00:00:00."""
    y, m, d = _date_parts(text, what)
    if y == 0 or m == 0 or d == 0:
        return None
    try:
        hh, mm, ss = int(text[11:13]), int(text[14:16]), int(text[17:19])
        frac = text[20:]
        micros = int(frac.ljust(6, "0")) if frac else 0
    except ValueError as exc:
        raise UnconvertibleValue(f"{what}: {text!r} is not a datetime") from exc
    days = dt.date(y, m, d).toordinal() - _EPOCH_ORDINAL
    return ((days * 86400 + hh * 3600 + mm * 60 + ss) * 1_000_000) + micros


def _datetime(f: Field, _binary: bool) -> Callable[[Any], Any]:
    # DATETIME(0-3): io.debezium.time.Timestamp (ms); DATETIME(4-6): MicroTimestamp (µs)
    millis = f.fsp <= 3

    def convert(v: Any) -> Any:
        if v is None:
            return None
        micros = _datetime_micros(v, f"DATETIME column {f.name}")
        if micros is None:
            return _zero_or_none(f)
        return micros // 1000 if millis else micros

    return convert


def _zoned_timestamp(f: Field, _binary: bool) -> Callable[[Any], Any]:
    # Same ISO-8601 UTC text as cdcflow's, except the zero TIMESTAMP, which Debezium shows as the epoch.
    zero = "1970-01-01T00:00:00" + ("." + "0" * f.fsp if f.fsp else "") + "Z"
    return lambda v: zero if v is not None and v.startswith("0000-00-00") else v


def _time(f: Field, _binary: bool) -> Callable[[Any], Any]:
    """ "-838:59:59", "-00:00:01.5" -> io.debezium.time.MicroTime (signed µs)."""

    def convert(v: Any) -> Any:
        if v is None:
            return None
        text = str(v)
        negative = text.startswith("-")
        body = text[1:] if negative else text
        clock, _, frac = body.partition(".")
        try:
            hh, mm, ss = (int(p) for p in clock.split(":"))
            micros = ((hh * 3600 + mm * 60 + ss) * 1_000_000) + (int(frac.ljust(6, "0")) if frac else 0)
        except ValueError as exc:
            raise UnconvertibleValue(f"TIME column {f.name}: {text!r} is not a time") from exc
        return -micros if negative else micros

    return convert


def _bytes(_f: Field, binary: bool) -> Callable[[Any], Any]:
    # cdcflow renders binary columns as base64 already: JSON keeps it, Avro wants the bytes
    if not binary:
        return lambda v: v
    return lambda v: None if v is None else base64.b64decode(v)


def _bit(f: Field, binary: bool) -> Callable[[Any], Any]:
    """BIT(1) -> boolean; BIT(n) -> io.debezium.data.Bits: the bits little-endian in ceil(n/8) bytes."""
    if f.length == 1:
        return lambda v: None if v is None else bool(v)
    size = (f.length + 7) // 8

    def convert(v: Any) -> Any:
        if v is None:
            return None
        raw = int(v).to_bytes(size, "little")
        return raw if binary else base64.b64encode(raw).decode("ascii")

    return convert


def _geometry(f: Field, binary: bool) -> Callable[[Any], Any]:
    """cdcflow: base64 of the server's form (SRID, 4 bytes little-endian, then WKB) -> {wkb, srid}."""

    def convert(v: Any) -> Any:
        if v is None:
            return None
        try:
            raw = base64.b64decode(v, validate=True)
        except (ValueError, binascii.Error) as exc:
            raise UnconvertibleValue(f"GEOMETRY column {f.name}: not base64") from exc
        if len(raw) < 4:
            raise UnconvertibleValue(f"GEOMETRY column {f.name}: {len(raw)} bytes, shorter than its SRID")
        srid = struct.unpack("<I", raw[:4])[0]
        wkb = raw[4:]
        return {"wkb": wkb if binary else base64.b64encode(wkb).decode("ascii"), "srid": srid or None}

    return convert


def _decimal_double(_f: Field, _binary: bool) -> Callable[[Any], Any]:
    return lambda v: None if v is None else float(v)


KINDS: dict[str, Callable[[Field, bool], Callable[[Any], Any]]] = {
    "plain": _identity,  # integers, FLOAT, DOUBLE, YEAR, strings, ENUM, SET, JSON text
    "unsigned_long": _unsigned_long,
    "decimal": _decimal,  # decimal.handling.mode=precise (Debezium's default)
    "decimal_string": _identity,  # decimal.handling.mode=string: cdcflow's own rendering
    "decimal_double": _decimal_double,  # decimal.handling.mode=double (lossy, as in Debezium)
    "date": _date,
    "datetime": _datetime,
    "zoned_timestamp": _zoned_timestamp,
    "time": _time,
    "bytes": _bytes,
    "bit": _bit,
    "geometry": _geometry,
}


# -- the inverse conversions: Debezium value -> cdcflow value -------------------------------------------------


def _shortest_float32(value: float) -> float:
    """A float32 as cdcflow renders it: the shortest decimal that reads back as the same float32."""
    exact = struct.pack("<f", value)
    for digits in range(6, 10):
        short = float(f"{value:.{digits}g}")
        if struct.pack("<f", short) == exact:
            return short
    return value


def _read_plain(f: Field, _binary: bool) -> Callable[[Any], Any]:
    if f.connect_type == "float":
        return lambda v: None if v is None else _shortest_float32(float(v))
    return lambda v: v


def _read_unsigned_long(_f: Field, _binary: bool) -> Callable[[Any], Any]:
    return lambda v: None if v is None else (v + _TWO_64 if v < 0 else v)


def _raw(v: Any, binary: bool) -> bytes:
    return bytes(v) if binary else base64.b64decode(v)


def _scaled(unscaled: int, scale: int) -> str:
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return f"{sign}{digits[: len(digits) - scale]}.{digits[len(digits) - scale :]}" if scale else f"{sign}{digits}"


def _read_decimal(f: Field, binary: bool) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, Decimal):  # an Avro reader that applied the decimal logical type itself
            return f"{v:.{f.scale}f}"
        return _scaled(int.from_bytes(_raw(v, binary), "big", signed=True), f.scale)

    return read


def _read_decimal_string(f: Field, _binary: bool) -> Callable[[Any], Any]:
    # a string (JSON) or a decimal.Decimal (Flink, Avro readers): always s decimals
    return lambda v: None if v is None else f"{Decimal(str(v)):.{f.scale}f}"


def _read_date(_f: Field, _binary: bool) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if v is None:
            return None
        d = dt.date.fromordinal(int(v) + _EPOCH_ORDINAL)
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"

    return read


def _frac_text(micros: int, fsp: int) -> str:
    return f".{micros:06d}"[: fsp + 1] if fsp else ""


def _read_datetime(f: Field, _binary: bool) -> Callable[[Any], Any]:
    per_unit = 1000 if f.fsp <= 3 else 1

    def read(v: Any) -> Any:
        if v is None:
            return None
        micros = int(v) * per_unit
        days, rest = divmod(micros, 86_400_000_000)
        d = dt.date.fromordinal(days + _EPOCH_ORDINAL)
        seconds, frac = divmod(rest, 1_000_000)
        hh, mm, ss = seconds // 3600, seconds // 60 % 60, seconds % 60
        return f"{d.year:04d}-{d.month:02d}-{d.day:02d} {hh:02d}:{mm:02d}:{ss:02d}" + _frac_text(frac, f.fsp)

    return read


def _read_time(f: Field, _binary: bool) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if v is None:
            return None
        micros = int(v)
        sign = "-" if micros < 0 else ""
        seconds, frac = divmod(abs(micros), 1_000_000)
        return f"{sign}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" + _frac_text(frac, f.fsp)

    return read


def _read_bytes(_f: Field, binary: bool) -> Callable[[Any], Any]:
    if not binary:
        return lambda v: v
    return lambda v: None if v is None else base64.b64encode(bytes(v)).decode("ascii")


def _read_bit(f: Field, binary: bool) -> Callable[[Any], Any]:
    if f.length == 1:
        return lambda v: None if v is None else int(bool(v))
    return lambda v: None if v is None else int.from_bytes(_raw(v, binary), "little")


def _read_geometry(_f: Field, binary: bool) -> Callable[[Any], Any]:
    def read(v: Any) -> Any:
        if v is None:
            return None
        wkb, srid = v["wkb"], v["srid"]
        return base64.b64encode(struct.pack("<I", srid or 0) + _raw(wkb, binary)).decode("ascii")

    return read


READERS: dict[str, Callable[[Field, bool], Callable[[Any], Any]]] = {
    "plain": _read_plain,
    "unsigned_long": _read_unsigned_long,
    "decimal": _read_decimal,
    "decimal_string": _read_decimal_string,
    "decimal_double": _identity,
    "date": _read_date,
    "datetime": _read_datetime,
    "zoned_timestamp": _identity,
    "time": _read_time,
    "bytes": _read_bytes,
    "bit": _read_bit,
    "geometry": _read_geometry,
}
