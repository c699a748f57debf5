"""MySQL/MariaDB columns as Debezium's MySQL and MariaDB connectors describe them. Pure: no I/O.

Two ways in: a binlog TABLE_MAP (`fields_from_binlog`, for streamed rows) and information_schema
(`fields_from_information_schema`, for snapshot rows of a table no TABLE_MAP has described yet). Both
give the same fields for the same table. The binlog cannot tell a few DDL spellings apart that Debezium,
which parses the DDL, can: FLOAT(p,s) is `float` here (Debezium: `double`), POINT and the other geometry
subtypes are Geometry structs, and column defaults are not in the schema (docs/debezium.md).
"""

from __future__ import annotations

import dataclasses
import re

from cdcflow.events.debezium.columns import Field
from cdcflow.sources.mysql.binlog import columns as t
from cdcflow.sources.mysql.binlog.columns import BINARY_COLLATION, Column, TableSchema

_DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _decimal(name: str, precision: int, scale: int, optional: bool, handling: str) -> Field:
    """DECIMAL as Debezium's decimal.handling.mode says: precise (Connect's Decimal, the default),
    string (cdcflow's own text, what Flink's JSON formats read), or double."""
    if handling == "string":
        return Field(name, "string", "decimal_string", optional, scale=scale)
    if handling == "double":
        return Field(name, "double", "decimal_double", optional, scale=scale)
    return Field(name, "bytes", "decimal", optional, _DECIMAL,
                 (("scale", str(scale)), ("connect.decimal.precision", str(precision))), scale=scale)  # fmt: skip


def _datetime(name: str, fsp: int, optional: bool) -> Field:
    logical = "io.debezium.time.Timestamp" if fsp <= 3 else "io.debezium.time.MicroTimestamp"
    return Field(name, "int64", "datetime", optional, logical, fsp=fsp)


def _bit(name: str, length: int, optional: bool) -> Field:
    if length == 1:
        return Field(name, "boolean", "bit", optional, length=1)
    return Field(name, "bytes", "bit", optional, "io.debezium.data.Bits", (("length", str(length)),), length=length)


def _labels(kind: str, name: str, labels: tuple[str, ...], optional: bool) -> Field:
    logical = "io.debezium.data.Enum" if kind == "enum" else "io.debezium.data.EnumSet"
    return Field(name, "string", "plain", optional, logical, (("allowed", ",".join(labels)),))


# Debezium's datatype.propagate.source.type, for DATETIME, TIME, TIMESTAMP and BIGINT UNSIGNED columns: the
# Connect schema alone cannot say a DATETIME's or TIME's fractional digits, nor that an int64 is a BIGINT
# UNSIGNED that wrapped; readers of the topics (the cdcflow pipeline) need both to give the exact values back.


def _source_type(f: Field, type_name: str, length: int) -> Field:
    """`f` with Debezium's source-type parameters (as `datatype.propagate.source.type` adds them)."""
    params = [("__debezium.source.column.type", type_name)]
    if length:
        params.append(("__debezium.source.column.length", str(length)))
    params.append(("__debezium.source.column.name", f.name))
    return dataclasses.replace(f, parameters=f.parameters + tuple(params))


def field_from_column(c: Column, decimal_handling: str = "precise", propagate: bool = False) -> Field:
    """One binlog column -> its Debezium field (`propagate`: with its source type, see _source_type)."""
    f = _field_from_column(c, decimal_handling)
    if propagate:
        name = {t.DATETIME2: "DATETIME", t.DATETIME: "DATETIME", t.TIME2: "TIME", t.TIME: "TIME",
                t.TIMESTAMP2: "TIMESTAMP", t.TIMESTAMP: "TIMESTAMP"}.get(c.type)  # fmt: skip
        if name is not None:
            return _source_type(f, name, f.fsp)
        if c.type == t.LONGLONG and c.unsigned:
            return _source_type(f, "BIGINT UNSIGNED", 0)
    return f


