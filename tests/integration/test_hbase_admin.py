"""Replication administration over MasterService RPC, against the real HBase of the stack."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cdcflow.clients.hbase import NativeHBaseClient, admin
from cdcflow.clients.hbase.model import ColumnFamily
from cdcflow.dev.testing import unique_name
from cdcflow.errors import ConfigError
from cdcflow.sources.hbase.peer.registry import PeerRegistry


@pytest.fixture
def client(hbase: dict[str, Any]) -> Iterator[NativeHBaseClient]:
    c = NativeHBaseClient(hbase["zk_quorum"])
    yield c
    c.close()


def test_set_replication_scope_keeps_other_attributes(client: NativeHBaseClient) -> None:
    table = unique_name("it_scope")
    client.create_table(
        table, [ColumnFamily("cf", max_versions=7, replication_scope=0), ColumnFamily("cg", replication_scope=0)]
    )
    try:
        admin.set_replication_scope(client, table, ["cf"])
        attrs = client.family_attributes(table)
        assert attrs["cf"]["REPLICATION_SCOPE"] == "1" and attrs["cf"]["VERSIONS"] == "7"
        assert attrs["cg"]["REPLICATION_SCOPE"] == "0"
        with pytest.raises(ConfigError, match="no column families"):
            admin.set_replication_scope(client, table, ["nope"])
    finally:
        client.delete_table(table)


def test_peer_lifecycle(client: NativeHBaseClient, hbase: dict[str, Any]) -> None:
    peer_id = f"it{uuid.uuid4().hex[:10]}"
    parent = f"/{peer_id}"
    reg = PeerRegistry(hbase["zk_quorum"], parent)
    cluster = reg.prepare(1234)
    assert reg.cluster_id() == cluster  # stable across reads (and restarts)
    assert reg.created_ms() == 1234
    reg.close()
    key = admin.cluster_key(hbase["zk_quorum"], parent)
    admin.add_peer(client, peer_id, key, table_cfs={"ns_absent:t1": ["cf"]}, config={"replication.source.ratio": "1.0"})
    try:
        (info,) = [p for p in admin.list_peers(client) if p.peer_id == peer_id]
        assert info.enabled and info.serial and info.cluster_key == key and not info.replicate_all
        assert info.table_cfs == {"ns_absent:t1": ["cf"]}
        assert info.config["replication.source.ratio"] == "1.0"
        admin.disable_peer(client, peer_id)
        assert not next(p for p in admin.list_peers(client) if p.peer_id == peer_id).enabled
        admin.enable_peer(client, peer_id)
        assert next(p for p in admin.list_peers(client) if p.peer_id == peer_id).enabled
    finally:
        admin.remove_peer(client, peer_id)
    assert all(p.peer_id != peer_id for p in admin.list_peers(client))


def test_invalid_peer_id_is_refused_before_calling_hbase(client: NativeHBaseClient) -> None:
    with pytest.raises(ConfigError, match="'-'"):
        admin.add_peer(client, "bad-id", "127.0.0.1:2181:/x")
