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

from cdcflow.events.debezium import avro_native
from cdcflow.events.debezium.avro_native import Plan
from cdcflow.events.debezium.columns import avro_name
from cdcflow.events.debezium.envelope import (
    HEARTBEAT_KEY_SCHEMA,
    HEARTBEAT_VALUE_SCHEMA,
    TRANSACTION_KEY_SCHEMA,
    TRANSACTION_VALUE_SCHEMA,
    VERSION,
    DebeziumTable,
    Row,
)

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
    if connect.get("parameters"):  # also without a name: the propagated source types
        props["connect.parameters"] = dict(connect["parameters"])
    if connect_name:
        if "version" in connect:
            props["connect.version"] = connect["version"]
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


# -- the envelope's fixed parts, written directly (byte for byte what fastavro writes for the whole schema;
# tests/unit/test_debezium_avro.py holds the two equal): fastavro then only writes the row images --------------


_ONE_BYTE = [bytes((z,)) for z in range(0x80)]


def avro_long(n: int) -> bytes:
    """Avro's int/long: zigzag, then a base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return _ONE_BYTE[z]
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string(text: str) -> bytes:
    raw = text.encode()
    return avro_long(len(raw)) + raw


def _optional_string(text: str | None) -> bytes:
    return b"\x00" if text is None else b"\x02" + _string(text)


def _optional_long(n: int | None) -> bytes:
    return b"\x00" if n is None else b"\x02" + avro_long(n)


class _SourceBytes:
    """`_source`, with what stays the same over the rows of one rows event written once: all but `row` and the
    last part of `cdcflow_pos` (source_block always leaves thread and query null)."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._head = self._pos_head = b""

    def __call__(self, s: dict[str, Any]) -> bytes:
        pos = s["cdcflow_pos"]
        if s["thread"] is not None or s["query"] is not None or not pos or len(pos) != 3:
            return _source(s)
        key = (
            s["version"],
            s["connector"],
            s["name"],
            s["ts_ms"],
            s["snapshot"],
            s["db"],
            s["sequence"],
            s["ts_us"],
            s["ts_ns"],
            s["table"],
            s["server_id"],
            s["gtid"],
            s["file"],
            s["pos"],
            pos[0],
            pos[1],
        )
        if key != self._key:
            full = _source(s)
            tail = (avro_long(s["row"]) + b"\x00\x00" + b"\x02\x06" + avro_long(pos[0]) + avro_long(pos[1])
                    + avro_long(pos[2]) + b"\x00")  # fmt: skip
            self._head, self._key = full[: len(full) - len(tail)], key
            self._pos_head = b"\x00\x00\x02\x06" + avro_long(pos[0]) + avro_long(pos[1])
        return self._head + avro_long(s["row"]) + self._pos_head + avro_long(pos[2]) + b"\x00"


def _source(s: dict[str, Any]) -> bytes:
    """envelope.source_schema in Avro (field order and optionality as declared there)."""
    pos = s["cdcflow_pos"]
    positions = b"\x00" if pos is None else (
        b"\x02" + (avro_long(len(pos)) + b"".join(avro_long(p) for p in pos) if pos else b"") + b"\x00")  # fmt: skip
    return b"".join((
        _string(s["version"]), _string(s["connector"]), _string(s["name"]), avro_long(s["ts_ms"]),
        _optional_string(s["snapshot"]), _string(s["db"]), _optional_string(s["sequence"]), _optional_long(s["ts_us"]),
        _optional_long(s["ts_ns"]), _optional_string(s["table"]), avro_long(s["server_id"]),
        _optional_string(s["gtid"]), _string(s["file"]), avro_long(s["pos"]), avro_long(s["row"]),
        _optional_long(s["thread"]),
        _optional_string(s["query"]), positions,
    ))  # fmt: skip


_NATIVE_KIND = {"insert": 0, "delete": 1, "update": 2}
_OPS = {op: bytes((2,)) + op.encode() for op in ("c", "u", "d", "r")}


def _transaction(t: dict[str, Any] | None) -> bytes:
    if t is None:
        return b"\x00"
    return b"\x02" + _string(t["id"]) + avro_long(t["total_order"]) + avro_long(t["data_collection_order"])


