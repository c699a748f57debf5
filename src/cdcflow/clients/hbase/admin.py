"""Replication administration over MasterService RPC (no HBase shell, no JRuby)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from cdcflow.clients.hbase.model import TableName
from cdcflow.clients.hbase.native import NativeHBaseClient, _table_pb
from cdcflow.errors import ConfigError
from cdcflow.protocols.hbase.pb import hbase_types_pb2, master_pb2, replication_pb2

ENABLED = replication_pb2.ReplicationState.ENABLED
DISABLED = replication_pb2.ReplicationState.DISABLED


@dataclass(frozen=True)
class PeerInfo:
    peer_id: str
    enabled: bool
    cluster_key: str
    serial: bool
    replicate_all: bool
    table_cfs: dict[str, list[str]]
    config: dict[str, str]


def rpc_cluster_key(servers: list[tuple[str, int]]) -> str:
    """An HBase 3.0 connection-URI cluster key naming bootstrap nodes: "hbase+rpc://host1:port1,host2:port2"."""
    if not servers:
        raise ConfigError("an hbase+rpc:// cluster key names the peer's instances: none is registered (start "
                          "`cdcflow hbase run` first)")  # fmt: skip
    return "hbase+rpc://" + ",".join(f"{host}:{port}" for host, port in servers)


def cluster_key(zk_quorum: str, znode_parent: str) -> str:
    """HBase CLUSTER_KEY: "host1,host2:port:/parent" from "host1:port,host2:port" and "/parent"."""
    hosts, ports = [], set()
    for part in zk_quorum.split(","):
        host, _, port = part.strip().rpartition(":")
        hosts.append(host or part)
        ports.add(port or "2181")
    if len(ports) != 1:
        raise ConfigError(f"ZooKeeper hosts must share one port for a cluster key: {zk_quorum}")
    return f"{','.join(hosts)}:{ports.pop()}:{znode_parent}"


def add_peer(
    client: NativeHBaseClient,
    peer_id: str,
    key: str,
    *,
    serial: bool = True,
    enabled: bool = True,
    table_cfs: Mapping[str, Sequence[str]] | None = None,
    config: Mapping[str, str] | None = None,
) -> None:
    """Add a replication peer. With `table_cfs` only those tables (families; [] = all) replicate."""
    if "-" in peer_id:
        raise ConfigError(f"HBase refuses peer ids with '-': {peer_id!r}")
    peer = replication_pb2.ReplicationPeer(clusterkey=key, serial=serial, replicate_all=not table_cfs)
    for table, families in (table_cfs or {}).items():
        tcf = peer.table_cfs.add(table_name=_table_pb(TableName.parse(table)))
        tcf.families.extend(f.encode() for f in families)
    for k, v in (config or {}).items():
        peer.configuration.add(name=k, value=v)
    req = replication_pb2.AddReplicationPeerRequest(
        peer_id=peer_id,
        peer_config=peer,
        peer_state=replication_pb2.ReplicationState(state=ENABLED if enabled else DISABLED),
    )
    res = client.master_call("AddReplicationPeer", req, replication_pb2.AddReplicationPeerResponse)
    client.wait_procedure(res.proc_id, f"add peer {peer_id}")


def _simple(
    client: NativeHBaseClient, method: str, req_cls: type[Message], res_cls: type[Message], peer_id: str
) -> None:
    res: Any = client.master_call(method, req_cls(peer_id=peer_id), res_cls)
    client.wait_procedure(res.proc_id, f"{method} {peer_id}")


def enable_peer(client: NativeHBaseClient, peer_id: str) -> None:
    _simple(client, "EnableReplicationPeer", replication_pb2.EnableReplicationPeerRequest,
            replication_pb2.EnableReplicationPeerResponse, peer_id)  # fmt: skip


def disable_peer(client: NativeHBaseClient, peer_id: str) -> None:
    _simple(client, "DisableReplicationPeer", replication_pb2.DisableReplicationPeerRequest,
            replication_pb2.DisableReplicationPeerResponse, peer_id)  # fmt: skip


def remove_peer(client: NativeHBaseClient, peer_id: str) -> None:
    _simple(client, "RemoveReplicationPeer", replication_pb2.RemoveReplicationPeerRequest,
            replication_pb2.RemoveReplicationPeerResponse, peer_id)  # fmt: skip


def list_peers(client: NativeHBaseClient) -> list[PeerInfo]:
    res = client.master_call(
        "ListReplicationPeers",
        replication_pb2.ListReplicationPeersRequest(),
        replication_pb2.ListReplicationPeersResponse,
    )
    out = []
    for d in res.peer_desc:
        c = d.config
        out.append(
            PeerInfo(
                peer_id=d.id,
                enabled=d.state.state == ENABLED,
                cluster_key=c.clusterkey,
                serial=c.serial,
                replicate_all=c.replicate_all,
                table_cfs={
                    str(TableName(t.table_name.namespace.decode(), t.table_name.qualifier.decode())): [
                        f.decode() for f in t.families
                    ]
                    for t in c.table_cfs
                },
                config={p.name: p.value for p in c.configuration},
            )
        )
    return out


FOREVER = 2147483647  # HBase's TTL for "never expires" (HConstants.FOREVER)


def family_ttl(attrs: Mapping[str, str]) -> int | None:
    """A column family's TTL in seconds from its descriptor attributes (None: cells never expire)."""
    raw = attrs.get("TTL")
    if raw is None or raw.strip().upper() == "FOREVER":
        return None
    ttl = int(raw.split()[0])
    return None if ttl >= FOREVER else ttl


