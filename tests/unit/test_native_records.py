"""The compiled hot path (cdcflow._native, native/src/lib.rs) against the Python path it stands in for.

Both run through ReplicationHandler.to_records on the same calls: the records (topic, key, JSON bytes)
and the call's figures must be identical. Calls are generated: several entries, tables routed,
dropped or skipped by time, rows of several cells, every cell type, tags, METAFAMILY markers.
"""

from __future__ import annotations

import uuid
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.config.model import RouteConfig
from cdcflow.errors import WireProtocolError
from cdcflow.events.cells import Cell, CellType
from cdcflow.protocols.hbase.cellblock import encode_cells
from cdcflow.protocols.hbase.pb import wal_pb2
from cdcflow.sources.hbase import native_records
from cdcflow.sources.hbase.changes import BulkLoadNotSupported
from cdcflow.sources.hbase.peer.handler import CallStats, ReplicationHandler, TopicLimits
from cdcflow.sources.hbase.routing import Router

pytestmark = pytest.mark.unit

ROUTES = (
    RouteConfig(table="ns:dropped", drop=True),
    RouteConfig(table="ns:filtered", columns=("cf:a*",)),
    RouteConfig(table="ns:hinted", values={"cf:*": "utf8"}),
)


def handler(native: bool, routes: tuple[RouteConfig, ...] = ()) -> ReplicationHandler:
    topics = TopicLimits("unused:9092", 8 << 20)
    return ReplicationHandler(None, Router(routes, "p"), "src", 1_000, topics=topics, native=native)  # type: ignore[arg-type]


def make_call(entries: list[tuple[str, int, int, list[Cell], int]]) -> tuple[bytes, bytes]:
    req = wal_pb2.ReplicateWALEntryRequest()
    cells: list[Cell] = []
    for table, seq, write_ms, entry_cells, clusters in entries:
        e = req.entry.add(associated_cell_count=len(entry_cells))
        e.key.encoded_region_name = b"%032x" % seq
        e.key.table_name = table.encode()
        e.key.log_sequence_number = seq
        e.key.write_time = write_ms
        for i in range(clusters):
            cid = e.key.cluster_ids.add()
            u = uuid.UUID(int=(seq * 7919 + i) % 2**128)
            cid.most_sig_bits, cid.least_sig_bits = u.int >> 64, u.int & (2**64 - 1)
        cells.extend(entry_cells)
    return req.SerializeToString(), encode_cells(cells)


def outcome(h: ReplicationHandler, param: bytes, block: bytes) -> object:
    stats = CallStats()
    try:
        with mock.patch("time.time", return_value=1_700_000_000.25):
            decoded = h.to_records(param, block, stats)
    except (WireProtocolError, BulkLoadNotSupported) as exc:
        return type(exc), str(exc)
    return [tuple(r) for r in decoded.records], sorted(decoded.large), stats


_cell = st.builds(
    Cell,
    row=st.sampled_from([b"r1", b"r2", b"\x00\xff", b""]),
    family=st.sampled_from([b"cf", b"cf", b"METAFAMILY", b"\x01"]),
    qualifier=st.sampled_from([b"a", b"b1", b"", b"\x80q", b"HBASE::FLUSH"]),
    timestamp=st.integers(-(2**63), 2**63 - 1),
    type=st.sampled_from(list(CellType)),
    value=st.binary(max_size=30),
    tags=st.sampled_from([b"", b"", b"\x00\x03\x01ab"]),
)
_entry = st.tuples(
    st.sampled_from(["t", "ns:t", "ns:dropped", "ns:filtered", "ns:hinted", "other:x-y.z"]),
    st.integers(0, 2**63 - 1),
    st.sampled_from([0, 999, 1_000, 1_700_000_000_000]),
    st.lists(_cell, max_size=8),
    st.integers(0, 2),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_entry, max_size=5), st.booleans())
def test_native_records_equal_the_python_path(
    entries: list[tuple[str, int, int, list[Cell], int]], routed: bool
) -> None:
    param, block = make_call(entries)
    routes = ROUTES if routed else ()
    assert outcome(handler(True, routes), param, block) == outcome(handler(False, routes), param, block)


@settings(max_examples=300, deadline=None)
@given(st.lists(_entry, min_size=1, max_size=3), st.data())
def test_a_damaged_block_gives_the_python_paths_error(entries: list[tuple[str, int, int, list[Cell], int]],
                                                     data: st.DataObject) -> None:  # fmt: skip
    param, block = make_call(entries)
    if not block:
        return
    at = data.draw(st.integers(0, len(block) - 1))
    damaged = block[:at] + bytes([block[at] ^ data.draw(st.integers(1, 255))]) + block[at + 1 :]
    cut = block[: data.draw(st.integers(0, len(block) - 1))]
    for b in (damaged, cut, block + block[:13]):
        assert outcome(handler(True), param, b) == outcome(handler(False), param, b)


def test_the_common_call_is_served_by_the_native_path_and_the_others_by_python() -> None:
    """Whole rows of a routed table: native. A column filter, hints or a bulk-load marker: Python."""
    rows = [Cell(b"r%d" % i, b"cf", b"a", 5, CellType.PUT, b"v" * 10) for i in range(3)]
    common = make_call([("ns:t", 1, 2_000, rows, 1)])
    filtered = make_call([("ns:filtered", 1, 2_000, rows, 1)])
    bulk = make_call([("ns:t", 1, 2_000, [Cell(b"r", b"METAFAMILY", b"HBASE::BULK_LOAD", 1, CellType.PUT)], 1)])
    h = handler(True, ROUTES)
    assert native_records.AVAILABLE, "cdcflow._native is not built: run `make install`"
    decoded = h.to_records(*common, CallStats())
    assert len(decoded.records) == 3 and decoded.path == "native"
    assert (h.native_calls, h.python_calls) == (1, 0)
    assert h.to_records(*filtered, CallStats()).path == "python"
    assert (h.native_calls, h.python_calls) == (1, 1)
    with pytest.raises(BulkLoadNotSupported):
        h.to_records(*bulk, CallStats())
    assert (h.native_calls, h.python_calls) == (1, 2)


def test_a_record_large_enough_to_split_goes_through_the_python_path() -> None:
    big = make_call([("ns:t", 1, 2_000, [Cell(b"r", b"cf", b"a", 5, CellType.PUT, b"x" * 200_000)], 1)])
    h = handler(True)
    decoded = h.to_records(*big, CallStats())
    assert (h.native_calls, h.python_calls) == (0, 1) and list(decoded.large) == [0]
