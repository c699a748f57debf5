"""What an HBase 3.0 replication source asks of its peer cluster before it replicates, answered for the peer
(sans-I/O: request bytes in, a response message out).

HBase 3.0's `HBaseReplicationEndpoint` (HBASE-28521) no longer reads the peer's `rs` znodes: it connects to the
peer cluster through a connection registry (ZooKeeper for a `quorum:port:/parent` cluster key, which reads
`<parent>/hbaseid` and `<parent>/master`; `ClientMetaService` on bootstrap nodes for an `hbase+rpc://` key),
then asks the active master `GetClusterStatus` (CLUSTER_ID: the peer's id; SERVERS_NAME: its sinks) and
`ListDecommissionedRegionServers` (removed from the sinks), and finally calls `AdminService.ReplicateWALEntry`
on the sinks, as 2.x sources do. The cdcflow instances registered for a peer are its "region servers"; the
one holding `<parent>/master` is its active master; every instance answers these calls the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import Message

from cdcflow.protocols.hbase.framing import parse_message
from cdcflow.protocols.hbase.pb import hbase_types_pb2, master_pb2, registry_pb2

MASTER_SERVICE = "MasterService"
CLIENT_META_SERVICE = "ClientMetaService"
SERVICES = (MASTER_SERVICE, CLIENT_META_SERVICE)


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int
    start_code: int

    def pb(self) -> hbase_types_pb2.ServerName:
        return hbase_types_pb2.ServerName(host_name=self.host, port=self.port, start_code=self.start_code)

    @classmethod
    def parse(cls, name: str) -> ServerAddress:
        """`host,port,startcode`, as HBase names region server znodes."""
        host, port, start_code = name.rsplit(",", 2)
        return cls(host, int(port), int(start_code))


@dataclass(frozen=True)
class PeerCluster:
    """The peer cluster as its calls describe it."""

    cluster_id: str
    master: ServerAddress | None  # the instance holding <parent>/master
    servers: tuple[ServerAddress, ...]  # every registered instance


class UnsupportedCall(Exception):
    """A method of these services the peer does not serve."""


def _cluster_status(param: bytes, cluster: PeerCluster) -> Message:
    options = set(parse_message(master_pb2.GetClusterStatusRequest, param).options)
    everything = not options  # HBase's master: no option asked, everything given
    status = master_pb2.ClusterStatus()
    if everything or master_pb2.CLUSTER_ID in options:
        status.cluster_id.cluster_id = cluster.cluster_id
    if (everything or master_pb2.MASTER in options) and cluster.master is not None:
        status.master.CopyFrom(cluster.master.pb())
    if everything or master_pb2.LIVE_SERVERS in options:
        for server in cluster.servers:
            status.live_servers.add(server=server.pb(), server_load=master_pb2.ServerLoad())
    if everything or master_pb2.SERVERS_NAME in options:
        status.servers_name.extend(server.pb() for server in cluster.servers)
    return master_pb2.GetClusterStatusResponse(cluster_status=status)


def _decommissioned(param: bytes, _cluster: PeerCluster) -> Message:
    parse_message(master_pb2.ListDecommissionedRegionServersRequest, param)
    return master_pb2.ListDecommissionedRegionServersResponse()  # cdcflow instances are never decommissioned


def _master_running(param: bytes, _cluster: PeerCluster) -> Message:
    parse_message(master_pb2.IsMasterRunningRequest, param)
    return master_pb2.IsMasterRunningResponse(is_master_running=True)


def _cluster_id(param: bytes, cluster: PeerCluster) -> Message:
    parse_message(registry_pb2.GetClusterIdRequest, param)
    return registry_pb2.GetClusterIdResponse(cluster_id=cluster.cluster_id)


def _active_master(param: bytes, cluster: PeerCluster) -> Message:
    parse_message(registry_pb2.GetActiveMasterRequest, param)
    response = registry_pb2.GetActiveMasterResponse()
    if cluster.master is not None:
        response.server_name.CopyFrom(cluster.master.pb())
    return response


def _masters(param: bytes, cluster: PeerCluster) -> Message:
    parse_message(registry_pb2.GetMastersRequest, param)
    response = registry_pb2.GetMastersResponse()
    if cluster.master is not None:
        response.master_servers.add(server_name=cluster.master.pb(), is_active=True)
    return response


def _meta_locations(param: bytes, _cluster: PeerCluster) -> Message:
    parse_message(registry_pb2.GetMetaRegionLocationsRequest, param)
    return registry_pb2.GetMetaRegionLocationsResponse()  # no tables, no hbase:meta: a replication sink only


def _bootstrap_nodes(param: bytes, cluster: PeerCluster) -> Message:
    parse_message(registry_pb2.GetBootstrapNodesRequest, param)
    return registry_pb2.GetBootstrapNodesResponse(server_name=[server.pb() for server in cluster.servers])


_ANSWERS: dict[tuple[str, str], Callable[[bytes, PeerCluster], Message]] = {
    (MASTER_SERVICE, "GetClusterStatus"): _cluster_status,
    (MASTER_SERVICE, "ListDecommissionedRegionServers"): _decommissioned,
    (MASTER_SERVICE, "IsMasterRunning"): _master_running,
    (CLIENT_META_SERVICE, "GetClusterId"): _cluster_id,
    (CLIENT_META_SERVICE, "GetActiveMaster"): _active_master,
    (CLIENT_META_SERVICE, "GetMasters"): _masters,
    (CLIENT_META_SERVICE, "GetMetaRegionLocations"): _meta_locations,
    (CLIENT_META_SERVICE, "GetBootstrapNodes"): _bootstrap_nodes,
}


def serves(service: str, method: str) -> bool:
    return (service, method) in _ANSWERS


def answer(service: str, method: str, param: bytes, cluster: PeerCluster) -> Message:
    """The response to one call; WireProtocolError for a request that does not parse, UnsupportedCall for a
    method the peer does not serve."""
    handler = _ANSWERS.get((service, method))
    if handler is None:
        raise UnsupportedCall(f"cdcflow serves {service} only for replication sources, not {method}")
    return handler(param, cluster)