class AvroTable:
    """A table's Debezium key and value in Avro: the JSON DebeziumTable's records, same methods, other bytes.
    Registers the key and value schemas under `<topic>-key` and `<topic>-value` (Confluent's
    TopicNameStrategy) when made; a registry that refuses the new schema stops the capture (the caller).
    The row images go through fastavro; the rest of the envelope is written here (a third of the time)."""

    def __init__(self, table: DebeziumTable, topic: str, register: Register) -> None:
        if not table.binary:
            raise ValueError("an AvroTable needs a DebeziumTable made with binary=True")
        self.table = table
        value_schema = avro_schema(table.value_schema())
        self._value = AvroWriter(value_schema, register(f"{topic}-value", value_schema))
        self._row = fastavro.parse_schema(value_schema["fields"][0]["type"][1])  # the Value record
        self._source = _SourceBytes()
        self._times_at, self._times = -1, b""
        self._key: AvroWriter | None = None
        if table.key_names:
            key_schema = avro_schema(table.key_schema())
            self._key = AvroWriter(key_schema, register(f"{topic}-key", key_schema))
        # the compiled path's plans (avro_native.py), when it is built and knows every column
        self._native: tuple[Plan, Plan] | None = None
        rows, keys = avro_native.row_plan(table.fields), avro_native.key_plan(table.fields, table.key_names)
        if avro_native.debezium_avro_rows is not None and rows is not None and keys is not None:
            self._native = (rows, keys)
        self._source_parts: tuple[bytes, bytes, bytes] | None = None

    @property
    def key_names(self) -> tuple[str, ...]:
        return self.table.key_names

    def key_payload(self, image: Row) -> dict[str, Any]:
        return self.table.key_payload(image)

    def key(self, image: Row) -> bytes | None:
        return None if self._key is None else self._key.encode(self.table.key_payload(image))

    def value(self, op: str, before: Row | None, after: Row | None, source: dict[str, Any],
              transaction: dict[str, Any] | None, now_us: int) -> bytes:  # fmt: skip
        out = io.BytesIO()
        out.write(self._value.header)
        for image in (before, after):
            if image is None:
                out.write(b"\x00")
            else:
                out.write(b"\x02")
                fastavro.schemaless_writer(out, self._row, self.table.row(image))
        out.write(self._source(source) + _transaction(transaction) + (_OPS.get(op) or _string(op)))
        out.write(self._times_of(now_us))
        return out.getvalue()

    def _times_of(self, now_us: int) -> bytes:
        if now_us != self._times_at:  # one clock reading per rows event
            self._times_at = now_us
            ms, ns = avro_long(now_us // 1000), avro_long(now_us * 1000)
            self._times = b"\x02" + ms + b"\x02" + avro_long(now_us) + b"\x02" + ns
        return self._times

    def native_records(self, rows: tuple[Any, ...], kind: str, ts_ms: int, server_id: int, gtid: str | None,
                       file: str, pos: int, seq: int, event_index: int, transaction_id: str, order: int,
                       table_order: int, now_us: int, tombstones: bool,
                       with_images: bool) -> tuple[list[avro_native.NativeRecord], int, int] | None:  # fmt: skip
        """A streamed rows event's records by the compiled path (avro_native.py): (key, value, image) per record,
        and the transaction's and the table's event counts after them; None: take the Python path. The source
        block is source_block's for a streamed row (`snapshot` "false", `cdcflow_pos` [seq, event_index, row])."""
        if self._native is None:
            return None
        assert avro_native.debezium_avro_rows is not None
        t = self.table
        if self._source_parts is None:
            named = _string(VERSION) + _string(t.connector) + _string(t.server_name)
            # snapshot "false", db, sequence null; table
            self._source_parts = (named, _optional_string("false") + _string(t.db) + b"\x00", _optional_string(t.table))
        prefix, db_part, table_part = self._source_parts
        return avro_native.debezium_avro_rows(
            rows, _NATIVE_KIND[kind], self._native[0], self._native[1], self._value.header,
            None if self._key is None else self._key.header, prefix, db_part, table_part, ts_ms, server_id, gtid, file,
            pos, seq, event_index, transaction_id, order, table_order, now_us, tombstones, with_images,
        )  # fmt: skip


class AvroRecords:
    """Records of one fixed key and value schema in Avro (transaction metadata, heartbeats)."""

    def __init__(self, topic: str, key: dict[str, Any], value: dict[str, Any], register: Register) -> None:
        key_schema, value_schema = avro_schema(key), avro_schema(value)
        self._key = AvroWriter(key_schema, register(f"{topic}-key", key_schema))
        self._value = AvroWriter(value_schema, register(f"{topic}-value", value_schema))

    def encode(self, key: dict[str, Any], value: dict[str, Any]) -> tuple[bytes, bytes]:
        return self._key.encode(key), self._value.encode(value)


def avro_transactions(topic: str, register: Register) -> AvroRecords:
    """BEGIN/END records of the transaction metadata topic in Avro."""
    return AvroRecords(topic, TRANSACTION_KEY_SCHEMA, TRANSACTION_VALUE_SCHEMA, register)


def avro_heartbeats(topic: str, register: Register) -> AvroRecords:
    return AvroRecords(topic, HEARTBEAT_KEY_SCHEMA, HEARTBEAT_VALUE_SCHEMA, register)
