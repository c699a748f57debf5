"""Debezium-format Avro records turned into cdcflow events inside Spark: `from_avro` per writer schema and SQL
expressions for every value (no Python per record), the same result as events/debezium/transcode.py.

The writer schemas come from the registry on the driver, for the subjects of the topics being read (every
version of `<topic>-value`, and the newest `<topic>-key` for the key's columns). Each record's schema id (bytes
1-4 after the magic byte) picks its `from_avro`; the conversions mirror the field readers of
events/debezium/columns.py: days to 'YYYY-MM-DD', µs to wall-clock text with the column's digits, TIME µs to
'[-]HH:MM:SS[.f]', Connect's Decimal (Avro decimal) to its text, BIT(n) little-endian bytes to a number,
BIGINT UNSIGNED back above 2^63, {wkb, srid} to the server's bytes. The event is made straight into the
envelope's struct (its row images as JSON text, binary as base64, as the JSON events' parse gives them). A
schema Spark's Avro reader cannot take (a DECIMAL wider than 38 digits) and records of ids not known at the
batch's start are left to the Python transcoder.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro
from pyspark.sql.types import StructType

from cdcflow.clients.registry import SchemaRegistry
from cdcflow.events.debezium.columns import Field
from cdcflow.events.debezium.transcode import connect_from_avro, field_from_connect
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline.envelope import ENVELOPE

log = logging.getLogger(__name__)

_DAY_US = 86_400_000_000
_TWO_64 = 18446744073709551616


@dataclass(frozen=True)
class WriterSchema:
    schema_id: int
    text: str  # the Avro writer schema
    fields: tuple[Field, ...]  # the row's columns, by their Avro names
    key_names: tuple[str, ...]  # the key's columns; () for a table without a key


@dataclass(frozen=True)
class WriterSchemas:
    readable: dict[int, WriterSchema]  # what Spark's Avro reader takes
    too_wide: frozenset[int]  # ids of schemas with a DECIMAL over 38 digits: left to the Python transcoder


_VERSIONS: dict[tuple[str, str, int], tuple[int, str]] = {}  # (registry, subject, version) -> (id, text): immutable


def writer_schemas(registry_url: str, pattern: str) -> WriterSchemas:
    """Every value schema registered for the topics `pattern` matches. Asked at each batch: a capture registers
    a schema before it writes records of it, so every id in the batch's records is among them. Versions already
    read are not read again."""
    registry = SchemaRegistry(registry_url)
    matches = re.compile(pattern).fullmatch
    readable: dict[int, WriterSchema] = {}
    too_wide: set[int] = set()
    subjects = registry.subjects()
    for subject in subjects:
        topic = subject.removesuffix("-value")
        if not subject.endswith("-value") or not matches(topic):
            continue
        keys = _versions(registry, registry_url, f"{topic}-key") if f"{topic}-key" in subjects else []
        key_names = tuple(f["name"] for f in json.loads(keys[-1][1])["fields"]) if keys else ()
        for schema_id, text in _versions(registry, registry_url, subject):
            parsed = json.loads(text)
            if not (isinstance(parsed, dict) and parsed.get("fields") and parsed["fields"][0]["name"] == "before"):
                continue
            row = next(b for b in parsed["fields"][0]["type"] if b != "null")
            if _too_wide(row):
                too_wide.add(schema_id)
                continue
            fields = tuple(field_from_connect(connect_from_avro(f)) for f in row["fields"])
            readable[schema_id] = WriterSchema(schema_id, text, fields, key_names)
    return WriterSchemas(readable, frozenset(too_wide))


def _versions(registry: SchemaRegistry, url: str, subject: str) -> list[tuple[int, str]]:
    quoted = urllib.parse.quote(subject, safe="")
    out = []
    for number in registry.version_numbers(subject):
        held = _VERSIONS.get((url, quoted, number))
        if held is None:
            held = _VERSIONS[(url, quoted, number)] = registry.version(subject, number)
        out.append(held)
    return out


def _too_wide(row: dict[str, Any]) -> bool:
    """Whether a column is an Avro decimal Spark cannot hold (more than 38 digits)."""
    for f in row["fields"]:
        t = f["type"]
        branch = next((b for b in t if b != "null"), None) if isinstance(t, list) else t
        if isinstance(branch, dict) and branch.get("logicalType") == "decimal" and int(branch.get("precision", 0)) > 38:
            return True
    return False


# -- the conversions: Column of Debezium's value -> Column of cdcflow's ------------------------------------------


def _pad(n: Column, width: int) -> Column:
    return F.lpad(n.cast("string"), width, "0")


def _fraction(micros: Column, fsp: int) -> Column:
    return F.concat(F.lit("."), F.substring(_pad(micros, 6), 1, fsp)) if fsp else F.lit("")


def _clock(seconds: Column) -> Column:
    h = F.floor(seconds / 3600)
    hours = F.when(h < 10, F.concat(F.lit("0"), h.cast("string"))).otherwise(h.cast("string"))  # TIME: up to 838
    minutes = _pad(F.floor(seconds / 60) % 60, 2)
    return F.concat_ws(":", hours, minutes, _pad(seconds % 60, 2))


def convert(c: Column, f: Field) -> Column:
    """cdcflow's value of column `f` from its Debezium value `c` (as from_avro gives it)."""
    kind = f.kind
    if kind == "unsigned_long":
        return F.when(c < 0, c.cast("decimal(20,0)") + F.lit(str(_TWO_64)).cast("decimal(20,0)")).otherwise(
            c.cast("decimal(20,0)"))  # fmt: skip
    if kind == "decimal":
        return c.cast("string")  # from_avro gives DECIMAL(p, s); its text has exactly s decimals
    if kind == "date":
        return F.date_add(F.lit("1970-01-01").cast("date"), c).cast("string")
    if kind == "datetime":
        micros = c * 1000 if f.fsp <= 3 else c
        day = F.date_add(F.lit("1970-01-01").cast("date"), F.floor(micros / _DAY_US).cast("int")).cast("string")
        rest = micros - F.floor(micros / _DAY_US) * _DAY_US
        text = F.concat(day, F.lit(" "), _clock(F.floor(rest / 1_000_000)), _fraction(rest % 1_000_000, f.fsp))
        return F.when(c.isNotNull(), text)
    if kind == "time":
        size = F.abs(c)
        text = F.concat(F.when(c < 0, F.lit("-")).otherwise(F.lit("")), _clock(F.floor(size / 1_000_000)),
                        _fraction(size % 1_000_000, f.fsp))  # fmt: skip
        return F.when(c.isNotNull(), text)
    if kind == "bit" and f.length == 1:
        return c.cast("int")
    if kind == "bit":  # little-endian bytes -> the number
        hex_le = F.array_join(F.reverse(F.regexp_extract_all(F.hex(c), F.lit("(..)"), 1)), "")
        return F.when(c.isNotNull(), F.conv(hex_le, 16, 10).cast("decimal(20,0)"))
    if kind == "geometry":  # {wkb, srid} -> SRID (4 bytes, little-endian) + WKB: base64 in to_json
        srid_le = F.unhex(F.array_join(F.reverse(F.regexp_extract_all(
            F.lpad(F.hex(F.coalesce(c["srid"], F.lit(0))), 8, "0"), F.lit("(..)"), 1)), ""))  # fmt: skip
        return F.when(c.isNotNull(), F.concat(srid_le, c["wkb"]))
    if f.connect_type == "float":
        return c.cast("float")
    return c  # integers, double, strings, bytes (base64 in to_json), ZonedTimestamp text


