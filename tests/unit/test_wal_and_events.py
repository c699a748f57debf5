"""ReplicateWALEntry decoding → row change events → JSON, and back."""

from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import WireProtocolError
from cdcflow.events import Op
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import MalformedEvent, ValueHints, decode, encode, to_dict
from cdcflow.protocols.hbase.cellblock import encode_cells
from cdcflow.protocols.hbase.pb import wal_pb2
from cdcflow.protocols.hbase.wal import decode_replicate_call
from cdcflow.sources.hbase.changes import BulkLoadNotSupported, row_changes

CLUSTER = uuid.UUID("12345678-1234-5678-9abc-def012345678")
SCHEMA = Path(__file__).resolve().parents[2] / "src/cdcflow/events/schema/change-event-v1.json"


def make_call(entries: list[tuple[str, int, list[Cell]]]) -> tuple[bytes, bytes]:
    req = wal_pb2.ReplicateWALEntryRequest()
    cells: list[Cell] = []
    for table, seq, entry_cells in entries:
        e = req.entry.add(associated_cell_count=len(entry_cells))
        e.key.encoded_region_name = b"0123456789abcdef0123456789abcdef"
        e.key.table_name = table.encode()
        e.key.log_sequence_number = seq
        e.key.write_time = 1_700_000_000_000 + seq
        cid = e.key.cluster_ids.add()
        cid.most_sig_bits, cid.least_sig_bits = CLUSTER.int >> 64, CLUSTER.int & (2**64 - 1)
        cells.extend(entry_cells)
    return req.SerializeToString(), encode_cells(cells)


def put(row: bytes, q: bytes, v: bytes, ts: int = 10) -> Cell:
    return Cell(row, b"cf", q, ts, CellType.PUT, v)


def test_entries_own_their_cells_in_order() -> None:
    param, block = make_call(
        [
            ("ns:t1", 7, [put(b"a", b"x", b"1"), put(b"a", b"y", b"2"), put(b"b", b"x", b"3")]),
            ("t2", 9, [put(b"c", b"z", b"4")]),
        ]
    )
    call = decode_replicate_call(param, block)
    assert [(e.table, e.sequence_id, len(e.cells)) for e in call.entries] == [("ns:t1", 7, 3), ("t2", 9, 1)]
    assert call.entries[0].cluster_ids == (CLUSTER,)
    events = list(row_changes(call.entries[0], "src"))
    assert [(e.key, e.source.pos, len(e.cells or ())) for e in events] == [
        (b"a", (7, 0), 2),
        (b"b", (7, 1), 1),
    ]
    assert events[0].source.db == "ns" and events[0].source.table == "t1"
    assert events[0].source.extra == {
        "region": "0123456789abcdef0123456789abcdef",
        "cluster_id": str(CLUSTER),
    }
    assert next(iter(row_changes(call.entries[1], "src"))).source.db == "default"


def test_cell_count_mismatch_is_a_protocol_error() -> None:
    param, block = make_call([("t", 1, [put(b"a", b"x", b"1")])])
    with pytest.raises(WireProtocolError, match="more than the 1 cells"):
        decode_replicate_call(param, block + block)
    with pytest.raises(WireProtocolError):
        decode_replicate_call(param, b"")


def test_delete_only_rows_are_op_d_and_markers_are_skipped() -> None:
    marker = Cell(b"\x00", b"METAFAMILY", b"HBASE::FLUSH", 1, CellType.PUT, b"...")
    deletes = [
        Cell(b"r", b"cf", b"", 5, CellType.DELETE_FAMILY),
        Cell(b"r", b"cg", b"", 5, CellType.DELETE_FAMILY),
    ]
    param, block = make_call([("t", 3, [marker, *deletes])])
    (entry,) = decode_replicate_call(param, block).entries
    (event,) = row_changes(entry, "src")
    assert event.op is Op.DELETE and event.cells == tuple(deletes)


def test_bulk_load_marker_is_refused_loudly() -> None:
    marker = Cell(b"\x00", b"METAFAMILY", b"HBASE::BULK_LOAD", 1, CellType.PUT, b"desc")
    param, block = make_call([("t", 3, [marker])])
    (entry,) = decode_replicate_call(param, block).entries
    with pytest.raises(BulkLoadNotSupported):
        list(row_changes(entry, "src"))


def test_json_roundtrip_keeps_every_cell_and_hints_render_after() -> None:
    cells = [
        put(b"\x00row", b"name", "\u00e9t\u00e9".encode(), 3),
        put(b"\x00row", b"n", (42).to_bytes(8, "big"), 3),
        Cell(b"\x00row", b"cf", b"old", 2, CellType.DELETE_COLUMN),
    ]
    param, block = make_call([("ns:t", 11, cells)])
    (event,) = row_changes(decode_replicate_call(param, block).entries[0], "prod")
    data = encode(event, ValueHints({"cf:name": "utf8", "cf:n": "long"}))
    doc = json.loads(data)
    assert doc["after"] == {"cf:name": "\u00e9t\u00e9", "cf:n": 42}
    assert doc["source"]["pos"] == [11, 0] and doc["op"] == "u"
    assert [c["type"] for c in doc["cells"]] == ["Put", "Put", "DeleteColumn"]
    back = decode(data)
    assert back.key == event.key and back.cells == event.cells and back.source == event.source


