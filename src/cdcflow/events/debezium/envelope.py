"""Debezium's record key and value for one table, its tombstones and its transaction metadata records.

`DebeziumTable` is made once per table schema (the capture keeps one per TABLE_MAP it has seen) and turns
row images, already rendered the cdcflow way, into Debezium's envelope:

    {"before": {...} | null, "after": {...} | null, "source": {...}, "transaction": {...} | null,
     "op": "c" | "u" | "d" | "r", "ts_ms": ..., "ts_us": ..., "ts_ns": ...}

The key is a struct of the key columns. With `schemas=True` both are wrapped the way Kafka Connect's
JsonConverter does with `schemas.enable=true`: {"schema": <Connect schema>, "payload": <the struct>}.
`source` carries Debezium's fields plus `cdcflow_pos`, cdcflow's own position (docs/debezium.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdcflow.events.debezium.columns import Field, avro_name
from cdcflow.version import __version__

VERSION = f"cdcflow-{__version__}"
# Debezium's snapshot markers; cdcflow's snapshot is chunked under watermarks (DBLog), like Debezium's
# incremental snapshots, so its reads say "incremental".
SNAPSHOT_VALUES = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"

Row = Mapping[str, Any]


def source_schema(connector: str) -> dict[str, Any]:
    """The Connect schema of `source` (Debezium 3.5's MySQL/MariaDB Source struct, plus cdcflow_pos)."""

    def f(field_name: str, ftype: str, optional: bool, **extra: Any) -> dict[str, Any]:
        return {"type": ftype, "optional": optional, **extra, "field": field_name}

    return {
        "type": "struct",
        "fields": [
            f("version", "string", False), f("connector", "string", False), f("name", "string", False),
            f("ts_ms", "int64", False),
            f("snapshot", "string", True, name="io.debezium.data.Enum", version=1,
              parameters={"allowed": SNAPSHOT_VALUES}, default="false"),
            f("db", "string", False), f("sequence", "string", True), f("ts_us", "int64", True),
            f("ts_ns", "int64", True), f("table", "string", True), f("server_id", "int64", False),
            f("gtid", "string", True), f("file", "string", False), f("pos", "int64", False), f("row", "int32", False),
            f("thread", "int64", True), f("query", "string", True),
            {"type": "array", "items": {"type": "int64", "optional": False}, "optional": True, "field": "cdcflow_pos"},
        ],
        "optional": False, "name": f"io.debezium.connector.{connector}.Source", "version": 1, "field": "source",
    }  # fmt: skip


TRANSACTION_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": False, "field": "total_order"},
        {"type": "int64", "optional": False, "field": "data_collection_order"},
    ],
    "optional": True, "name": "event.block", "version": 1, "field": "transaction",
}  # fmt: skip


