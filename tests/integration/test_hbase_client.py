"""The native HBase client against the real HBase 2.6 of the stack: DDL, timestamps, every delete type."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import Append, ColumnFamily, Delete, Increment, Put
from cdcflow.dev.testing import unique_name
from cdcflow.errors import HBaseTerminalError
from cdcflow.events.cells import CellType


@pytest.fixture
def client(hbase_client: HBaseClient) -> HBaseClient:
    return hbase_client


@pytest.fixture
def table(client: HBaseClient) -> Iterator[str]:
    name = unique_name("it_hb")
    # Two regions, so scans and mutations have to locate the right one.
    client.create_table(name, [ColumnFamily("cf", max_versions=10), ColumnFamily("cg", max_versions=10)],
                        split_keys=[b"m"])  # fmt: skip
    yield name
    client.delete_table(name)


def cells(client: HBaseClient, table: str) -> set[tuple[bytes, bytes, bytes, int, bytes]]:
    out = set()
    for c in client.scan(table, max_versions=10):
        assert c.type is CellType.PUT  # a normal scan never shows delete markers
        out.add((c.row, c.family, c.qualifier, c.timestamp, c.value))
    return out


def put(client: HBaseClient, table: str, row: bytes, *items: tuple[bytes, bytes, int]) -> None:
    p = Put(row)
    for fam_qual, value, ts in items:
        fam, qual = fam_qual.split(b":")
        p.add(fam, qual, value, ts)
    client.mutate(table, p)


def test_create_table_sets_replication_scope(client: HBaseClient, table: str) -> None:
    attrs = client.family_attributes(table)
    assert set(attrs) == {"cf", "cg"}
    assert attrs["cf"]["REPLICATION_SCOPE"] == "1"
    assert attrs["cg"]["REPLICATION_SCOPE"] == "1"
    assert attrs["cf"]["VERSIONS"] == "10"
    assert table in client.list_tables()


def test_explicit_timestamps_and_every_delete_type(client: HBaseClient, table: str) -> None:
    binary_row = b"\x00\xff\x10bin"
    put(client, table, binary_row, (b"cf:a", b"\x00v1\xff", 10), (b"cf:a", b"v2", 20), (b"cf:b", b"b", 15))
    # column, one version (HBase Delete.addColumn)
    put(client, table, b"one-version", (b"cf:a", b"x", 10), (b"cf:a", b"y", 20), (b"cf:a", b"z", 30))
    client.mutate(table, Delete(b"one-version").column_version(b"cf", b"a", 20))
    # column, all versions <= ts (Delete.addColumns)
    put(
        client,
        table,
        b"column",
        (b"cf:a", b"x", 10),
        (b"cf:a", b"y", 20),
        (b"cf:a", b"z", 30),
        (b"cf:b", b"k", 10),
    )
    client.mutate(table, Delete(b"column").column(b"cf", b"a", 20))
    # family, all columns <= ts (Delete.addFamily)
    put(
        client,
        table,
        b"family",
        (b"cf:a", b"1", 10),
        (b"cf:b", b"2", 20),
        (b"cf:c", b"3", 30),
        (b"cg:x", b"4", 10),
    )
    client.mutate(table, Delete(b"family").family(b"cf", 20))
    # family version: every column of the family at exactly ts (Delete.addFamilyVersion)
    put(client, table, b"family-version", (b"cf:a", b"1", 10), (b"cf:b", b"2", 10), (b"cf:a", b"3", 20),
        (b"cg:x", b"4", 10))  # fmt: skip
    client.mutate(table, Delete(b"family-version").family_version(b"cf", 10))
    # whole row, all timestamps; and whole row up to a timestamp
    put(client, table, b"row", (b"cf:a", b"1", 10), (b"cg:b", b"2", 20))
    client.mutate(table, Delete(b"row"))
    put(client, table, b"row-ts", (b"cf:a", b"1", 10), (b"cf:a", b"2", 30), (b"cg:b", b"3", 20))
    client.mutate(table, Delete(b"row-ts", timestamp=20))
    # a row in the second region
    put(client, table, b"zz-second-region", (b"cg:q", b"far", 5))

    assert cells(client, table) == {
        (binary_row, b"cf", b"a", 10, b"\x00v1\xff"),
        (binary_row, b"cf", b"a", 20, b"v2"),
        (binary_row, b"cf", b"b", 15, b"b"),
        (b"one-version", b"cf", b"a", 10, b"x"),
        (b"one-version", b"cf", b"a", 30, b"z"),
        (b"column", b"cf", b"a", 30, b"z"),
        (b"column", b"cf", b"b", 10, b"k"),
        (b"family", b"cf", b"c", 30, b"3"),
        (b"family", b"cg", b"x", 10, b"4"),
        (b"family-version", b"cf", b"a", 20, b"3"),
        (b"family-version", b"cg", b"x", 10, b"4"),
        (b"row-ts", b"cf", b"a", 30, b"2"),
        (b"zz-second-region", b"cg", b"q", 5, b"far"),
    }


def test_scan_returns_rows_in_key_order_across_regions(client: HBaseClient, table: str) -> None:
    rows = [bytes([b]) + b"-row" for b in range(0, 256, 7)]
    for i, row in enumerate(rows):
        put(client, table, row, (b"cf:n", str(i).encode(), 1000 + i))
    scanned = [c.row for c in client.scan(table)]
    assert scanned == sorted(rows)
    assert [c.row for c in client.scan(table, start_row=b"\x10", stop_row=b"\x80")] == sorted(
        r for r in rows if b"\x10" <= r < b"\x80"
    )


def test_increment_and_append_return_new_values(client: HBaseClient, table: str) -> None:
    client.mutate(table, Increment(b"counter").add(b"cf", b"n", 5))
    result = client.mutate(table, Increment(b"counter").add(b"cf", b"n", -2))
    assert int.from_bytes(result[0].value, "big", signed=True) == 3
    client.mutate(table, Append(b"log").add(b"cf", b"s", b"ab"))
    result = client.mutate(table, Append(b"log").add(b"cf", b"s", b"cd"))
    assert result[0].value == b"abcd"


def test_unknown_table_is_a_terminal_error(client: HBaseClient) -> None:
    with pytest.raises(HBaseTerminalError):
        client.family_attributes(unique_name("it_missing"))


def test_snapshot_clone_and_raw_row_scans(client: HBaseClient, table: str) -> None:
    """What the backfill reads: a flush snapshot cloned into a table, scanned raw (delete markers and all)."""
    from cdcflow.clients.hbase import NativeHBaseClient

    assert isinstance(client, NativeHBaseClient)
    put(client, table, b"a", (b"cf:x", b"1", 10), (b"cf:y", b"2", 11))
    put(client, table, b"z", (b"cg:x", b"3", 12))
    client.mutate(table, Delete(b"a").column(b"cf", b"y", 20))
    client.mutate(table, Delete(b"z").family(b"cf", 30))  # a family marker on a row without cf cells
    before = [[(c.row, c.family, c.qualifier, c.timestamp, c.type) for c in row]
              for row in client.scan_rows(table, raw=True, max_versions=100)]  # fmt: skip
    assert (b"a", b"cf", b"y", 20, CellType.DELETE_COLUMN) in before[0]
    assert (b"z", b"cf", b"", 30, CellType.DELETE_FAMILY) in before[1]
    assert [[c.type for c in row] for row in client.scan_rows(table)] == [[CellType.PUT], [CellType.PUT]]

    snapshot, clone = unique_name("it_snap"), unique_name("it_clone")
    started_ms = int(time.time() * 1000)
    client.snapshot(table, snapshot)
    # the snapshot's flush drops puts a marker masks (cf:y@11), as any flush does: compare with the flushed table
    flushed = [[(c.row, c.family, c.qualifier, c.timestamp, c.type) for c in row]
               for row in client.scan_rows(table, raw=True, max_versions=100)]  # fmt: skip
    put(client, table, b"a", (b"cf:x", b"4", 99))  # after the snapshot: not in the clone
    assert started_ms - 60_000 <= client.list_snapshots()[snapshot] <= int(time.time() * 1000)
    client.clone_snapshot(snapshot, clone)
    try:
        assert [r.start_key for r in client.regions(clone)] == [b"", b"m"]
        cloned = [[(c.row, c.family, c.qualifier, c.timestamp, c.type) for c in row]
                  for row in client.scan_rows(clone, raw=True, max_versions=100)]  # fmt: skip
        assert cloned == flushed
        # a range within one region, and one starting after a row (how a resumed region goes on)
        assert [row[0].row for row in client.scan_rows(clone, start_row=b"m", stop_row=b"zz", raw=True)] == [b"z"]
    finally:
        client.delete_table(clone)
        client.delete_snapshot(snapshot)
    assert snapshot not in client.list_snapshots()
    assert client.cluster_id().version == 4
