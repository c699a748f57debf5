"""The compiled twin of `AvroTable` for streamed rows: a rows event's records straight from its row dicts.

`cdcflow._native.debezium_avro_rows` (native/src/debezium_avro.rs) converts each value the way columns.py does
and writes the key and the envelope in Avro the way avro.py does, byte for byte
(tests/unit/test_native_debezium_avro.py holds the two equal on generated rows). A table gets a plan when
every column has a kind the compiled code knows; a rows event it cannot convert entirely (a value of another
form, a NULL where the schema has none) comes back None and takes the Python path, which converts it or
raises the precise error. Without the compiled module (a source install without Rust) every table takes the
Python path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdcflow.events.debezium.columns import Field

try:
    from cdcflow._native import debezium_avro_rows as debezium_avro_rows
except ImportError:  # not built: every rows event takes the Python path
    debezium_avro_rows = None  # type: ignore[assignment]

# (the row dict's key, kind, optional, parameter), as debezium_avro.rs reads them
Plan = list[tuple[str, int, bool, int]]
# (key, value, image) per record: value None for a tombstone, image the row the identity is made from
NativeRecord = tuple[bytes | None, bytes | None, Any]

_PLAIN = {"int8": 1, "int16": 1, "int32": 1, "int64": 1, "float": 2, "double": 3, "string": 4}
_BY_KIND = {"unsigned_long": 5, "decimal": 6, "decimal_string": 4, "decimal_double": 7, "date": 8, "datetime": 9,
            "zoned_timestamp": 10, "time": 11, "bytes": 12, "geometry": 15}  # fmt: skip
_BIT_BOOLEAN, _BITS = 13, 14
_AVRO_INT = ("int8", "int16", "int32")  # 32 bits in Avro


def _column(f: Field, optional: bool) -> tuple[str, int, bool, int] | None:
    if f.kind == "plain":
        code = _PLAIN.get(f.connect_type)
        return None if code is None else (f.name, code, optional, int(f.connect_type in _AVRO_INT))
    if f.kind == "bit":
        return (f.name, _BIT_BOOLEAN, optional, 0) if f.length == 1 else (f.name, _BITS, optional, (f.length + 7) // 8)
    code = _BY_KIND.get(f.kind)
    if code is None:
        return None
    parameter = {"decimal": f.scale, "datetime": int(f.fsp <= 3), "zoned_timestamp": f.fsp}.get(f.kind, 0)
    return (f.name, code, optional, parameter)


def row_plan(fields: Sequence[Field]) -> Plan | None:
    """The row image's plan, or None when a column has a kind the compiled code does not convert."""
    plan = [_column(f, f.optional) for f in fields]
    return None if any(c is None for c in plan) else plan  # type: ignore[return-value]


def key_plan(fields: Sequence[Field], key_names: Sequence[str]) -> Plan | None:
    """The key's plan (its fields never null), or None. A key column that may hold MariaDB's zero date is
    left to the Python path: there it converts to null, which the key's schema refuses with a clear error."""
    by_name = {f.name: f for f in fields}
    plan = []
    for name in key_names:
        f = by_name[name]
        if f.kind in ("date", "datetime") and f.optional:
            return None
        if f.connect_type in ("float", "double"):  # keys compare by value (0.0 == -0.0) in the Python path
            return None
        column = _column(f, False)
        if column is None:
            return None
        plan.append(column)
    return plan
