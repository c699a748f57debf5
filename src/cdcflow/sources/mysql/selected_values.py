"""`SELECT` results rendered exactly as the binlog decoder renders the same column types in change events.

The snapshot publishes rows read this way, and `cdcflow verify` reads the source side this way, so
both compare with binlog-decoded events as plain JSON values (the type table is in docs/mysql.md).
"""

from __future__ import annotations

import base64
import struct
from decimal import Decimal
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint, query


def _frac(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


_BINARY_TYPES = frozenset({
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point", "linestring",
    "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
})  # fmt: skip


def render_selected(data_type: str, column_type: str, fsp: int, value: Any) -> Any:
    """A value as PyMySQL returns it from SELECT -> the change event's JSON rendering of that type."""
    if value is None:
        return None
    t = data_type.lower()
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return int(value)
    if t == "decimal":
        return format(Decimal(value), "f")
    if t == "float":  # selected as CAST(... AS DOUBLE): the exact float32, shown as the decoder shows it
        exact = struct.pack("<f", float(value))
        for digits in range(6, 10):
            short = float(f"{float(value):.{digits}g}")
            if struct.pack("<f", short) == exact:
                return short
        return float(value)
    if t == "double":
        return float(value)
    if t == "bit":
        return int.from_bytes(value, "big") if isinstance(value, bytes) else int(value)
    if t == "date":
        # the year by hand: strftime's %Y does not pad years before 1000 ("1-01-01")
        return value if isinstance(value, str) else f"{value.year:04d}-{value:%m-%d}"
    if t == "datetime":
        if isinstance(value, str):  # zero or partial dates come back as text
            return value if fsp == 0 else value[: 20 + fsp]
        return f"{value.year:04d}-{value:%m-%d %H:%M:%S}" + _frac(value.microsecond, fsp)
    if t == "timestamp":  # read with time_zone '+00:00'
        if isinstance(value, str):
            return "0000-00-00T00:00:00Z"
        return f"{value.year:04d}-{value:%m-%dT%H:%M:%S}" + _frac(value.microsecond, fsp) + "Z"
    if t == "time":
        if isinstance(value, str):
            return value
        total = value.days * 86400 + value.seconds
        micro = value.microseconds
        sign = ""
        if total < 0:
            sign = "-"
            total, micro = (-total - 1, 1_000_000 - micro) if micro else (-total, 0)
        h, rest = divmod(total, 3600)
        return f"{sign}{h:02d}:{rest // 60:02d}:{rest % 60:02d}" + _frac(micro, fsp)
    if isinstance(value, bytes):
        if t in _BINARY_TYPES:
            return base64.b64encode(value).decode("ascii")
        return value.decode("utf-8")
    return value


def table_columns(ep: MySqlEndpoint, db: str, table: str) -> list[tuple[str, str, str, int, bool]]:
    """(name, data type, column type, fractional digits, is primary key) in column order."""
    rows = query(
        ep,
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(DATETIME_PRECISION, 0), COLUMN_KEY = 'PRI' "
        "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (db, table),
    )
    return [(str(n), str(d), str(c), int(f), bool(k)) for n, d, c, f, k in rows]


_INTEGER_TYPES = {"tinyint": "TINYINT", "smallint": "SMALLINT", "mediumint": "MEDIUMINT", "int": "INT",
                  "bigint": "BIGINT"}  # fmt: skip
_TEXT_TYPES = frozenset({"tinytext", "text", "mediumtext", "longtext"})
_BLOB_TYPES = frozenset({"tinyblob", "blob", "mediumblob", "longblob"})


def described_type(data_type: str, column_type: str, fsp: int) -> tuple[str, str]:
    """(type, sql_type) of a column as the binlog's TABLE_MAP describes it (`TableSchema.describe`), from
    information_schema's DATA_TYPE and COLUMN_TYPE."""
    t, full = data_type.lower(), column_type.lower()
    unsigned = " UNSIGNED" if "unsigned" in full else ""
    if t in _INTEGER_TYPES:
        return _INTEGER_TYPES[t] + unsigned, _INTEGER_TYPES[t] + unsigned
    if t in ("decimal", "numeric"):
        args = full[full.index("(") : full.index(")") + 1].replace(" ", "") if "(" in full else "(10,0)"
        return "DECIMAL" + unsigned, f"DECIMAL{args.upper()}" + unsigned
    if t in ("float", "double"):
        return t.upper() + unsigned, t.upper() + unsigned
    if t in ("time", "datetime", "timestamp"):
        return t.upper(), f"{t.upper()}({fsp})"
    if t == "bit":
        return "BIT", full.upper()
    if t == "binary":
        return "BINARY", full.upper()
    if t in _TEXT_TYPES:
        return "TEXT", "TEXT"
    if t in _BLOB_TYPES:
        return "BLOB", "BLOB"
    if t == "char":
        return "CHAR", "CHAR"
    if t == "year":  # TABLE_MAP's signedness bits count YEAR as a number, and an unsigned one
        return "YEAR UNSIGNED", "YEAR UNSIGNED"
    if t in ("varchar", "varbinary", "date", "json", "enum", "set", "geometry"):
        return t.upper(), t.upper()
    return t.upper(), t.upper()


def describe_table(ep: MySqlEndpoint, db: str, table: str) -> list[dict[str, object]]:
    """A table's columns as the schema history records them (`TableSchema.describe`), from information_schema:
    for a table the capture reads with a snapshot before (or without) a row event of its own."""
    rows = query(
        ep,
        "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, COALESCE(c.DATETIME_PRECISION, 0), c.IS_NULLABLE = 'YES', "
        "k.ORDINAL_POSITION FROM information_schema.COLUMNS c LEFT JOIN information_schema.KEY_COLUMN_USAGE k "
        "ON k.TABLE_SCHEMA = c.TABLE_SCHEMA AND k.TABLE_NAME = c.TABLE_NAME AND k.COLUMN_NAME = c.COLUMN_NAME "
        "AND k.CONSTRAINT_NAME = 'PRIMARY' WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s ORDER BY c.ORDINAL_POSITION",
        (db, table),
    )
    out: list[dict[str, object]] = []
    for name, data_type, column_type, fsp, nullable, key_position in rows:
        type_name, sql_type = described_type(str(data_type), str(column_type), int(fsp))
        out.append({
            "name": str(name), "type": type_name, "sql_type": sql_type, "nullable": bool(nullable),
            "key": key_position is not None, "key_order": int(key_position) - 1 if key_position is not None else None,
        })  # fmt: skip
    return out
