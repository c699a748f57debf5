"""One HBase row as an upsert record's value (decision 0018). Pure: cells in, bytes out.

The record's key is the row key's bytes as they are (what the `cdcflow` format keys by too, so a row's
records land in one partition in order); its value is the row as the source held it when the peer read
it back, or no value at all (a tombstone) when the row is gone. The value holds

- `row`: the row key (JSON: base64, as Flink's and Kafka Connect's JSON read bytes; Avro: bytes),
- one field per declared column (`hbase.routes[].fields` names it, `hbase.routes[].values` types it; a
  column named in `values` without wildcards is declared too), null when the row has no such column,
- `cells`: every other column the route keeps, "family:qualifier" → its bytes, so nothing is dropped.

A declared column whose bytes do not have its type's form (a "long" of 3 bytes, a NaN double, which JSON
cannot carry) is null in its field and in `cells` under its column name instead.
"""

from __future__ import annotations

import binascii
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from cdcflow.events.cells import Cell, column_name
from cdcflow.events.debezium.avro import AvroWriter, Register, avro_long
from cdcflow.events.debezium.columns import avro_name
from cdcflow.events.json_codec import ValueHints

# The value types of declared columns, by value hint (json_codec.VALUE_ENCODINGS).
AVRO_TYPES = {"base64": "bytes", "utf8": "string", "long": "long", "int": "int", "short": "int",
              "double": "double", "float": "float", "boolean": "boolean"}  # fmt: skip
_FIXED = {"long": (8, ">q"), "int": (4, ">i"), "short": (2, ">h"), "double": (8, ">d"), "float": (4, ">f")}
RESERVED = ("row", "cells")


class _Misfit:
    """A declared column's bytes that do not have its type's form."""


MISFIT = _Misfit()


def typed_value(data: bytes, encoding: str) -> Any:
    """The value of `data` as `encoding` reads it (HBase's Bytes encodings), or MISFIT."""
    if encoding == "base64":
        return data
    if encoding == "utf8":
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return MISFIT
    if encoding == "boolean":
        return data != b"\x00" if len(data) == 1 else MISFIT
    size, fmt = _FIXED[encoding]
    if len(data) != size:
        return MISFIT
    value = struct.unpack(fmt, data)[0]
    if isinstance(value, float) and not math.isfinite(value):
        return MISFIT  # JSON has no NaN or infinity; the bytes go to `cells`
    return value


@dataclass(frozen=True)
class UpsertField:
    column: str  # "family:qualifier", as events.cells.column_name spells it
    name: str  # the field's name in the value (a valid Avro name)
    encoding: str  # a value hint: how the bytes read


def _declared(pattern: str) -> bool:
    return not any(ch in pattern for ch in "*?[")


class UpsertColumns:
    """The fields of one table's rows: its declared columns, typed; the rest of its columns in `cells`."""

    def __init__(self, fields: Sequence[UpsertField]) -> None:
        seen: dict[str, str] = {}
        for f in fields:
            if f.name in RESERVED:
                raise ValueError(f"column {f.column} cannot be named {f.name!r}: the value's own field has that name")
            if f.name in seen:
                raise ValueError(f"columns {seen[f.name]} and {f.column} would both be field {f.name!r}; "
                                 "name one of them in the route's `fields`")  # fmt: skip
            if f.name != avro_name(f.name):
                raise ValueError(f"field name {f.name!r} of {f.column} is not a valid Avro name "
                                 "(letters, digits and _, not starting with a digit)")  # fmt: skip
            seen[f.name] = f.column
        self.fields = tuple(fields)
        self._by_column = {f.column: f for f in fields}
        # (family, qualifier) → (column name, its field or None): a row's cells name the same few columns
        self._columns: dict[tuple[bytes, bytes], tuple[str, UpsertField | None]] = {}

    @classmethod
    def of(cls, names: Mapping[str, str], hints: ValueHints) -> UpsertColumns:
        """From a route: `names` ("cf:q" → field name) and the columns its value hints name exactly."""
        columns = list(names) + [c for c in hints.rules if _declared(c) and c not in names]
        fields = []
        for column in columns:
            if ":" not in column:
                raise ValueError(f"route field {column!r}: name a column as family:qualifier")
            name = names.get(column) or avro_name(column.replace(":", "_"))
            fields.append(UpsertField(column, name, hints.encoding(column)))
        return cls(fields)

    def split(self, cells: Iterable[Cell]) -> tuple[dict[str, Any], dict[str, bytes]]:
        """(declared field → value, other column → bytes) of a row's cells (one version per column)."""
        values: dict[str, Any] = {f.name: None for f in self.fields}
        others: dict[str, bytes] = {}
        known = self._columns
        for c in cells:
            held = known.get((c.family, c.qualifier))
            if held is None:
                name = column_name(c.family, c.qualifier)
                held = known[(c.family, c.qualifier)] = (name, self._by_column.get(name))
                if len(known) > 100_000:  # wide tables with generated qualifiers: bounded
                    known.clear()
            column, f = held
            value = MISFIT if f is None else typed_value(c.value, f.encoding)
            if value is MISFIT:
                others[column] = c.value
            else:
                assert f is not None
                values[f.name] = value
        return values, others


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