def _row(image: Column, fields: tuple[Field, ...]) -> Column:
    return F.when(image.isNotNull(), F.struct(*(convert(image[f.name], f).alias(f.name) for f in fields)))


def decoded(value: Column, schema_id: Column, writer: WriterSchema) -> Column:
    """The record as `writer` reads it, for the records of that schema id (null for the others).

    Fenced like envelope.parse's `problem` (a never-true partition test), so Spark keeps it in a projection
    of its own instead of inlining `from_avro` into each of the dozens of places event_envelope reads it."""
    read = from_avro(F.substring(value, 6, 1 << 30), writer.text, {"mode": "PERMISSIVE"})
    return F.when(F.spark_partition_id() < 0, F.lit(None)).when(schema_id == writer.schema_id, read)


def event_envelope(e: Column, writer: WriterSchema) -> Column:
    """The cdcflow change event of a record decoded with `writer` (see `decoded`), made straight into the
    envelope's struct (what envelope.parse's `from_json` makes of the event's JSON text: key, before and after
    as JSON text, the rest typed), so the event is never written as JSON and parsed again."""
    after, before = _row(e["after"], writer.fields), _row(e["before"], writer.fields)
    names = sorted(writer.key_names) if writer.key_names else sorted(f.name for f in writer.fields)
    by_name = {f.name: f for f in writer.fields}
    # the key's columns of the newest image, each converted once more (not the whole images again)
    image = {n: F.when(e["after"].isNotNull(), e["after"][n]).otherwise(e["before"][n]) for n in names}
    key = F.struct(*(convert(image[n], by_name[n]).alias(n) for n in names))
    s = e["source"]
    given: _Given = {
        "schema": F.lit(SCHEMA_ID), "op": e["op"],
        "key": F.when(e["op"] == "t", F.lit("{}")).otherwise(_json(key)),  # a TRUNCATE: the whole table
        "before": _json(before), "after": _json(after),
        "source": {"connector": F.lit("mysql"), "name": s["name"], "db": s["db"], "table": s["table"],
                   "ts_ms": s["ts_ms"], "snapshot": F.coalesce(s["snapshot"], F.lit("false")) != "false",
                   "pos": s["cdcflow_pos"], "gtid": s["gtid"], "server_id": s["server_id"], "file": s["file"],
                   "position": s["pos"], "row": s["row"]},
        "ts_ms": e["ts_ms"],
        "transaction": F.when(e["transaction"].isNotNull(), F.struct(
            e["transaction"]["id"].alias("id"), e["transaction"]["total_order"].alias("order"))),
    }  # fmt: skip
    return F.when(e.isNotNull() & s["cdcflow_pos"].isNotNull(), _shaped(given, ENVELOPE))


_Given = dict[str, "Column | _Given"]


def _json(c: Column) -> Column:
    """A row image as the event's JSON text has it (binary as base64, nulls written)."""
    return F.to_json(c, {"ignoreNullFields": "false"})


def _shaped(given: _Given, schema: StructType) -> Column:
    """A struct of exactly `schema`'s fields: each given one cast to its type, the others null."""
    fields = []
    for f in schema.fields:
        value = given.get(f.name)
        if isinstance(value, dict):
            assert isinstance(f.dataType, StructType)
            fields.append(_shaped(value, f.dataType).alias(f.name))
        else:
            fields.append((value if value is not None else F.lit(None)).cast(f.dataType).alias(f.name))
    return F.struct(*fields)
