"""The debezium format in Avro, in Confluent's wire format: what Kafka Connect's AvroConverter writes.

`avro_schema` turns a Kafka Connect schema (as envelope.py describes key, value and transaction records)
into the Avro schema AvroConverter derives from it: structs are records named after the Connect name,
optional fields are unions with null (default null), int8/int16 keep their Connect type in `connect.type`,
named Connect types (io.debezium.time.Date, Connect's Decimal, ...) keep their name, version and parameters
as `connect.*` properties, and Decimal is also Avro's `decimal` logical type. A record is then
0x00, the schema id (4 bytes, big-endian) and the Avro binary encoding (fastavro), the framing Confluent's
deserializers, Flink's `debezium-avro-confluent` and Spark's `from_avro` (after the 5 bytes) read.
Names that Avro does not allow (a column "e-mail") become "_" spellings ("e_mail"), as Debezium's
`field.name.adjustment.mode=avro` does. Pure: schemas and bytes; the registry is the caller's.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro

from cdcflow.events.debezium.columns import avro_name
from cdcflow.events.debezium.envelope import TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA, DebeziumTable, Row

MAGIC = b"\x00"
_PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float": "float", "double": "double",
              "boolean": "boolean", "string": "string", "bytes": "bytes"}  # fmt: skip


def _full_name(connect_name: str) -> tuple[str, str]:
    parts = [avro_name(p) for p in connect_name.split(".")]
    return ".".join(parts[:-1]), parts[-1]


def avro_schema(connect: dict[str, Any], defined: set[str] | None = None) -> Any:
    """The Avro schema (parsed JSON) AvroConverter derives from a Connect schema (as JsonConverter writes it).
    A record type is defined once; later uses (the envelope's `after` after `before`, a second geometry
    column) name it, as Avro requires."""
    defined = set() if defined is None else defined
    kind = connect["type"]
    if kind == "struct":
        namespace, name = _full_name(connect.get("name") or "io.confluent.connect.avro.ConnectDefault")
        full = f"{namespace}.{name}" if namespace else name
        if full in defined:
            return full
        defined.add(full)
        out: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            out["namespace"] = namespace
        if connect.get("doc"):
            out["doc"] = connect["doc"]
        out["fields"] = [_field(f, defined) for f in connect["fields"]]
        if "version" in connect:
            out["connect.version"] = connect["version"]
        if connect.get("name"):
            out["connect.name"] = connect["name"]
        return out
    if kind == "array":
        return {"type": "array", "items": _optional(connect["items"], defined)}
    if kind == "map":
        return {"type": "map", "values": _optional(connect["values"], defined)}
    base = _PRIMITIVE[kind]
    props: dict[str, Any] = {}
    if kind in ("int8", "int16"):
        props["connect.type"] = kind
    connect_name = connect.get("name")
    if connect_name == "org.apache.kafka.connect.data.Decimal":
        params = connect.get("parameters", {})
        precision = int(params.get("connect.decimal.precision", 64))
        props.update({"scale": int(params.get("scale", 0)), "precision": precision, "logicalType": "decimal"})
    if connect_name:
        if "version" in connect:
            props["connect.version"] = connect["version"]
        if connect.get("parameters"):
            props["connect.parameters"] = dict(connect["parameters"])
        if "default" in connect:
            props["connect.default"] = connect["default"]
        props["connect.name"] = connect_name
    return {"type": base, **props} if props else base


def _optional(connect: dict[str, Any], defined: set[str]) -> Any:
    schema = avro_schema(connect, defined)
    return ["null", schema] if connect.get("optional") else schema


def _field(connect: dict[str, Any], defined: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": avro_name(connect["field"]), "type": _optional(connect, defined)}
    if connect.get("optional"):
        out["default"] = None
    return out


# (subject, Avro schema) -> the id the registry gives it (registering it if new)
Register = Callable[[str, Any], int]


class AvroWriter:
    """Encodes records of one Avro schema in Confluent's framing, once the registry gave its id."""

    def __init__(self, schema: Any, schema_id: int) -> None:
        self.parsed = fastavro.parse_schema(schema)
        self.header = MAGIC + struct.pack(">I", schema_id)

    def encode(self, record: Any) -> bytes:
        out = io.BytesIO()
        out.write(self.header)
        fastavro.schemaless_writer(out, self.parsed, record)
        return out.getvalue()


def split_frame(data: bytes) -> tuple[int, bytes]:
    """(schema id, Avro body) of a record in Confluent's framing; ValueError for anything else."""
    if len(data) < 5 or data[:1] != MAGIC:
        raise ValueError("not a Confluent-framed Avro record (magic byte 0 and a 4-byte schema id)")
    return struct.unpack(">I", data[1:5])[0], data[5:]


class AvroTable:
    """A table's Debezium key and value in Avro: the JSON DebeziumTable's records, same methods, other bytes.
    Registers the key and value schemas under `<topic>-key` and `<topic>-value` (Confluent's
    TopicNameStrategy) when made; a registry that refuses the new schema stops the capture (the caller)."""

    def __init__(self, table: DebeziumTable, topic: str, register: Register) -> None:
        if not table.binary:
            raise ValueError("an AvroTable needs a DebeziumTable made with binary=True")
        self.table = table
        value_schema = avro_schema(table.value_schema())
        self._value = AvroWriter(value_schema, register(f"{topic}-value", value_schema))
        self._key: AvroWriter | None = None
        if table.key_names:
            key_schema = avro_schema(table.key_schema())
            self._key = AvroWriter(key_schema, register(f"{topic}-key", key_schema))

    @property
    def key_names(self) -> tuple[str, ...]:
        return self.table.key_names

    def key_payload(self, image: Row) -> dict[str, Any]:
        return self.table.key_payload(image)

    def key(self, image: Row) -> bytes | None:
        return None if self._key is None else self._key.encode(self.table.key_payload(image))

    def value(self, op: str, before: Row | None, after: Row | None, source: dict[str, Any],
              transaction: dict[str, Any] | None, now_us: int) -> bytes:  # fmt: skip
        return self._value.encode(self.table.envelope(op, before, after, source, transaction, now_us))


class AvroTransactions:
    """BEGIN/END records of the transaction metadata topic in Avro."""

    def __init__(self, topic: str, register: Register) -> None:
        key_schema, value_schema = avro_schema(TRANSACTION_KEY_SCHEMA), avro_schema(TRANSACTION_VALUE_SCHEMA)
        self._key = AvroWriter(key_schema, register(f"{topic}-key", key_schema))
        self._value = AvroWriter(value_schema, register(f"{topic}-value", value_schema))

    def encode(self, key: dict[str, Any], value: dict[str, Any]) -> tuple[bytes, bytes]:
        return self._key.encode(key), self._value.encode(value)