class UpsertJson:
    """Values as JSON objects."""

    def __init__(self, columns: UpsertColumns) -> None:
        self.columns = columns

    def value(self, row: bytes, cells: Sequence[Cell]) -> bytes:
        values, others = self.columns.split(cells)
        for name, value in values.items():
            if isinstance(value, bytes):
                values[name] = _b64(value)
        return orjson.dumps({"row": _b64(row), **values, "cells": {k: _b64(v) for k, v in others.items()}})


def upsert_avro_schema(topic: str, columns: UpsertColumns) -> dict[str, Any]:
    """The Avro schema of a topic's values: a record named after the topic, declared fields optional."""
    fields: list[dict[str, Any]] = [{"name": "row", "type": "bytes"}]
    fields += [{"name": f.name, "type": ["null", AVRO_TYPES[f.encoding]], "default": None, "doc": f.column}
               for f in columns.fields]  # fmt: skip
    fields.append({"name": "cells", "type": {"type": "map", "values": "bytes"}, "default": {}})
    return {"type": "record", "name": avro_name(topic), "namespace": "cdcflow.hbase", "fields": fields}


def _avro_bytes(data: bytes) -> bytes:
    return avro_long(len(data)) + data


_PACK_DOUBLE, _PACK_FLOAT = struct.Struct("<d").pack, struct.Struct("<f").pack
# A declared field's value (never null here) in Avro, by the column's encoding (AVRO_TYPES)
_AVRO_WRITERS: dict[str, Any] = {
    "base64": _avro_bytes, "utf8": lambda v: _avro_bytes(v.encode()), "long": avro_long, "int": avro_long,
    "short": avro_long, "double": _PACK_DOUBLE, "float": _PACK_FLOAT, "boolean": lambda v: b"\x01" if v else b"\x00",
}  # fmt: skip


class UpsertAvro:
    """Values in Avro, Confluent's framing; the schema registered under `<topic>-value` when first made.
    Written here field by field (the schema is fixed and flat: a third of fastavro's time per row), byte for byte
    what fastavro writes with upsert_avro_schema (tests/unit/test_upsert_rows.py holds the two equal)."""

    def __init__(self, columns: UpsertColumns, topic: str, register: Register) -> None:
        self.columns = columns
        schema = upsert_avro_schema(topic, columns)
        self._header = AvroWriter(schema, register(f"{topic}-value", schema)).header
        self._fields = [(f.name, _AVRO_WRITERS[f.encoding]) for f in columns.fields]

    def value(self, row: bytes, cells: Sequence[Cell]) -> bytes:
        values, others = self.columns.split(cells)
        out = [self._header, avro_long(len(row)), row]
        for name, write in self._fields:
            v = values[name]
            out.append(b"\x00" if v is None else b"\x02" + write(v))
        if others:  # the map: one block of len(others) entries, then the empty block
            out.append(avro_long(len(others)))
            for column, data in others.items():
                raw = column.encode()
                out += (avro_long(len(raw)), raw, avro_long(len(data)), data)
        out.append(b"\x00")
        return b"".join(out)
