"""Debezium-format records back to cdcflow change events (what the pipeline reads): for the same rows event,
the transcoded event equals the one the cdcflow format writes, in JSON with Connect schemas and in Avro."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any
from unittest import mock

import pytest

from cdcflow.events.debezium.transcode import Transcoder
from cdcflow.events.heartbeats import HEARTBEAT_SCHEMA_ID
from cdcflow.events.json_codec import MalformedEvent, decode, encode
from cdcflow.events.transactions import TransactionEnd
from cdcflow.sources.mysql.binlog import columns as t
from cdcflow.sources.mysql.binlog.columns import BINARY_COLLATION, Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, RowsEvent
from cdcflow.sources.mysql.changes import TxnContext, row_changes
from cdcflow.sources.mysql.debezium_records import DebeziumOutput, DebeziumRecords

pytestmark = pytest.mark.unit

SCHEMA = TableSchema(7, "shop", "things", (
    Column("id", t.LONGLONG, 0, True, None, nullable=False), Column("small", t.SHORT, 0, False, None),
    Column("amount", t.NEWDECIMAL, (20 << 8) | 6, False, None), Column("f", t.FLOAT, 4, False, None),
    Column("day", t.DATE, 0, False, None), Column("at0", t.DATETIME2, 0, False, None),
    Column("at3", t.DATETIME2, 3, False, None), Column("at6", t.DATETIME2, 6, False, None),
    Column("ts", t.TIMESTAMP2, 2, False, None), Column("tm", t.TIME2, 4, False, None),
    Column("ubig", t.LONGLONG, 0, True, None), Column("bits", t.BIT, (1 << 8) | 2, False, None),
    Column("flag", t.BIT, 1, False, None), Column("blob", t.BLOB, 2, False, BINARY_COLLATION),
    Column("name", t.VARCHAR, 40, False, 45), Column("colour", t.ENUM, 1, False, 45, labels=("red", "green")),
    Column("g", t.GEOMETRY, 4, False, None),
), (0,))  # fmt: skip
ROW: dict[str, Any] = {
    "id": 18446744073709551615,
    "small": -3,
    "amount": "-12.500000",
    "f": 3.14159,
    "day": "0001-01-01",
    "at0": "2038-01-19 03:14:07",
    "at3": "1969-12-31 23:59:59.999",
    "at6": "9999-12-31 23:59:59.999999",
    "ts": "2024-02-29T12:34:56.78Z",
    "tm": "-838:59:59.0000",
    "ubig": 2**63 + 5,
    "bits": 513,
    "flag": 1,
    "blob": base64.b64encode(b"\x00\xff").decode(),
    "name": "héllo 😀",
    "colour": "green",
    "g": base64.b64encode(struct.pack("<I", 4326) + b"\x01\x01\x00\x00\x00" + b"\x00" * 16).decode(),
}
NULLS = {**{name: None for name in ROW}, "id": 2}
EVENTS = {
    "insert": [(None, ROW), (None, NULLS)],
    "update": [(ROW, {**ROW, "small": 4, "name": None}), (NULLS, {**NULLS, "id": 3})],  # the second changes the key
    "delete": [(ROW, None)],
}


class FakeRegistry:
    def __init__(self) -> None:
        self.schemas: dict[int, str] = {}

    def register(self, _subject: str, schema: Any) -> int:
        text = json.dumps(schema)
        for schema_id, known in self.schemas.items():
            if known == text:
                return schema_id
        self.schemas[len(self.schemas) + 1] = text
        return len(self.schemas)


@pytest.mark.parametrize("serialization", ["json", "avro"])
@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_transcoded_events_are_the_cdcflow_formats(serialization: str, kind: str) -> None:
    ev = RowsEvent(EventHeader(1_700_000_000, 30, 11, 200, 9079, 0), kind, 7, SCHEMA, tuple(EVENTS[kind]))
    registry = FakeRegistry()
    out = DebeziumOutput("src", "mariadb", serialization == "json", True, serialization=serialization)
    records = DebeziumRecords(out, registry.register if serialization == "avro" else None)
    with mock.patch("time.time", return_value=1_700_000_123.5):
        expected = [decode(encode(e)) for e in row_changes(ev, TxnContext("0-11-5", "0-11-5", "f", 5), "src", ("id",))]
    produced = records.rows(ev, TxnContext("0-11-5", "0-11-5", "f", 5), ("id",), "topic")
    transcoder = Transcoder(registry.schemas.__getitem__)
    got = [decode(transcoder.transcode(key, value)) for key, value, _ in produced if value is not None]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert (g.op, g.key, g.before, g.after) == (e.op, e.key, e.before, e.after)
        assert (g.source.pos, g.source.db, g.source.table, g.source.ts_ms, g.source.name) == (
            e.source.pos, e.source.db, e.source.table, e.source.ts_ms, e.source.name)  # fmt: skip
        assert g.source.extra["gtid"] == "0-11-5" and g.source.extra["position"] == 8879
        assert g.transaction is not None and g.transaction["order"] == e.transaction["order"]  # type: ignore[index]


@pytest.mark.parametrize(("value", "reason"), [
    (b'{"before": null, "after": {"id": 1}, "op": "c"}', "without Kafka Connect's schema"),
    (b"\x00\x00\x00\x00\x09garbage", "no schema registry|Avro record"),
    (b"not json", "not JSON"),
    (b'{"schema": {"fields": [{"field": "before", "fields": []}]}, "payload": {"before": null, "after": {},'
     b' "op": "c", "source": {"name": "s"}}}', "cdcflow_pos"),
])  # fmt: skip
def test_records_the_pipeline_cannot_read_raise_a_clear_error(value: bytes, reason: str) -> None:
    with pytest.raises(MalformedEvent, match=reason):
        Transcoder().transcode(None, value)


@pytest.mark.parametrize("serialization", ["json", "json-schemas", "avro"])
def test_heartbeats_become_cdcflow_heartbeats_with_the_source_time(serialization: str) -> None:
    registry = FakeRegistry()
    out = DebeziumOutput("src", "mariadb", serialization == "json-schemas", True,
                         serialization="avro" if serialization == "avro" else "json")  # fmt: skip
    records = DebeziumRecords(out, registry.register if serialization == "avro" else None)
    transcoder = Transcoder(registry.schemas.__getitem__)
    for source_ts in (1_700_000_000_250, None):
        key, value = records.heartbeat_record("beats", 1_700_000_001_000, source_ts)
        beat = json.loads(transcoder.heartbeat(key, value))
        assert beat["schema"] == HEARTBEAT_SCHEMA_ID and beat["ts_ms"] == 1_700_000_001_000
        assert beat["source"]["ts_ms"] == source_ts and beat["source"]["name"] == "src"
    with pytest.raises(MalformedEvent, match="ts_ms"):
        transcoder.heartbeat(None, b'{"ts_ms": "soon"}')


@pytest.mark.parametrize("serialization", ["json", "avro"])
def test_transaction_records_read_back_for_the_consistent_cut(serialization: str) -> None:
    """The END (and BEGIN) records the capture writes, in JSON with schemas and in Avro, read by the Delta sink's
    consistent cut as the transaction they describe."""
    registry = FakeRegistry()
    out = DebeziumOutput("srv", "mariadb", serialization == "json", True, "precise", serialization,
                         transaction_topic="srv.transaction")  # fmt: skip
    records = DebeziumRecords(out, registry.register if serialization == "avro" else None)
    counts = {"shop.accounts": 2, "shop.transfers": 1}
    _, begin, _ = records.transaction_record("0-1-42", 1_000, None)
    _, end, _ = records.transaction_record("0-1-42", 2_000, counts, seq=42)
    transcoder = Transcoder(lambda schema_id: registry.schemas[schema_id])
    assert transcoder.transaction("shop", begin) is None
    assert transcoder.transaction("shop", end) == TransactionEnd("shop", "0-1-42", 42, 2_000, counts)
    # Debezium's own END (no cdcflow_pos): a MariaDB GTID names the position, a MySQL one does not
    own = {"status": "END", "id": "0-1-42", "ts_ms": 2_000, "event_count": 3,
           "data_collections": [{"data_collection": t, "event_count": n} for t, n in counts.items()]}  # fmt: skip
    assert transcoder.transaction("shop", json.dumps(own).encode()) == TransactionEnd("shop", "0-1-42", 42, 2_000,
                                                                                        counts)  # fmt: skip
    with pytest.raises(MalformedEvent, match="without cdcflow_pos"):
        transcoder.transaction("shop", json.dumps({**own, "id": "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"}).encode())
