"""The debezium format's Avro: the schema AvroConverter would derive, and the hand-written envelope encoding
(AvroTable.value) byte for byte equal to fastavro's encoding of the whole envelope with that schema."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.dev.registry.avro_compat import compatible
from cdcflow.events.debezium.avro import AvroTable, AvroWriter, avro_schema, split_frame
from cdcflow.events.debezium.columns import Field
from cdcflow.events.debezium.envelope import DebeziumTable, source_block

pytestmark = pytest.mark.unit

FIELDS = (
    Field("id", "int64", "plain", optional=False), Field("small", "int16", "plain"), Field("name", "string", "plain"),
    Field("amount", "bytes", "decimal", logical="org.apache.kafka.connect.data.Decimal",
          parameters=(("scale", "2"), ("connect.decimal.precision", "12")), scale=2),
    Field("at", "int64", "datetime", logical="io.debezium.time.MicroTimestamp", fsp=6),
    Field("bits", "bytes", "bit", logical="io.debezium.data.Bits", parameters=(("length", "10"),), length=10),
    Field("g", "struct", "geometry"), Field("e-mail", "string", "plain"),
)  # fmt: skip
TABLE = DebeziumTable("src", "mariadb", "shop", "orders", FIELDS, ("id",), binary=True)
IDS = {"shop-value": 7, "shop-key": 8}


def register(subject: str, schema: Any) -> int:
    fastavro.parse_schema(schema)  # a valid Avro schema
    return IDS[subject]


images = st.fixed_dictionaries({
    "id": st.integers(-(2**63), 2**63 - 1), "small": st.none() | st.integers(-(2**15), 2**15 - 1),
    "name": st.none() | st.text(max_size=20), "amount": st.none() | st.decimals(-(10**9), 10**9, places=2).map(str),
    "at": st.none() | st.sampled_from(["2026-01-02 03:04:05.123456", "1969-12-31 23:59:59.999999"]),
    "bits": st.none() | st.integers(0, 1023), "g": st.none() | st.just("5hAAAAEBAAAAAAAAAAAA+D8AAAAAAAAAwA=="),
    "e-mail": st.none() | st.text(max_size=5),
})  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(before=st.none() | images, after=st.none() | images, snapshot=st.sampled_from(["false", "incremental"]),
       txn=st.none() | st.integers(1, 10**6), row=st.integers(0, 2**31 - 1), now_us=st.integers(0, 2**53))  # fmt: skip
def test_the_hand_written_envelope_is_what_fastavro_writes(before: Any, after: Any, snapshot: str, txn: int | None,
                                                          row: int, now_us: int) -> None:  # fmt: skip
    avro = AvroTable(TABLE, "shop", register)
    gtid = "0-11-5" if txn else None
    source = source_block("mariadb", "src", "shop", "orders", 1_700_000_000_000, snapshot, 11, gtid,
                          "binlog.000001", 4096, row, (5, 1, row))  # fmt: skip
    transaction = {"id": "0-11-5", "total_order": txn, "data_collection_order": txn} if txn else None
    got = avro.value("u", before, after, source, transaction, now_us)
    schema = avro_schema(TABLE.value_schema())
    expected = AvroWriter(schema, 7).encode(TABLE.envelope("u", before, after, source, transaction, now_us))
    assert got == expected
    # a second row of the same rows event: the source's cached part with another row number
    source2 = {**source, "row": row // 2 + 1, "cdcflow_pos": [5, 1, row // 2 + 1]}
    again = avro.value("c", None, after, source2, transaction, now_us)
    assert again == AvroWriter(schema, 7).encode(TABLE.envelope("c", None, after, source2, transaction, now_us))
    schema_id, body = split_frame(got)
    decoded = fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(schema))
    assert schema_id == 7 and decoded["source"]["row"] == row and decoded["op"] == "u"


def test_the_schema_is_avroconverters() -> None:
    schema = avro_schema(TABLE.value_schema())
    assert (schema["name"], schema["namespace"], schema["connect.name"]) == ("Envelope", "src.shop.orders",
                                                                           "src.shop.orders.Envelope")  # fmt: skip
    before, after = schema["fields"][0], schema["fields"][1]
    assert before["type"][0] == "null" and before["default"] is None
    assert after["type"] == ["null", "src.shop.orders.Value"]
    columns = {f["name"]: f for f in before["type"][1]["fields"]}
    assert columns["id"]["type"] == "long" and "default" not in columns["id"]
    assert columns["small"]["type"] == ["null", {"type": "int", "connect.type": "int16"}]
    assert columns["amount"]["type"][1] | {} == {
        "type": "bytes", "scale": 2, "precision": 12, "logicalType": "decimal", "connect.version": 1,
        "connect.parameters": {"scale": "2", "connect.decimal.precision": "12"},
        "connect.name": "org.apache.kafka.connect.data.Decimal"}  # fmt: skip
    assert "e_mail" in columns  # not a valid Avro name as it is
    geometry = columns["g"]["type"][1]
    assert geometry["name"] == "Geometry" and geometry["namespace"] == "io.debezium.data.geometry"


def test_a_column_added_in_mysql_gives_a_backward_compatible_schema() -> None:
    wider = DebeziumTable("src", "mariadb", "shop", "orders", (*FIELDS, Field("added", "int32", "plain")), ("id",),
                          binary=True)  # fmt: skip
    narrower = DebeziumTable("src", "mariadb", "shop", "orders", FIELDS[:-1], ("id",), binary=True)
    old = avro_schema(TABLE.value_schema())
    assert not compatible(avro_schema(wider.value_schema()), old, "BACKWARD")
    assert not compatible(avro_schema(narrower.value_schema()), old, "BACKWARD")  # a dropped column too


def test_frames_that_are_not_confluents_are_refused() -> None:
    for bad in (b"", b"\x01\x00\x00\x00\x01x", b"\x00\x00"):
        with pytest.raises(ValueError, match="Confluent-framed"):
            split_frame(bad)
