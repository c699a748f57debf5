"""Debezium-format records written by cdcflow's MySQL capture -> cdcflow change events (change-event-v1 JSON).

How the pipeline reads topics in the debezium format: each record is turned back into the event the cdcflow
format would have carried, and the sinks see no difference. The types come with the record: Kafka Connect's
schema wrapper (`output.schemas: true`) or the Avro writer schema (by its id, from the registry). Values go
back through each field's reader (columns.py); DATETIME and TIME need their fractional digits and BIGINT
UNSIGNED its sign, which `output.propagate_source_types` (on by default) puts in the schema. What the
debezium format cannot carry comes back as it is there: zero dates are null (the sinks write NULL for them
in either format), a zero TIMESTAMP is the epoch, a DECIMAL written as a double stays a double.
Records without a schema, or not written by cdcflow (no `source.cdcflow_pos`), raise MalformedEvent: the
pipeline dead-letters them with their bytes. Pure: the registry lookup is the caller's function.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import fastavro
import orjson

from cdcflow.events.debezium.avro import split_frame
from cdcflow.events.debezium.columns import Field
from cdcflow.events.heartbeats import heartbeat_record
from cdcflow.events.json_codec import SCHEMA_ID, MalformedEvent
from cdcflow.events.transactions import TransactionEnd, collection_counts

# schema id -> the writer schema's text (Confluent's GET /schemas/ids/{id})
FetchSchema = Callable[[int], str]
Reader = tuple[str, Callable[[Any], Any]]

_AVRO_TO_CONNECT = {"int": "int32", "long": "int64", "float": "float", "double": "double", "boolean": "boolean",
                    "string": "string", "bytes": "bytes", "record": "struct"}  # fmt: skip


def field_from_connect(schema: dict[str, Any]) -> Field:
    """A column's Field from its Kafka Connect schema (as JsonConverter writes it, or rebuilt from Avro)."""
    name, ctype = str(schema["field"]), str(schema["type"])
    logical = schema.get("name")
    params = schema.get("parameters") or {}
    optional = bool(schema.get("optional", True))
    source_type = params.get("__debezium.source.column.type")
    length = int(params.get("__debezium.source.column.length", 0) or 0)
    if ctype == "struct":
        return Field(name, "struct", "geometry", optional)
    if logical == "org.apache.kafka.connect.data.Decimal":
        return Field(name, "bytes", "decimal", optional, scale=int(params.get("scale", 0)))
    if logical == "io.debezium.data.Bits":
        return Field(name, "bytes", "bit", optional, length=int(params.get("length", 2)))
    if ctype == "boolean":  # BIT(1): TINYINT(1) is an int16 in Debezium's events
        return Field(name, "boolean", "bit", optional, length=1)
    if logical == "io.debezium.time.Date":
        return Field(name, "int32", "date", optional)
    if logical in ("io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp"):
        fsp = length if source_type else (0 if logical.endswith(".Timestamp") else 6)
        return Field(name, "int64", "datetime", optional, fsp=fsp)
    if logical == "io.debezium.time.MicroTime":
        return Field(name, "int64", "time", optional, fsp=length)
    if ctype == "int64" and source_type == "BIGINT UNSIGNED":
        return Field(name, "int64", "unsigned_long", optional)
    if ctype == "bytes":
        return Field(name, "bytes", "bytes", optional)
    return Field(name, ctype, "plain", optional)  # integers, float, double, strings, ENUM, SET, JSON, timestamps


def connect_from_avro(field: dict[str, Any]) -> dict[str, Any]:
    """The Connect schema of one Avro record field, from the `connect.*` properties AvroConverter keeps."""
    avro = field["type"]
    optional = isinstance(avro, list)
    if optional:
        avro = next(branch for branch in avro if branch != "null")
    props = avro if isinstance(avro, dict) else {"type": avro}
    base = props["type"]
    ctype = props.get("connect.type") or _AVRO_TO_CONNECT.get(base if isinstance(base, str) else "", "string")
    out: dict[str, Any] = {"field": field["name"], "type": ctype, "optional": optional}
    if props.get("connect.name"):
        out["name"] = props["connect.name"]
    if props.get("connect.parameters"):
        out["parameters"] = props["connect.parameters"]
    return out


