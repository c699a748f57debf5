"""The master-side calls an HBase 3.0 replication source makes before it replicates, answered for the
peer (sans-I/O), and the `<parent>/master` znode. The peer's server taking them on real sockets:
tests/unit/test_peer_server.py."""

from __future__ import annotations

import pytest

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import cluster_calls, znode
from cdcflow.protocols.hbase.cluster_calls import PeerCluster, ServerAddress, UnsupportedCall, answer
from cdcflow.protocols.hbase.pb import master_pb2, registry_pb2

pytestmark = pytest.mark.unit

A, B = ServerAddress("10.0.0.1", 16020, 1_700_000_000_001), ServerAddress("10.0.0.2", 16021, 1_700_000_000_002)
CLUSTER = PeerCluster("5b1e4b1e-8a9c-4a8e-9d6e-2f1c3b4a5d6e", A, (A, B))


def names(servers: object) -> list[tuple[str, int, int]]:
    return [(s.host_name, s.port, s.start_code) for s in servers]  # type: ignore[attr-defined]


def status(*options: int) -> master_pb2.ClusterStatus:
    request = master_pb2.GetClusterStatusRequest(options=list(options)).SerializeToString()
    response = answer("MasterService", "GetClusterStatus", request, CLUSTER)
    assert isinstance(response, master_pb2.GetClusterStatusResponse)
    return response.cluster_status


def test_cluster_status_gives_what_each_option_asks() -> None:
    only_id = status(master_pb2.CLUSTER_ID)  # 3.0's peer id lookup
    assert only_id.cluster_id.cluster_id == CLUSTER.cluster_id
    assert not only_id.servers_name and not only_id.live_servers and not only_id.HasField("master")
    sinks = status(master_pb2.SERVERS_NAME)  # 3.0's getRegionServers(true)
    assert names(sinks.servers_name) == [("10.0.0.1", 16020, A.start_code), ("10.0.0.2", 16021, B.start_code)]
    assert not sinks.HasField("cluster_id")
    everything = status()  # no option: everything, as HBase's master
    assert everything.cluster_id.cluster_id == CLUSTER.cluster_id and names([everything.master]) == names([A.pb()])
    assert names(s.server for s in everything.live_servers) == names(everything.servers_name)


def test_registry_calls_and_decommissioned_servers() -> None:
    def ask(service: str, method: str, request: object) -> object:
        return answer(service, method, request.SerializeToString(), CLUSTER)  # type: ignore[attr-defined]

    assert ask("ClientMetaService", "GetClusterId", registry_pb2.GetClusterIdRequest()).cluster_id == CLUSTER.cluster_id  # type: ignore[attr-defined]
    assert names([ask("ClientMetaService", "GetActiveMaster", registry_pb2.GetActiveMasterRequest()).server_name]) \
        == names([A.pb()])  # type: ignore[attr-defined]  # fmt: skip
    assert names(ask("ClientMetaService", "GetBootstrapNodes", registry_pb2.GetBootstrapNodesRequest()).server_name) \
        == names([A.pb(), B.pb()])  # type: ignore[attr-defined]  # fmt: skip
    assert not ask("ClientMetaService", "GetMetaRegionLocations",
                   registry_pb2.GetMetaRegionLocationsRequest()).meta_locations  # type: ignore[attr-defined]  # fmt: skip
    assert not ask("MasterService", "ListDecommissionedRegionServers",
                   master_pb2.ListDecommissionedRegionServersRequest()).server_name  # type: ignore[attr-defined]  # fmt: skip
    no_master = PeerCluster(CLUSTER.cluster_id, None, ())
    response = answer("ClientMetaService", "GetActiveMaster", b"", no_master)
    assert isinstance(response, registry_pb2.GetActiveMasterResponse) and not response.HasField("server_name")


def test_garbage_and_unknown_methods_are_refused() -> None:
    with pytest.raises(WireProtocolError):
        answer("MasterService", "GetClusterStatus", b"\xff\xff\xff", CLUSTER)
    with pytest.raises(UnsupportedCall, match="CreateTable"):
        answer("MasterService", "CreateTable", b"", CLUSTER)
    assert not cluster_calls.serves("AdminService", "GetClusterStatus")


def test_the_master_znode_names_the_instance_as_hbase_writes_it() -> None:
    data = znode.master_record("10.0.0.1", 16020, 42)
    assert data[0] == 0xFF and znode.protobuf_payload(data)  # metadata header, then PBUF
    assert znode.master_address(data) == ("10.0.0.1", 16020, 42)
    assert ServerAddress.parse("host-1.example,16020,42") == ServerAddress("host-1.example", 16020, 42)