def test_a_value_without_hint_is_encoded_once() -> None:
    """`after` leaves out what would only repeat the base64 of `cells` (a 6 MB cell made a 16 MB record)."""
    value = os.urandom(600_000)
    param, block = make_call([("t", 5, [put(b"r", b"big", value), put(b"r", b"name", b"x")])])
    (event,) = row_changes(decode_replicate_call(param, block).entries[0], "s")
    data = encode(event, ValueHints({"cf:name": "utf8"}))
    assert len(data) < len(value) * 4 / 3 + 2000
    doc = json.loads(data)
    assert doc["after"] == {"cf:name": "x"}
    assert base64.b64decode(doc["cells"][0]["value"]) == value
    assert decode(data).cells == event.cells
    doubled = json.loads(encode(event, ValueHints({"cf:name": "utf8"}), after_base64=True))
    assert doubled["after"] == {"cf:big": doc["cells"][0]["value"], "cf:name": "x"}


def test_encoded_events_satisfy_the_committed_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    param, block = make_call([("t", 1, [put(b"r", b"q", b"v")])])
    (event,) = row_changes(decode_replicate_call(param, block).entries[0], "s")
    doc = to_dict(event)
    assert set(schema["required"]) <= set(doc)
    assert set(schema["properties"]["source"]["required"]) <= set(doc["source"])
    assert doc["schema"] == schema["properties"]["schema"]["const"]


@settings(max_examples=500)
@given(st.binary(max_size=200))
def test_decode_garbage_only_raises_malformed_event(data: bytes) -> None:
    try:
        decode(data)
    except MalformedEvent:
        pass


@settings(max_examples=300)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    )
)
def test_decode_arbitrary_json_only_raises_malformed_event(doc: object) -> None:
    try:
        decode(json.dumps(doc).encode())
    except MalformedEvent:
        pass


def test_after_holds_the_newest_visible_version_of_each_column() -> None:
    """Several puts of a column in one change: `after` is what HBase shows after it
    (newest timestamp; the later in the WAL on a tie; a delete of the same change masks), not the
    last put in WAL order."""
    hints = ValueHints({"cf:*": "utf8"})
    cells = [
        put(b"r", b"a", b"newest", 9), put(b"r", b"a", b"older", 4),  # WAL order is not time order
        put(b"r", b"b", b"first", 5), put(b"r", b"b", b"second", 5),  # a tie: the later write wins
        put(b"r", b"c", b"v7", 7), put(b"r", b"c", b"v3", 3),
        Cell(b"r", b"cf", b"c", 7, CellType.DELETE),  # deletes version 7: version 3 shows
        put(b"r", b"d", b"gone", 2), Cell(b"r", b"cf", b"d", 2, CellType.DELETE_COLUMN),
    ]  # fmt: skip
    param, block = make_call([("t", 7, cells)])
    (event,) = row_changes(decode_replicate_call(param, block).entries[0], "s")
    assert json.loads(encode(event, hints))["after"] == {"cf:a": "newest", "cf:b": "second", "cf:c": "v3"}


def test_after_keys_spell_bytes_one_way() -> None:
    """The qualifier byte 0xFF and the characters "\\xff" are two keys."""
    cells = [put(b"r", b"\xff", b"byte"), put(b"r", b"\\xff", b"text"), put(b"r", b"\x00", b"nul")]
    param, block = make_call([("t", 7, cells)])
    (event,) = row_changes(decode_replicate_call(param, block).entries[0], "s")
    after = json.loads(encode(event, ValueHints({"*": "utf8"})))["after"]
    assert after == {"cf:\\xFF": "byte", "cf:\\x5Cxff": "text", "cf:\\x00": "nul"}


_cells = st.lists(
    st.builds(
        Cell,
        row=st.just(b"r"),
        family=st.binary(min_size=1, max_size=4),
        qualifier=st.binary(max_size=6),
        timestamp=st.integers(0, 2**63 - 1),
        type=st.sampled_from(list(CellType)),
        value=st.binary(max_size=40),
        tags=st.binary(max_size=6),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=300)
@given(_cells, st.booleans())
def test_the_encoded_record_is_the_event_as_to_dict_spells_it_byte_for_byte(cells: list[Cell], after_b64: bool) -> None:
    """`encode` writes the cells as a pre-built fragment (the capture's hot path): it must be exactly what
    serializing `to_dict` gives, for any bytes, cell types and tags, with and without an `after` view."""
    from unittest import mock

    import orjson

    event = next(row_changes(decode_replicate_call(*make_call([("ns:t", 7, cells)])).entries[0], "s"))
    hints = ValueHints({"*:a*": "utf8"})
    with mock.patch("cdcflow.events.json_codec.time.time", return_value=1_700_000_000.5):
        assert encode(event, hints, after_base64=after_b64) == orjson.dumps(
            to_dict(event, hints, after_base64=after_b64)
        )
    assert decode(encode(event)).cells == tuple(cells)