@dataclass
class DebeziumTable:
    """One table's Debezium key and value (JSON), made from its column description."""

    server_name: str  # the source's name: Debezium's topic.prefix, the first part of schema names
    connector: str  # "mysql" | "mariadb"
    db: str
    table: str
    fields: tuple[Field, ...]
    key_names: tuple[str, ...]  # key columns, in key order
    schemas: bool = False  # wrap key and value as JsonConverter does with schemas.enable=true
    # Avro (avro.py): bytes stay bytes and field names are Avro-safe; JSON: bytes are base64 text
    binary: bool = False
    _convert: list[tuple[str, str, Callable[[Any], Any]]] = field(init=False, repr=False)
    _key_convert: list[tuple[str, str, Callable[[Any], Any]]] = field(init=False, repr=False)
    _value_head: bytes = field(init=False, repr=False)
    _key_head: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_name = {f.name: f for f in self.fields}
        missing = [k for k in self.key_names if k not in by_name]
        if missing:
            raise ValueError(f"{self.db}.{self.table}: key columns {missing} are not columns of the table")
        out_name = avro_name if self.binary else str
        self._convert = [(out_name(f.name), f.name, f.converter(self.binary)) for f in self.fields]
        self._key_convert = [(out_name(k), k, by_name[k].converter(self.binary)) for k in self.key_names]
        self._value_head = b'{"schema":' + orjson.dumps(self.value_schema()) + b',"payload":'
        self._key_head = b'{"schema":' + orjson.dumps(self.key_schema()) + b',"payload":'

    @property
    def prefix(self) -> str:
        return f"{self.server_name}.{self.db}.{self.table}"

    # -- schemas -------------------------------------------------------------------------------------------

    def row_schema(self, field_name: str) -> dict[str, Any]:
        return {"type": "struct", "fields": [f.connect_schema() for f in self.fields], "optional": True,
                "name": f"{self.prefix}.Value", "field": field_name}  # fmt: skip

    def value_schema(self) -> dict[str, Any]:
        return {
            "type": "struct",
            "fields": [
                self.row_schema("before"), self.row_schema("after"), source_schema(self.connector),
                TRANSACTION_SCHEMA, {"type": "string", "optional": False, "field": "op"},
                {"type": "int64", "optional": True, "field": "ts_ms"},
                {"type": "int64", "optional": True, "field": "ts_us"},
                {"type": "int64", "optional": True, "field": "ts_ns"},
            ],
            "optional": False, "name": f"{self.prefix}.Envelope", "version": 2,
        }  # fmt: skip

    def key_schema(self) -> dict[str, Any]:
        by_name = {f.name: f for f in self.fields}
        key_fields = [{**by_name[k].connect_schema(), "optional": False} for k in self.key_names]
        return {"type": "struct", "fields": key_fields, "optional": False, "name": f"{self.prefix}.Key"}

    # -- records ---------------------------------------------------------------------------------------

    def row(self, image: Row | None) -> dict[str, Any] | None:
        if image is None:
            return None
        return {out: convert(image.get(name)) for out, name, convert in self._convert}

    def key_payload(self, image: Row) -> dict[str, Any]:
        return {out: convert(image.get(name)) for out, name, convert in self._key_convert}

    def envelope(self, op: str, before: Row | None, after: Row | None, source: dict[str, Any],
                 transaction: dict[str, Any] | None, now_us: int) -> dict[str, Any]:  # fmt: skip
        return {
            "before": self.row(before), "after": self.row(after), "source": source, "transaction": transaction,
            "op": op, "ts_ms": now_us // 1000, "ts_us": now_us, "ts_ns": now_us * 1000,
        }  # fmt: skip

    def key(self, image: Row) -> bytes | None:
        """The Kafka key; None for a table without key columns (Debezium writes such records unkeyed)."""
        if not self.key_names:
            return None
        payload = orjson.dumps(self.key_payload(image))
        return self._key_head + payload + b"}" if self.schemas else payload

    def value(self, op: str, before: Row | None, after: Row | None, source: dict[str, Any],
              transaction: dict[str, Any] | None, now_us: int) -> bytes:  # fmt: skip
        payload = orjson.dumps(self.envelope(op, before, after, source, transaction, now_us))
        return self._value_head + payload + b"}" if self.schemas else payload


def source_block(
    connector: str, server_name: str, db: str, table: str, ts_ms: int, snapshot: str, server_id: int,
    gtid: str | None, file: str, pos: int, row: int, cdcflow_pos: Sequence[int],
) -> dict[str, Any]:  # fmt: skip
    return {
        "version": VERSION, "connector": connector, "name": server_name, "ts_ms": ts_ms, "snapshot": snapshot,
        "db": db, "sequence": None, "ts_us": ts_ms * 1000, "ts_ns": ts_ms * 1_000_000, "table": table,
        "server_id": server_id, "gtid": gtid, "file": file, "pos": pos, "row": row, "thread": None, "query": None,
        "cdcflow_pos": list(cdcflow_pos),
    }  # fmt: skip


# -- the transaction metadata topic --------------------------------------------------------------------------

TRANSACTION_KEY_SCHEMA: dict[str, Any] = {
    "type": "struct", "fields": [{"type": "string", "optional": False, "field": "id"}], "optional": False,
    "name": "io.debezium.connector.common.TransactionMetadataKey", "version": 1,
}  # fmt: skip
TRANSACTION_VALUE_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "status"},
        {"type": "string", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "field": "event_count"},
        {"type": "array", "items": {"type": "struct", "fields": [
            {"type": "string", "optional": False, "field": "data_collection"},
            {"type": "int64", "optional": False, "field": "event_count"}],
            "optional": True, "name": "event.collection", "version": 1}, "optional": True, "field": "data_collections"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        # cdcflow's addition: the first element of the transaction's changes' positions (source.cdcflow_pos), which
        # a MySQL GTID alone does not give (decision 0015); the Delta sink's consistent cut reads it.
        {"type": "int64", "optional": True, "field": "cdcflow_pos"},
    ],
    "optional": False, "name": "io.debezium.connector.common.TransactionMetadataValue", "version": 1,
}  # fmt: skip


