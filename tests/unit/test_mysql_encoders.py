"""Every output format's encoder (output.py) writes the same changes: generated rows events, encoded by each
and read back the way that format's consumers read it (the cdcflow envelope by json_codec.decode, Debezium's
JSON as JSON, its Avro by fastavro with the schemas the encoder registered), give the changes
`changes.row_changes` makes: the same operations, keys, images and positions, in the same order, with the
transaction's numbering left where the reference leaves it."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import fastavro
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.events.debezium.avro import split_frame
from cdcflow.events.json_codec import decode
from cdcflow.sources.mysql.binlog import columns as t
from cdcflow.sources.mysql.binlog.columns import Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, Row, RowsEvent
from cdcflow.sources.mysql.changes import CdcflowEncoder, TxnContext, key_columns, row_changes
from cdcflow.sources.mysql.debezium_records import DebeziumEncoder, DebeziumOutput, DebeziumRecords
from cdcflow.sources.mysql.output import RecordEncoder
from cdcflow.sources.mysql.txn_buffer import HeldRecord

pytestmark = pytest.mark.unit

UTF8 = 45
COLUMNS = (
    Column("id", t.LONG, 0, False, None, nullable=False),
    Column("code", t.VARCHAR, 40, False, UTF8, nullable=False),
    Column("name", t.VARCHAR, 200, False, UTF8),
    Column("n", t.LONGLONG, 0, False, None),
)
# A change as every format can say it: (op, key, before, after, position)
Change = tuple[str, dict[str, Any], Row | None, Row | None, list[int]]


def _image() -> st.SearchStrategy[Row]:
    return st.fixed_dictionaries({
        "id": st.integers(1, 5), "code": st.sampled_from(["a", "b", "é"]),
        "name": st.none() | st.text(max_size=6), "n": st.none() | st.integers(-(2**63), 2**63 - 1),
    })  # fmt: skip


@st.composite
def rows_events(draw: st.DrawFn) -> RowsEvent:
    pk = draw(st.sampled_from([(0,), (1, 0)]))  # one key column, or two
    schema = TableSchema(7, "shop", "orders", COLUMNS, pk)
    kind = draw(st.sampled_from(["insert", "update", "delete"]))
    rows: list[tuple[Row | None, Row | None]] = []
    for _ in range(draw(st.integers(1, 4))):
        before, after = draw(_image()), draw(_image())
        if kind == "update" and draw(st.booleans()):  # the same key: a plain update
            after = {**after, **{COLUMNS[i].name: before[COLUMNS[i].name] for i in pk}}
        rows.append((None, after) if kind == "insert" else (before, None) if kind == "delete" else (before, after))
    return RowsEvent(EventHeader(1_700_000_000, 30, 11, 200, draw(st.integers(4, 2**31)), 0), kind, 7, schema,
                     tuple(rows))  # fmt: skip


def context() -> TxnContext:
    return TxnContext("0-11-42", "0-11-42", "mariadb-bin.000003", 42, event_index=3, order=5)


def _no_split(*_args: object) -> HeldRecord:
    raise AssertionError("no change here is too large")


def read_cdcflow(records: list[HeldRecord]) -> list[Change]:
    out = []
    for r in records:
        e = decode(r.value or b"")
        assert orjson.loads(r.key or b"") == orjson.loads(e.key) and r.table == "shop.orders"
        out.append((e.op.value, orjson.loads(e.key), e.before, e.after, list(e.source.pos)))
    return out


def read_debezium(payload_of: Callable[[bytes, str], dict[str, Any]]) -> Callable[[list[HeldRecord]], list[Change]]:
    def read(records: list[HeldRecord]) -> list[Change]:
        out: list[Change] = []
        for r in records:
            key = payload_of(r.key or b"", "key")
            if r.value is None:  # a tombstone: right after the delete of the same key
                assert out and out[-1][0] == "d" and out[-1][1] == key
                continue
            v = payload_of(r.value, "value")
            out.append((v["op"], key, v["before"], v["after"], v["source"]["cdcflow_pos"]))
        return out

    return read


def json_payload(data: bytes, _part: str) -> dict[str, Any]:
    return dict(orjson.loads(data))


class Registry:
    """Schemas by id, as a schema registry would hold what the encoder registered."""

    def __init__(self) -> None:
        self.schemas: dict[int, Any] = {}

    def register(self, _subject: str, schema: Any) -> int:
        self.schemas[len(self.schemas) + 1] = fastavro.parse_schema(schema)
        return len(self.schemas)

    def payload(self, data: bytes, _part: str) -> dict[str, Any]:
        schema_id, body = split_frame(data)
        return dict(fastavro.schemaless_reader(io.BytesIO(body), self.schemas[schema_id]))


def encoders() -> list[tuple[str, RecordEncoder, Callable[[list[HeldRecord]], list[Change]]]]:
    registry = Registry()

    def debezium(serialization: str) -> DebeziumEncoder:
        out = DebeziumOutput("src", "mariadb", schemas=False, tombstones=True, serialization=serialization)
        register = registry.register if serialization == "avro" else None
        return DebeziumEncoder(DebeziumRecords(out, register), {}, lambda _sql, _args: [])

    return [
        ("cdcflow", CdcflowEncoder("src", _no_split), read_cdcflow),
        ("debezium json", debezium("json"), read_debezium(json_payload)),
        ("debezium avro", debezium("avro"), read_debezium(registry.payload)),
    ]


@settings(max_examples=150, deadline=None)
@given(rows_events())
def test_every_output_format_writes_the_changes_row_changes_makes(ev: RowsEvent) -> None:
    assert ev.schema is not None
    keys = key_columns(ev.schema, {})
    reference_ctx = context()
    expected = [(e.op.value, orjson.loads(e.key), e.before, e.after, list(e.source.pos))
                for e in row_changes(ev, reference_ctx, "src", keys)]  # fmt: skip
    for name, encoder, read in encoders():
        ctx = context()
        got = read(encoder.rows(ev, ctx, keys, "src.shop.orders", limit=1 << 30))
        assert got == expected, name
        assert ctx.order == reference_ctx.order, name