class Transcoder:
    """Turns debezium-format records into cdcflow change events; keeps the readers per schema it has seen."""

    def __init__(self, fetch_schema: FetchSchema | None = None) -> None:
        self._fetch = fetch_schema
        self._avro: dict[int, tuple[Any, list[Reader]]] = {}
        self._connect: dict[bytes, list[Reader]] = {}

    def transcode(self, key: bytes | None, value: bytes) -> bytes:
        """The cdcflow change event (JSON) for one debezium-format record."""
        if value[:1] == b"\x00":
            envelope, readers = self._read_avro(value)
            key_names = list(self._read_avro(key)[0]) if key else None
        else:
            envelope, readers = self._read_json(value)
            key_names = list(self._json_payload(key)) if key else None
        return self._event(envelope, readers, key_names)

    def heartbeat(self, key: bytes | None, value: bytes) -> bytes:
        """A debezium-format heartbeat record ({serverName} / {ts_ms, cdcflow_source_ts_ms}) as the cdcflow
        format's heartbeat: the pipeline counts its source time towards a sink's progress. A heartbeat without
        cdcflow_source_ts_ms (Debezium's own) gets a null source time: its ts_ms says nothing of the source."""
        if value[:1] == b"\x00":
            payload = self._read_avro(value)[0]
            server = self._read_avro(key)[0].get("serverName") if key else None
        else:
            payload = self._json_payload(value)
            server = self._json_payload(key).get("serverName") if key else None
        ts_ms, source_ts_ms = payload.get("ts_ms"), payload.get("cdcflow_source_ts_ms")
        if not isinstance(ts_ms, int) or not isinstance(source_ts_ms, int | None):
            raise MalformedEvent("a heartbeat record without an integer ts_ms")
        name = server if isinstance(server, str) else ""
        return heartbeat_record("mysql", name, {}, source_ts_ms, ts_ms)[1]

    def transaction(self, source: str, value: bytes) -> TransactionEnd | None:
        """A record of the transaction metadata topic: its END as a TransactionEnd of `source`, None for a BEGIN.
        The position is `cdcflow_pos` (cdcflow's addition); without it (Debezium's own records) a MariaDB GTID
        d-s-n gives n, and a MySQL GTID nothing: refused, since a MySQL position counts the executed set."""
        payload = self._read_avro(value)[0] if value[:1] == b"\x00" else self._json_payload(value)
        status, txn_id, ts_ms = payload.get("status"), payload.get("id"), payload.get("ts_ms")
        if status == "BEGIN":
            return None
        if status != "END" or not isinstance(txn_id, str) or not isinstance(ts_ms, int):
            raise MalformedEvent("not a BEGIN or END record with an id and ts_ms")
        seq = payload.get("cdcflow_pos")
        if seq is None:
            parts = txn_id.split("-")
            if len(parts) != 3 or not all(p.isdigit() for p in parts):
                raise MalformedEvent(f"an END record of {txn_id} without cdcflow_pos (not written by cdcflow)")
            seq = int(parts[2])
        if not isinstance(seq, int):
            raise MalformedEvent("an END record with a cdcflow_pos that is not an integer")
        return TransactionEnd(source, txn_id, seq, ts_ms, collection_counts(payload.get("data_collections")))

    # -- Avro -----------------------------------------------------------------------------------------------

    def _read_avro(self, data: bytes) -> tuple[dict[str, Any], list[Reader]]:
        try:
            schema_id, body = split_frame(data)
        except ValueError as exc:
            raise MalformedEvent(str(exc)) from None
        held = self._avro.get(schema_id)
        if held is None:
            if self._fetch is None:
                raise MalformedEvent("an Avro record, and no schema registry to read its schema from")
            writer = orjson.loads(self._fetch(schema_id))
            parsed = fastavro.parse_schema(writer)
            readers: list[Reader] = []
            if isinstance(writer, dict) and writer.get("fields") and writer["fields"][0]["name"] == "before":
                row = next(b for b in writer["fields"][0]["type"] if b != "null")
                readers = [_reader(field_from_connect(connect_from_avro(f)), binary=True) for f in row["fields"]]
            held = self._avro[schema_id] = (parsed, readers)
        try:
            record = fastavro.schemaless_reader(io.BytesIO(body), held[0], None)
        except Exception as exc:  # fastavro raises several types for bytes that do not fit the schema
            raise MalformedEvent(f"Avro record does not match its schema {schema_id}: {exc}") from None
        if not isinstance(record, dict):
            raise MalformedEvent("an Avro record that is not a record")
        return record, held[1]

    # -- JSON ------------------------------------------------------------------------------------------------

    @staticmethod
    def _json_payload(data: bytes) -> dict[str, Any]:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise MalformedEvent(f"not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise MalformedEvent("not a JSON object")
        payload = doc.get("payload") if "schema" in doc else doc
        if not isinstance(payload, dict):
            raise MalformedEvent("no payload object")
        return payload

    def _read_json(self, data: bytes) -> tuple[dict[str, Any], list[Reader]]:
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise MalformedEvent(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), dict) or "payload" not in doc:
            raise MalformedEvent("a debezium JSON record without Kafka Connect's schema: the pipeline needs the types "
                                 "(mysql.output.schemas: true, or serialization: avro)")  # fmt: skip
        fields = doc["schema"].get("fields") or []
        if not fields or fields[0].get("field") != "before":
            raise MalformedEvent("not a Debezium change event (no `before` in its schema)")
        row_schema = fields[0].get("fields") or []
        cache_key = orjson.dumps(row_schema)
        readers = self._connect.get(cache_key)
        if readers is None:
            if len(self._connect) > 1024:
                self._connect.clear()
            readers = self._connect[cache_key] = [_reader(field_from_connect(f), binary=False) for f in row_schema]
        payload = doc["payload"]
        if not isinstance(payload, dict):
            raise MalformedEvent("payload is not an object")
        return payload, readers

    # -- the cdcflow event -----------------------------------------------------------------------------------

    @staticmethod
    def _event(envelope: dict[str, Any], readers: list[Reader], key_names: list[str] | None) -> bytes:
        try:
            source, op = envelope["source"], envelope["op"]
            pos = source.get("cdcflow_pos")
            if not pos:
                raise MalformedEvent("no source.cdcflow_pos: not written by cdcflow (the pipeline orders by it)")
            before = _row(envelope["before"], readers)
            after = _row(envelope["after"], readers)
            image = after if after is not None else before
            if op == "t":  # a TRUNCATE: the whole table, no row
                image, names = {}, []
            elif image is None:
                raise MalformedEvent("neither a before nor an after image")
            else:
                names = sorted(key_names) if key_names else sorted(image)
            event: dict[str, Any] = {
                "schema": SCHEMA_ID, "op": op, "key": {n: image.get(n) for n in names}, "before": before,
                "after": after,
                "source": {
                    "connector": "mysql", "name": source["name"], "db": source["db"], "table": source["table"],
                    "ts_ms": source["ts_ms"], "snapshot": source.get("snapshot") not in (None, "false"),
                    "pos": list(pos), "gtid": source.get("gtid"), "server_id": source.get("server_id"),
                    "file": source.get("file"), "position": source.get("pos"), "row": source.get("row"),
                },
                "ts_ms": envelope.get("ts_ms"),
            }  # fmt: skip
            txn = envelope.get("transaction")
            if txn:
                event["transaction"] = {"id": txn["id"], "order": txn["total_order"]}
            return orjson.dumps(event)
        except MalformedEvent:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedEvent(f"not a Debezium change event: {type(exc).__name__}: {exc}") from None


def _reader(field: Field, binary: bool) -> Reader:
    return field.name, field.reader(binary)


def _row(image: Any, readers: list[Reader]) -> dict[str, Any] | None:
    if image is None:
        return None
    if not isinstance(image, dict):
        raise MalformedEvent("a row image that is not an object")
    return {name: read(image.get(name)) for name, read in readers}
