"""HBase → cdcflow peer → Kafka, against the real HBase 2.6 and Kafka of the stack.

The table is rebuilt from the Kafka events into a second HBase table and compared with the
source cell by cell, timestamps included.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import pytest

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import Append, ColumnFamily, Delete, Increment, Put
from cdcflow.clients.kafka import TopicReader

from .hbase_capture import PeerSetup, Rebuilder, scan_cells

FAMILIES = [ColumnFamily("cf", max_versions=1000), ColumnFamily("cg", max_versions=1000)]
SPLITS = [bytes([b]) for b in range(0x20, 0x100, 0x20)]  # 8 regions


def workload(client: HBaseClient, table: str, rng: random.Random) -> None:
    """Puts with many columns, binary keys and values, a 5 MB value, increments, appends,
    every delete type, and multi-row batches, spread over 8 regions."""
    rows = [bytes([rng.randrange(256)]) + rng.randbytes(rng.randrange(1, 12)) for _ in range(60)]
    for i, row in enumerate(rows[:20]):
        p = Put(row)
        for q in range(25):
            p.add(b"cf" if q % 2 else b"cg", b"q%02d" % q, rng.randbytes(rng.randrange(0, 64)), 1000 + i)
        client.mutate(table, p)
    client.mutate(table, Put(b"\x90big").add(b"cf", b"blob", rng.randbytes(5 * 1024 * 1024), 5000))
    # multi-row batches: one WAL entry per region holding many rows
    client.mutate_batch(table, [Put(r).add(b"cf", b"batch", b"b%d" % i, 2000) for i, r in enumerate(rows[20:])])
    client.mutate_batch(table, [Put(r).add(b"cg", b"batch", b"again", 2001) for r in rows[20:40]])
    for _ in range(5):
        client.mutate(table, Increment(b"\x10counter").add(b"cf", b"n", rng.randrange(-5, 10)))
        client.mutate(table, Append(b"\xf0log").add(b"cg", b"s", rng.randbytes(3)))
    # versions, then every delete type
    for ts in (3000, 3001, 3002):
        client.mutate(table, Put(rows[0]).add(b"cf", b"v", b"%d" % ts, ts).add(b"cg", b"v", b"%d" % ts, ts))
    client.mutate(table, Delete(rows[0]).column_version(b"cf", b"v", 3001))  # Delete (one version)
    client.mutate(table, Delete(rows[1]).column(b"cf", b"q01", 5000))  # DeleteColumn
    client.mutate(table, Delete(rows[2]).family(b"cg", 5000))  # DeleteFamily
    client.mutate(table, Delete(rows[0]).family_version(b"cg", 3002))  # DeleteFamilyVersion
    client.mutate(table, Delete(rows[3]))  # whole row: one DeleteFamily per family
    client.mutate(table, Delete(rows[4], timestamp=1003))  # whole row up to a timestamp
    client.mutate_batch(table, [Delete(r).column(b"cf", b"batch") for r in rows[40:45]])
    # a put after a delete marker at a lower timestamp must stay hidden in the copy too
    client.mutate(table, Put(rows[2]).add(b"cg", b"late", b"hidden", 10))


def test_rebuilt_table_equals_source_cell_by_cell(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    source, target = f"{peer_setup.name}_src", f"{peer_setup.name}_copy"
    hbase_client.create_table(source, FAMILIES, split_keys=SPLITS)
    hbase_client.create_table(target, FAMILIES, split_keys=SPLITS)
    peer_setup.add_peer(source)
    peer_setup.start()
    workload(hbase_client, source, random.Random(42))

    rebuild = Rebuilder(hbase_client, kafka["bootstrap_servers"], f"{peer_setup.name}.default.{source}", target)
    try:
        cells = rebuild.until_equal(source)
        rebuild.assert_row_order()
        assert len(cells) > 500
        assert any(len(c[4]) == 5 * 1024 * 1024 for c in cells)
        types = {c["type"] for r in rebuild.records for c in json.loads(r.value or b"{}")["cells"]}
        assert types == {"Put", "Delete", "DeleteColumn", "DeleteFamily", "DeleteFamilyVersion"}
        print(f"{len(rebuild.records)} events, {rebuild.duplicates()} duplicates, {len(cells)} cells match")
    finally:
        rebuild.close()


def test_target_copy_matches_after_peer_replays(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    """Events are harmless to apply twice: replaying the whole topic into the copy changes nothing."""
    source, target = f"{peer_setup.name}_src", f"{peer_setup.name}_copy"
    hbase_client.create_table(source, FAMILIES)
    hbase_client.create_table(target, FAMILIES)
    peer_setup.add_peer(source)
    peer_setup.start()
    rng = random.Random(7)
    for i in range(50):
        hbase_client.mutate(source, Put(b"r%d" % (i % 10)).add(b"cf", b"c", rng.randbytes(8), 100 + i))
        if i % 7 == 0:
            hbase_client.mutate(source, Delete(b"r%d" % (i % 10)).column(b"cf", b"c", 100 + i - 3))
    topic = f"{peer_setup.name}.default.{source}"
    first = Rebuilder(hbase_client, kafka["bootstrap_servers"], topic, target)
    expected = first.until_equal(source)
    first.close()
    again = Rebuilder(hbase_client, kafka["bootstrap_servers"], topic, target)
    while again.pump():
        pass
    again.close()
    assert scan_cells(hbase_client, target) == expected == scan_cells(hbase_client, source)


@pytest.mark.parametrize("skip", [True, False])
def test_edits_older_than_the_peer_can_be_skipped(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], skip: bool
) -> None:
    """A new peer replays its region server's whole current WAL; with the option, older edits are dropped."""
    source = f"{peer_setup.name}_src"
    hbase_client.create_table(source, FAMILIES)
    hbase_client.mutate_batch(source, [Put(b"old%d" % i).add(b"cf", b"c", b"x") for i in range(10)])
    peer_setup.write_config(skip_edits_before_peer_creation=skip)
    time.sleep(0.05)  # the creation time recorded by `peer add` is after every old write
    peer_setup.add_peer(source)
    peer_setup.start()
    hbase_client.mutate_batch(source, [Put(b"new%d" % i).add(b"cf", b"c", b"y") for i in range(10)])
    reader = TopicReader(kafka["bootstrap_servers"], [f"{peer_setup.name}.default.{source}"])
    keys: set[bytes | None] = set()
    deadline = time.monotonic() + 120
    try:
        while len([k for k in keys if k and k.startswith(b"new")]) < 10 and time.monotonic() < deadline:
            keys.update(r.key for r in reader.poll(1.0))
    finally:
        reader.close()
    # WAL order: the old edits are shipped before the new ones.
    new = {b"new%d" % i for i in range(10)}
    old = {b"old%d" % i for i in range(10)}
    assert {k for k in keys if k} == (new if skip else new | old)
