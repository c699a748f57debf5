"""The `debezium` output format, pure parts: value conversions, field mapping, records of rows events.

Expected values were recorded from Debezium 3.5.0.Final's MariaDB connector (JsonConverter, default
representations) on MariaDB 10.11, for the SQL literal named in each case; the cdcflow inputs are how
cdcflow renders the same literal (docs/mysql.md). The live comparison with Debezium on the same
transactions is tests/integration/test_debezium_comparison.py.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest

from cdcflow.events.debezium.columns import Field, UnconvertibleValue
from cdcflow.events.debezium.envelope import DebeziumTable, transaction_begin, transaction_end
from cdcflow.events.debezium.transcode import Transcoder
from cdcflow.events.transactions import TransactionEnd
from cdcflow.sources.mysql.binlog import columns as t
from cdcflow.sources.mysql.binlog.columns import BINARY_COLLATION, Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, RowsEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.debezium_fields import field_from_column, field_from_information_schema
from cdcflow.sources.mysql.debezium_records import DebeziumOutput, DebeziumRecords

pytestmark = pytest.mark.unit


def convert(field: Field, value: Any, binary: bool = False) -> Any:
    return field.converter(binary)(value)


DEC = Field("d", "bytes", "decimal", scale=6)


@pytest.mark.parametrize(
    ("field", "cdcflow_value", "debezium_value"),
    [
        # DECIMAL(20,6) -12.5 / 99999999999999.999999; DECIMAL(65,30); DECIMAL(5,0) 12345
        (DEC, "-12.500000", "/0FD4A=="),
        (DEC, "99999999999999.999999", "BWvHXi1jD///"),
        (Field("d", "bytes", "decimal", scale=30),
         "-12345678901234567890123456789012345.123456789012345678901234567890", "4f1D4Wh6dCOTRq+nDL2ygsWAE4T8HZlxwPUu"),
        (Field("d", "bytes", "decimal", scale=0), "12345", "MDk="),
        # BIGINT UNSIGNED 18446744073709551615 (bigint.unsigned.handling.mode=long)
        (Field("u", "int64", "unsigned_long"), 18446744073709551615, -1),
        (Field("u", "int64", "unsigned_long"), 5, 5),
        # DATE '2024-02-29', zero dates
        (Field("dt", "int32", "date"), "2024-02-29", 19782),
        (Field("dt", "int32", "date"), "0000-00-00", None),
        (Field("dt", "int32", "date"), "2024-00-15", None),
        # DATETIME(6), DATETIME, DATETIME(3) before the epoch
        (Field("x", "int64", "datetime", fsp=6), "2024-02-29 12:34:56.123456", 1709210096123456),
        (Field("x", "int64", "datetime", fsp=0), "2038-01-19 03:14:07", 2147483647000),
        (Field("x", "int64", "datetime", fsp=3), "1969-12-31 23:59:59.999", -1),
        (Field("x", "int64", "datetime", fsp=6), "0000-00-00 00:00:00.000000", None),
        # TIMESTAMP(3), its zero, TIMESTAMP(6), TIMESTAMP
        (Field("ts", "string", "zoned_timestamp", fsp=3), "2024-02-29T12:34:56.789Z", "2024-02-29T12:34:56.789Z"),
        (Field("ts", "string", "zoned_timestamp", fsp=3), "0000-00-00T00:00:00Z", "1970-01-01T00:00:00.000Z"),
        (Field("ts", "string", "zoned_timestamp", fsp=6), "2038-01-19T03:14:07.999999Z",
         "2038-01-19T03:14:07.999999Z"),
        (Field("ts", "string", "zoned_timestamp", fsp=0), "1970-01-01T00:00:01Z", "1970-01-01T00:00:01Z"),
        # TIME extremes and fractions
        (Field("tm", "int64", "time"), "-838:59:59", -3020399000000),
        (Field("tm", "int64", "time"), "838:59:59", 3020399000000),
        (Field("tm", "int64", "time", fsp=3), "-00:00:01.500", -1500000),
        (Field("tm", "int64", "time", fsp=6), "12:00:00.000001", 43200000001),
        # BIT(10) b'1111111111' and b'1000000001', BIT(64), BIT(1)
        (Field("b", "bytes", "bit", length=10), 1023, "/wM="),
        (Field("b", "bytes", "bit", length=10), 513, "AQI="),
        (Field("b", "bytes", "bit", length=64), (1 << 63) | 1, "AQAAAAAAAIA="),
        (Field("b", "boolean", "bit", length=1), 1, True),
        (Field("b", "boolean", "bit", length=1), 0, False),
        # binary columns stay base64 in JSON; text, ENUM, SET as they are
        (Field("bl", "bytes", "bytes"), "AP8Q", "AP8Q"),
        (Field("s", "string", "plain"), "héllo 😀", "héllo 😀"),
    ],
)  # fmt: skip
def test_values_convert_to_what_debezium_writes(field: Field, cdcflow_value: Any, debezium_value: Any) -> None:
    assert convert(field, cdcflow_value) == debezium_value
    assert convert(field, None) is None


def test_zero_dates_in_not_null_columns_are_the_epoch_not_null() -> None:
    assert convert(Field("dt", "int32", "date", optional=False), "0000-00-00") == 0
    assert convert(Field("x", "int64", "datetime", optional=False), "0000-00-00 00:00:00") == 0


def test_geometry_splits_the_srid_from_the_wkb() -> None:
    recorded = "AQIAAAACAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPA/AAAAAAAA8D8="
    wkb = base64.b64decode(recorded)
    server_form = base64.b64encode(struct.pack("<I", 4326) + wkb).decode()
    got = convert(Field("g", "struct", "geometry"), server_form)
    # recorded: ST_GeomFromText('LINESTRING(0 0,1 1)', 4326)
    assert got == {"wkb": recorded, "srid": 4326}
    assert convert(Field("g", "struct", "geometry"), base64.b64encode(b"\0\0\0\0" + wkb).decode())["srid"] is None
    assert convert(Field("g", "struct", "geometry"), server_form, binary=True)["wkb"] == wkb


def test_binary_mode_gives_bytes_for_avro() -> None:
    assert convert(DEC, "-12.500000", binary=True) == bytes.fromhex("ff4143e0")
    assert convert(Field("bl", "bytes", "bytes"), "AP8Q", binary=True) == b"\x00\xff\x10"
    assert convert(Field("b", "bytes", "bit", length=10), 1023, binary=True) == b"\xff\x03"


@pytest.mark.parametrize(
    ("field", "bad"),
    [(DEC, "1.5"), (Field("dt", "int32", "date"), "garbage!!"), (Field("tm", "int64", "time"), "1:x:3"),
     (Field("g", "struct", "geometry"), "AA==")],
)  # fmt: skip
def test_values_of_the_wrong_form_raise_a_clear_error(field: Field, bad: Any) -> None:
    with pytest.raises(UnconvertibleValue, match=field.name):
        convert(field, bad)


# -- the field mapping: binlog and information_schema agree, and match Debezium's schemas -------------------

COLUMNS = [
    # (binlog column, information_schema DATA_TYPE, COLUMN_TYPE, Debezium's field schema as recorded)
    (Column("i_u", t.LONG, 0, True, None), "int", "int(10) unsigned", {"type": "int64", "optional": True}),
    (Column("smallu", t.SHORT, 0, True, None), "smallint", "smallint(5) unsigned", {"type": "int32", "optional": True}),
    (Column("tiny", t.TINY, 0, False, None), "tinyint", "tinyint(4)", {"type": "int16", "optional": True}),
    (Column("med", t.INT24, 0, False, None), "mediumint", "mediumint(9)", {"type": "int32", "optional": True}),
    (Column("dec20", t.NEWDECIMAL, (20 << 8) | 6, False, None), "decimal", "decimal(20,6)",
     {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
      "parameters": {"scale": "6", "connect.decimal.precision": "20"}}),
    (Column("f", t.FLOAT, 4, False, None), "float", "float", {"type": "float", "optional": True}),
    (Column("dt", t.DATE, 0, False, None), "date", "date",
     {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1}),
    (Column("dtm", t.DATETIME2, 6, False, None), "datetime", "datetime(6)",
     {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1}),
    (Column("dtm3", t.DATETIME2, 3, False, None), "datetime", "datetime(3)",
     {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "version": 1}),
    (Column("ts", t.TIMESTAMP2, 3, False, None), "timestamp", "timestamp(3)",
     {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1}),
    (Column("tm", t.TIME2, 0, False, None), "time", "time",
     {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "version": 1}),
    (Column("yr", t.YEAR, 0, False, None), "year", "year(4)",
     {"type": "int32", "optional": True, "name": "io.debezium.time.Year", "version": 1}),
    (Column("bl", t.BLOB, 2, False, BINARY_COLLATION), "blob", "blob", {"type": "bytes", "optional": True}),
    (Column("tx", t.BLOB, 2, False, 45), "text", "text", {"type": "string", "optional": True}),
    (Column("en", t.ENUM, 1, False, 45, labels=("red", "green", "blue")), "enum", "enum('red','green','blue')",
     {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
      "parameters": {"allowed": "red,green,blue"}}),
    (Column("st", t.SET, 1, False, 45, labels=("a", "b", "c", "d")), "set", "set('a','b','c','d')",
     {"type": "string", "optional": True, "name": "io.debezium.data.EnumSet", "version": 1,
      "parameters": {"allowed": "a,b,c,d"}}),
    (Column("bt", t.BIT, (1 << 8) | 2, False, None), "bit", "bit(10)",
     {"type": "bytes", "optional": True, "name": "io.debezium.data.Bits", "version": 1,
      "parameters": {"length": "10"}}),
    (Column("bt1", t.BIT, 1, False, None), "bit", "bit(1)", {"type": "boolean", "optional": True}),
]  # fmt: skip


@pytest.mark.parametrize(("column", "data_type", "column_type", "expected"), COLUMNS, ids=[c[0].name for c in COLUMNS])
def test_both_ways_in_give_debeziums_field_schema(column: Column, data_type: str, column_type: str,
                                                  expected: dict[str, Any]) -> None:  # fmt: skip
    from_binlog = field_from_column(column)
    from_server = field_from_information_schema(column.name, data_type, column_type, nullable=True)
    assert from_binlog.connect_schema() == {**expected, "field": column.name}
    assert from_server == from_binlog


# -- records of a rows event ------------------------------------------------------------------------------------

SCHEMA = TableSchema(
    7, "shop", "lines",
    (Column("order_id", t.LONGLONG, 0, False, None, nullable=False), Column("line", t.SHORT, 0, True, None,
     nullable=False), Column("qty", t.LONG, 0, False, None)),
    (0, 1),
)  # fmt: skip
HEADER = EventHeader(1_700_000_000, 30, 11, 200, 9079, 0)  # the rows event starts at 8879


def records(kind: str, rows: list[tuple[Any, Any]], *, schemas: bool = False, tombstones: bool = True,
            keys: tuple[str, ...] = ("order_id", "line")) -> tuple[list[Any], TxnContext]:  # fmt: skip
    ev = RowsEvent(HEADER, kind, 7, SCHEMA, tuple(rows))
    ctx = TxnContext("0-11-21", "0-11-21", "binlog.000001", 21, event_index=1)
    out = DebeziumRecords(DebeziumOutput("src", "mariadb", schemas, tombstones)).rows(ev, ctx, keys, "topic")
    return [(orjson.loads(k) if k else None, orjson.loads(v) if v else None, i) for k, v, i in out], ctx


def test_a_key_change_is_delete_tombstone_create_as_in_debezium() -> None:
    got, ctx = records("update", [({"order_id": 2, "line": 2, "qty": 6}, {"order_id": 2, "line": 3, "qty": 6})])
    assert [(k, v["op"] if v else None) for k, v, _ in got] == [
        ({"order_id": 2, "line": 2}, "d"),
        ({"order_id": 2, "line": 2}, None),
        ({"order_id": 2, "line": 3}, "c"),
    ]
    delete, _, create = (v for _, v, _ in got)
    assert delete["before"] == {"order_id": 2, "line": 2, "qty": 6} and delete["after"] is None
    assert create["before"] is None and create["after"] == {"order_id": 2, "line": 3, "qty": 6}
    # as Debezium wrote the same UPDATE: both at the rows event's position, row 0, total orders 1 and 2
    for v, order in ((delete, 1), (create, 2)):
        s = v["source"]
        assert (s["connector"], s["name"], s["db"], s["table"], s["pos"], s["row"], s["gtid"], s["snapshot"]) == (
            "mariadb",
            "src",
            "shop",
            "lines",
            8879,
            0,
            "0-11-21",
            "false",
        )
        assert s["server_id"] == 11 and s["ts_ms"] == 1_700_000_000_000 and s["cdcflow_pos"] == [21, 1, 0]
        assert v["transaction"] == {"id": "0-11-21", "total_order": order, "data_collection_order": order}
    assert ctx.order == 2 and ctx.table_orders == {"shop.lines": 2}
    # the snapshot's identity is cdcflow's key form, names sorted
    assert [i for _, _, i in got] == [b'{"line":2,"order_id":2}'] * 2 + [b'{"line":3,"order_id":2}']


def test_tombstones_can_be_turned_off_and_keyless_tables_get_no_key() -> None:
    got, _ = records("delete", [({"order_id": 1, "line": 1, "qty": 3}, None)], tombstones=False)
    assert [v["op"] for _, v, _ in got] == ["d"]
    got, _ = records("update", [({"order_id": 1, "line": 1, "qty": 3}, {"order_id": 1, "line": 2, "qty": 3})],
                     keys=())  # fmt: skip
    assert [(k, v["op"]) for k, v, _ in got] == [(None, "u")]  # no key: an update stays an update
    got, _ = records("delete", [({"order_id": 1, "line": 1, "qty": 3}, None)], keys=())
    assert len(got) == 1  # and no tombstone without a key


def test_the_schema_wrapper_is_connects_with_schemas_enable() -> None:
    got, _ = records("insert", [(None, {"order_id": 5, "line": 1, "qty": None})], schemas=True)
    ((key, value, _),) = got
    key_fields = [{"type": "int64", "optional": False, "field": "order_id"},
                  {"type": "int32", "optional": False, "field": "line"}]  # fmt: skip
    assert key == {"schema": {"type": "struct", "fields": key_fields, "optional": False, "name": "src.shop.lines.Key"},
                   "payload": {"order_id": 5, "line": 1}}  # fmt: skip
    assert value["schema"]["name"] == "src.shop.lines.Envelope" and value["schema"]["version"] == 2
    assert [f["field"] for f in value["schema"]["fields"]] == [
        "before",
        "after",
        "source",
        "transaction",
        "op",
        "ts_ms",
        "ts_us",
        "ts_ns",
    ]
    assert value["payload"]["after"] == {"order_id": 5, "line": 1, "qty": None}
    assert value["payload"]["ts_us"] // 1000 == value["payload"]["ts_ms"]


def test_transaction_records_count_events_per_table() -> None:
    key, begin = transaction_begin("0-1-16", 1000, schemas=False)
    assert orjson.loads(key) == {"id": "0-1-16"}
    assert orjson.loads(begin) == {"status": "BEGIN", "id": "0-1-16", "event_count": None, "data_collections": None,
                                   "ts_ms": 1000, "cdcflow_pos": None}  # fmt: skip
    _, end = transaction_end("0-1-16", 2000, {"ref.lines": 2, "ref.types": 1}, schemas=True, seq=16)
    payload = orjson.loads(end)["payload"]
    assert (
        payload["event_count"] == 3
        and payload["cdcflow_pos"] == 16
        and payload["data_collections"]
        == [
            {"data_collection": "ref.lines", "event_count": 2},
            {"data_collection": "ref.types", "event_count": 1},
        ]
    )
    # the consistent cut reads it back (and a BEGIN as nothing)
    read = Transcoder(None).transaction("src", end)
    assert read == TransactionEnd("src", "0-1-16", 16, 2000, {"ref.lines": 2, "ref.types": 1})
    assert Transcoder(None).transaction("src", begin) is None


def test_a_key_column_that_is_not_a_column_is_refused() -> None:
    with pytest.raises(ValueError, match="key columns"):
        DebeziumTable("s", "mysql", "db", "t", (Field("a", "int32", "plain"),), ("b",))


LOSSLESS = [
    (DEC, "-12.500000"), (DEC, "0.000001"), (DEC, "-0.000001"), (Field("d", "bytes", "decimal", scale=0), "12345"),
    (Field("d", "string", "decimal_string", scale=2), "-3.10"), (Field("u", "int64", "unsigned_long"), 2**64 - 1),
    (Field("dt", "int32", "date"), "0001-01-01"), (Field("dt", "int32", "date"), "9999-12-31"),
    (Field("x", "int64", "datetime", fsp=6), "1969-12-31 23:59:59.999999"),
    (Field("x", "int64", "datetime", fsp=3), "1000-01-01 00:00:00.500"),
    (Field("x", "int64", "datetime", fsp=0), "2038-01-19 03:14:07"),
    (Field("tm", "int64", "time", fsp=0), "-838:59:59"), (Field("tm", "int64", "time", fsp=1), "-00:00:00.1"),
    (Field("tm", "int64", "time", fsp=6), "838:59:58.999999"), (Field("b", "bytes", "bit", length=64), 2**64 - 1),
    (Field("b", "boolean", "bit", length=1), 1), (Field("bl", "bytes", "bytes"), "AP8Q"),
    (Field("f", "float", "plain"), 3.14159),
    (Field("g", "struct", "geometry"), base64.b64encode(b"\1\0\0\0wkb").decode()),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value"), LOSSLESS)
@pytest.mark.parametrize("binary", [False, True])
def test_readers_give_the_cdcflow_value_back(field: Field, value: Any, binary: bool) -> None:
    assert field.reader(binary)(field.converter(binary)(value)) == value
    assert field.reader(binary)(None) is None


@pytest.mark.parametrize(("column", "data_type", "column_type", "parameters"), [
    (Column("dtm", t.DATETIME2, 6, False, None), "datetime", "datetime(6)", {
     "__debezium.source.column.type": "DATETIME", "__debezium.source.column.length": "6",
     "__debezium.source.column.name": "dtm"}),
    (Column("dtm0", t.DATETIME2, 0, False, None), "datetime", "datetime", {"__debezium.source.column.type": "DATETIME",
     "__debezium.source.column.name": "dtm0"}),
    (Column("tm3", t.TIME2, 3, False, None), "time", "time(3)", {"__debezium.source.column.type": "TIME",
     "__debezium.source.column.length": "3", "__debezium.source.column.name": "tm3"}),
    (Column("u", t.LONGLONG, 0, True, None), "bigint", "bigint(20) unsigned", {
     "__debezium.source.column.type": "BIGINT UNSIGNED", "__debezium.source.column.name": "u"}),
    (Column("i", t.LONG, 0, False, None), "int", "int(11)", None),
])  # fmt: skip
def test_source_types_are_propagated_as_debezium_does(column: Column, data_type: str, column_type: str,
                                                      parameters: dict[str, str] | None) -> None:  # fmt: skip
    # recorded from Debezium 3.5 with datatype.propagate.source.type=.+\.DATETIME,.+\.TIME,.+\.BIGINT UNSIGNED
    from_binlog = field_from_column(column, propagate=True)
    assert from_binlog.connect_schema().get("parameters") == parameters
    assert field_from_information_schema(column.name, data_type, column_type, True, propagate=True) == from_binlog
