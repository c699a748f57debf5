"""Compare a MySQL/MariaDB table with its Phoenix copy, row by row, value by value.

Both sides are rendered the way change events render MySQL values (cdcflow.verify.mysql), so
the comparison is exact: a DECIMAL compares at the MySQL scale, a FLOAT as the same float32, a
DATETIME(6) to the microsecond. Dates and timestamps are read from Phoenix as epoch milliseconds
(TO_NUMBER) and rendered here in the proleptic Gregorian calendar, independently of Java's
calendar (which renders days before 1582-10-15 as Julian and would hide a shifted date). What
Phoenix cannot represent is documented (docs/phoenix.md) and applied to the MySQL side first:
zero dates ('0000-00-00', '2024-00-10') have no Phoenix value and are written as NULL, and Phoenix
itself stores empty strings as NULL.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.clients.phoenix import PhoenixConnection, PhoenixJvm
from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.mysql_history import ZERO_DATE_PATTERN
from cdcflow.pipeline.sinks.phoenix import schema as ps
from cdcflow.sources.mysql.selected_values import render_selected, table_columns
from cdcflow.verify.mysql import Row, compare_tables, key_json, source_rows
from cdcflow.verify.report import VerifyReport

_ZERO_DATE = re.compile(ZERO_DATE_PATTERN)
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit"})


def _scale(column_type: str) -> int:
    m = re.search(r"\(\d+,(\d+)\)", column_type)
    return int(m.group(1)) if m else 0


def _timestamp_parts(text: str) -> tuple[str, int]:
    """'2024-01-02 03:04:05.12' (java.sql.Timestamp.toString) → ('2024-01-02 03:04:05', 120000)."""
    whole, _, frac = text.partition(".")
    return whole, int((frac + "000000")[:6]) if frac else 0


def render_phoenix_value(data_type: str, column_type: str, fsp: int, value: Any) -> Any:
    """A Phoenix value (as Rows.java returns it) → the change event's rendering of the MySQL type."""
    if value is None:
        return None
    t = data_type.lower()
    if t in _INTEGERS:
        return int(value)
    if t == "decimal":
        scale = _scale(column_type)
        with decimal.localcontext(decimal.Context(prec=100)):  # DECIMAL(65,30) has 65 digits
            return format(Decimal(value).quantize(Decimal(1).scaleb(-scale)), "f")
    if t in ("float", "double"):
        return render_selected(t, column_type, fsp, float(value))
    if t == "date":
        millis, _ = value
        day = (_EPOCH + dt.timedelta(milliseconds=int(millis))).date()
        return f"{day.year:04d}-{day:%m-%d}"
    if t in ("datetime", "timestamp"):
        millis, text = value
        _, nanos_text = _timestamp_parts(str(text))  # the fraction: no calendar in it
        instant = _EPOCH + dt.timedelta(milliseconds=int(millis), microseconds=nanos_text % 1000)
        whole = f"{instant.year:04d}-{instant:%m-%d %H:%M:%S}"
        frac = f".{instant.microsecond:06d}"[: fsp + 1] if fsp else ""
        return f"{whole}{frac}" if t == "datetime" else f"{whole.replace(' ', 'T')}{frac}Z"
    return value  # TIME (VARCHAR), text, ENUM, SET, JSON; binary types as base64 already


_EPOCH = dt.datetime(1970, 1, 1)
_CALENDAR_FREE = frozenset({"date", "datetime", "timestamp"})


def phoenix_representable(data_type: str, value: Any) -> Any:
    """A MySQL value as the Phoenix copy holds it. Two things Phoenix cannot keep apart from NULL
    become NULL: zero dates (no DATE/TIMESTAMP value exists for them) and empty strings and byte
    strings (Phoenix stores an empty VARCHAR/VARBINARY as NULL). Everything else is equal."""
    if data_type.lower() in ("date", "datetime", "timestamp") and isinstance(value, str) and _ZERO_DATE.match(value):
        return None
    if value == "":
        return None
    return value


def phoenix_rows(
    phoenix: PhoenixJvm | PhoenixConnection, target: ps.PhoenixTable, columns: list[tuple[str, str, str, int, bool]],
    case: str, keys: tuple[str, ...],
) -> dict[str, Row]:  # fmt: skip
    """The Phoenix table's rows, rendered like change events, keyed like `source_rows`."""
    select = []
    for name, data_type, *_ in columns:
        q = ps.quote(ps.map_name(name, case))
        # dates and timestamps: epoch milliseconds (and the text, for the sub-millisecond digits)
        select += [f"TO_NUMBER({q})", q] if data_type.lower() in _CALENDAR_FREE else [q]
    out: dict[str, Row] = {}
    for values in phoenix.iter_rows(f"SELECT {', '.join(select)} FROM {target.qualified}"):
        it = iter(values)
        row = {}
        for name, d, c, f, _ in columns:
            v = next(it)
            if d.lower() in _CALENDAR_FREE:
                text = next(it)
                v = None if v is None else (v, text)
            row[name] = render_phoenix_value(d, c, f, v)
        out[key_json(row, keys)] = row
    return out


def verify_mysql_phoenix(
    ep: MySqlEndpoint, db: str, table: str, phoenix: PhoenixJvm | PhoenixConnection,
    table_map: Mapping[str, str] | None = None, case: str = "upper", key_columns: tuple[str, ...] = (),
    source: str | None = None,
) -> VerifyReport:  # fmt: skip
    return compare_tables(*mysql_phoenix_rows(ep, db, table, phoenix, table_map, case, key_columns, source))


def mysql_phoenix_rows(
    ep: MySqlEndpoint, db: str, table: str, phoenix: PhoenixJvm | PhoenixConnection,
    table_map: Mapping[str, str] | None = None, case: str = "upper", key_columns: tuple[str, ...] = (),
    source: str | None = None,
) -> tuple[dict[str, Row], dict[str, Row]]:  # fmt: skip
    """Both sides of a MySQL table and its Phoenix copy, keyed alike and rendered alike (what
    `verify_mysql_phoenix` compares)."""
    columns = table_columns(ep, db, table)
    if not columns:
        raise ConfigError(f"MySQL table {db}.{table} does not exist (or this user cannot see it)")
    keys = key_columns or tuple(n for n, *_, pk in columns if pk) or tuple(c[0] for c in columns)
    types = {name: d for name, d, *_ in columns}
    expected = {
        k: {c: phoenix_representable(types[c], v) for c, v in row.items()}
        for k, row in source_rows(ep, db, table, keys).items()
    }
    schema, name = ps.target_name(db, table, table_map or {}, case, source)
    target = ps.PhoenixTable(schema, name, (), ())
    return expected, phoenix_rows(phoenix, target, columns, case, keys)