def _field_from_column(c: Column, decimal_handling: str) -> Field:
    name, opt, ty, meta = c.name, c.nullable, c.type, c.metadata
    if ty == t.TINY:
        return Field(name, "int16", "plain", opt)
    if ty == t.SHORT:
        return Field(name, "int32" if c.unsigned else "int16", "plain", opt)
    if ty == t.INT24:
        return Field(name, "int32", "plain", opt)
    if ty == t.LONG:
        return Field(name, "int64" if c.unsigned else "int32", "plain", opt)
    if ty == t.LONGLONG:
        return Field(name, "int64", "unsigned_long" if c.unsigned else "plain", opt)
    if ty == t.YEAR:
        return Field(name, "int32", "plain", opt, "io.debezium.time.Year")
    if ty in (t.NEWDECIMAL, t.DECIMAL):
        return _decimal(name, meta >> 8, meta & 0xFF, opt, decimal_handling)
    if ty == t.FLOAT:
        return Field(name, "float", "plain", opt)
    if ty == t.DOUBLE:
        return Field(name, "double", "plain", opt)
    if ty in (t.DATE, t.NEWDATE):
        return Field(name, "int32", "date", opt, "io.debezium.time.Date")
    if ty in (t.DATETIME2, t.DATETIME):
        return _datetime(name, meta if ty == t.DATETIME2 else 0, opt)
    if ty in (t.TIMESTAMP2, t.TIMESTAMP):
        return Field(name, "string", "zoned_timestamp", opt, "io.debezium.time.ZonedTimestamp",
                     fsp=meta if ty == t.TIMESTAMP2 else 0)  # fmt: skip
    if ty in (t.TIME2, t.TIME):
        return Field(name, "int64", "time", opt, "io.debezium.time.MicroTime", fsp=meta if ty == t.TIME2 else 0)
    if ty == t.BIT:
        return _bit(name, (meta >> 8) * 8 + (meta & 0xFF), opt)
    if ty == t.ENUM:
        return _labels("enum", name, c.labels, opt)
    if ty == t.SET:
        return _labels("set", name, c.labels, opt)
    if ty == t.JSON:  # MySQL's binary JSON; MariaDB's JSON is a LONGTEXT and stays a plain string
        return Field(name, "string", "plain", opt, "io.debezium.data.Json")
    if ty == t.GEOMETRY:
        return Field(name, "struct", "geometry", opt)
    if ty in (t.STRING, t.VAR_STRING, t.VARCHAR, t.BLOB, t.TINY_BLOB, t.MEDIUM_BLOB, t.LONG_BLOB):
        if c.collation == BINARY_COLLATION:
            return Field(name, "bytes", "bytes", opt)
        return Field(name, "string", "plain", opt)
    raise ValueError(f"column {name}: type {c.type_name} has no Debezium representation")


def fields_from_binlog(schema: TableSchema, decimal_handling: str = "precise",
                       propagate: bool = False) -> tuple[Field, ...]:  # fmt: skip
    return tuple(field_from_column(c, decimal_handling, propagate) for c in schema.columns)


_SIZES = re.compile(r"\((\d+)(?:,(\d+))?\)")
_LABEL = re.compile(r"'((?:[^']|'')*)'")


def field_from_information_schema(name: str, data_type: str, column_type: str, nullable: bool,
                                  decimal_handling: str = "precise", propagate: bool = False) -> Field:  # fmt: skip
    """One column as information_schema.COLUMNS shows it (DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES')."""
    f = _field_from_information_schema(name, data_type, column_type, nullable, decimal_handling)
    if propagate:
        dtype = data_type.lower()
        if dtype in ("datetime", "time", "timestamp"):
            return _source_type(f, dtype.upper(), f.fsp)
        if dtype == "bigint" and "unsigned" in column_type.lower():
            return _source_type(f, "BIGINT UNSIGNED", 0)
    return f


def _field_from_information_schema(name: str, data_type: str, column_type: str, nullable: bool,
                                   decimal_handling: str) -> Field:  # fmt: skip
    dtype, ctype = data_type.lower(), column_type.lower()
    unsigned = "unsigned" in ctype
    sizes = _SIZES.search(ctype)
    first = int(sizes.group(1)) if sizes else 0
    second = int(sizes.group(2)) if sizes and sizes.group(2) else 0
    ints = {"tinyint": ("int16", "int16"), "smallint": ("int16", "int32"), "mediumint": ("int32", "int32"),
            "int": ("int32", "int64"), "integer": ("int32", "int64")}  # fmt: skip
    if dtype in ints:
        return Field(name, ints[dtype][unsigned], "plain", nullable)
    if dtype == "bigint":
        return Field(name, "int64", "unsigned_long" if unsigned else "plain", nullable)
    if dtype == "year":
        return Field(name, "int32", "plain", nullable, "io.debezium.time.Year")
    if dtype in ("decimal", "numeric"):
        return _decimal(name, first or 10, second, nullable, decimal_handling)
    if dtype == "float":
        return Field(name, "float", "plain", nullable)
    if dtype in ("double", "real"):
        return Field(name, "double", "plain", nullable)
    if dtype == "date":
        return Field(name, "int32", "date", nullable, "io.debezium.time.Date")
    if dtype == "datetime":
        return _datetime(name, first, nullable)
    if dtype == "timestamp":
        return Field(name, "string", "zoned_timestamp", nullable, "io.debezium.time.ZonedTimestamp", fsp=first)
    if dtype == "time":
        return Field(name, "int64", "time", nullable, "io.debezium.time.MicroTime", fsp=first)
    if dtype == "bit":
        return _bit(name, first or 1, nullable)
    if dtype in ("enum", "set"):
        labels = tuple(m.replace("''", "'") for m in _LABEL.findall(column_type))
        return _labels(dtype, name, labels, nullable)
    if dtype == "json":
        return Field(name, "string", "plain", nullable, "io.debezium.data.Json")
    if dtype in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
                 "geometrycollection", "geomcollection"):  # fmt: skip
        return Field(name, "struct", "geometry", nullable)
    if dtype in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return Field(name, "bytes", "bytes", nullable)
    return Field(name, "string", "plain", nullable)  # char, varchar, the text types