def _wrap(schema: dict[str, Any], payload: dict[str, Any], schemas: bool) -> bytes:
    return orjson.dumps({"schema": schema, "payload": payload} if schemas else payload)


def begin_payload(txn_id: str, ts_ms: int) -> dict[str, Any]:
    return {"status": "BEGIN", "id": txn_id, "event_count": None, "data_collections": None, "ts_ms": ts_ms,
            "cdcflow_pos": None}  # fmt: skip


def end_payload(txn_id: str, ts_ms: int, counts: Mapping[str, int], seq: int | None = None) -> dict[str, Any]:
    """`counts`: events per "db.table", in first-seen order; `seq`: the first element of the changes' positions."""
    return {
        "status": "END", "id": txn_id, "event_count": sum(counts.values()),
        "data_collections": [{"data_collection": name, "event_count": n} for name, n in counts.items()],
        "ts_ms": ts_ms, "cdcflow_pos": seq,
    }  # fmt: skip


def transaction_begin(txn_id: str, ts_ms: int, schemas: bool) -> tuple[bytes, bytes]:
    """(key, value) of a BEGIN record, in JSON."""
    value = begin_payload(txn_id, ts_ms)
    return _wrap(TRANSACTION_KEY_SCHEMA, {"id": txn_id}, schemas), _wrap(TRANSACTION_VALUE_SCHEMA, value, schemas)


def transaction_end(txn_id: str, ts_ms: int, counts: Mapping[str, int], schemas: bool,
                    seq: int | None = None) -> tuple[bytes, bytes]:  # fmt: skip
    """(key, value) of an END record, in JSON."""
    value = end_payload(txn_id, ts_ms, counts, seq)
    return _wrap(TRANSACTION_KEY_SCHEMA, {"id": txn_id}, schemas), _wrap(TRANSACTION_VALUE_SCHEMA, value, schemas)


# -- heartbeat records (Debezium's heartbeat.interval.ms) -----------------------------------------------------

HEARTBEAT_KEY_SCHEMA: dict[str, Any] = {
    "type": "struct", "fields": [{"type": "string", "optional": False, "field": "serverName"}], "optional": False,
    "name": "io.debezium.connector.common.ServerNameKey", "version": 1,
}  # fmt: skip
HEARTBEAT_VALUE_SCHEMA: dict[str, Any] = {
    "type": "struct", "fields": [
        {"type": "int64", "optional": False, "field": "ts_ms"},
        # cdcflow's addition: the time of the newest change the capture read (it follows the clock while the
        # server is idle and the capture caught up). Debezium's ts_ms is only the heartbeat's own time, which
        # says nothing of how far behind the capture is; the pipeline's lag needs this one.
        {"type": "int64", "optional": True, "field": "cdcflow_source_ts_ms"},
    ], "optional": False, "name": "io.debezium.connector.common.Heartbeat", "version": 1,
}  # fmt: skip


def heartbeat_payload(ts_ms: int, source_ts_ms: int | None) -> dict[str, Any]:
    return {"ts_ms": ts_ms, "cdcflow_source_ts_ms": source_ts_ms}


def heartbeat(server_name: str, ts_ms: int, source_ts_ms: int | None, schemas: bool) -> tuple[bytes, bytes]:
    """(key, value) of a heartbeat record, in JSON: {"serverName"} and {"ts_ms"} as Debezium writes them, plus
    cdcflow_source_ts_ms."""
    return (_wrap(HEARTBEAT_KEY_SCHEMA, {"serverName": server_name}, schemas),
            _wrap(HEARTBEAT_VALUE_SCHEMA, heartbeat_payload(ts_ms, source_ts_ms), schemas))  # fmt: skip