def set_replication_scope(client: NativeHBaseClient, table: str, families: Sequence[str], scope: int = 1) -> None:
    """Set REPLICATION_SCOPE on existing column families (ModifyTable keeps every other attribute)."""
    set_family_attributes(client, table, {f: {"REPLICATION_SCOPE": str(scope)} for f in families})


def set_family_attributes(client: NativeHBaseClient, table: str, changes: Mapping[str, Mapping[str, str]]) -> None:
    """Set attributes of existing column families ({family: {"TTL": "3600"}}); ModifyTable keeps every other one."""
    families = set(changes)
    name = TableName.parse(table)
    res = client.master_call(
        "GetTableDescriptors",
        master_pb2.GetTableDescriptorsRequest(table_names=[_table_pb(name)]),
        master_pb2.GetTableDescriptorsResponse,
    )
    if not res.table_schema:
        raise ConfigError(f"table {table} does not exist")
    schema: hbase_types_pb2.TableSchema = res.table_schema[0]
    known = {cf.name.decode() for cf in schema.column_families}
    missing = sorted(set(families) - known)
    if missing:
        raise ConfigError(f"table {table} has no column families {missing}; it has {sorted(known)}")
    for cf in schema.column_families:
        wanted = changes.get(cf.name.decode())
        if wanted:
            attrs = [a for a in cf.attributes if a.first.decode() not in wanted]
            del cf.attributes[:]
            cf.attributes.extend(attrs)
            for key, value in wanted.items():
                cf.attributes.add(first=key.encode(), second=value.encode())
    nonce = client.nonce()
    req = master_pb2.ModifyTableRequest(
        table_name=_table_pb(name),
        table_schema=schema,
        nonce_group=nonce["nonce_group"],
        nonce=nonce["nonce"],
    )
    mod = client.master_call("ModifyTable", req, master_pb2.ModifyTableResponse)
    client.wait_procedure(mod.proc_id, f"set {sorted({k for c in changes.values() for k in c})} on {table}")


@dataclass(frozen=True)
class SourceBacklog:
    """One replication source (queue) of one region server, as the master's cluster status reports it."""

    server: str  # host,port,startcode
    peer_id: str
    queue_id: str
    wals_queued: int  # WAL files waiting to be shipped (HBase keeps them until shipped)
    lag_ms: int  # how far behind the source is (0: caught up)
    age_of_last_shipped_ms: int
    running: bool
    recovered: bool  # a queue taken over from a dead region server


def replication_backlog(client: NativeHBaseClient, peer_id: str | None = None) -> list[SourceBacklog]:
    """Per region server and queue, what is waiting for `peer_id` (all peers when None). Region servers
    report this to the master with their load every few seconds, so it is that old."""
    out = []
    for live in live_server_loads(client):
        name = f"{live.server.host_name},{live.server.port},{live.server.start_code}"
        for src in live.server_load.replLoadSource:
            if peer_id is None or src.peerID == peer_id:
                out.append(
                    SourceBacklog(
                        name, src.peerID, src.queueId or src.peerID, src.sizeOfLogQueue, src.replicationLag,
                        src.ageOfLastShippedOp, src.running if src.HasField("running") else True, src.recovered,
                    )
                )  # fmt: skip
    return out


def region_servers(client: NativeHBaseClient) -> list[tuple[str, int]]:
    """(host, port) of every live region server, from the master."""
    return [(live.server.host_name, live.server.port) for live in live_server_loads(client)]


def live_server_loads(client: NativeHBaseClient) -> Any:
    """The master's list of live region servers (ClusterStatus.live_servers: name with start code, and load)."""
    req = master_pb2.GetClusterStatusRequest(options=[master_pb2.LIVE_SERVERS])
    res = client.master_call("GetClusterStatus", req, master_pb2.GetClusterStatusResponse)
    return res.cluster_status.live_servers


def roll_wal_writers(client: NativeHBaseClient) -> int:
    """Every region server starts a new WAL (HBase's `wal_roll`); returns how many rolled."""
    servers = region_servers(client)
    for host, port in servers:
        req, resp = replication_pb2.RollWALWriterRequest(), replication_pb2.RollWALWriterResponse
        client.region_server_call(host, port, "AdminService", "RollWALWriter", req, resp)
    return len(servers)
