"""Region placement over MasterService RPC: moving and merging regions, running the balancer, draining a
region server. What an operator, or the cluster on its own, does to regions while replication runs; the
production-shaped test cluster drives it (splits are `NativeHBaseClient.split_region`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cdcflow.clients.hbase.admin import live_server_loads
from cdcflow.clients.hbase.native import NativeHBaseClient, RegionLocation
from cdcflow.errors import HBaseTerminalError
from cdcflow.protocols.hbase.pb import hbase_types_pb2, master_pb2


@dataclass(frozen=True, slots=True)
class ServerName:
    """A live region server as the master names it: host, port and the start code of this incarnation."""

    host: str
    port: int
    start_code: int

    def as_pb(self) -> hbase_types_pb2.ServerName:
        return hbase_types_pb2.ServerName(host_name=self.host, port=self.port, start_code=self.start_code)


def encoded_name(region: RegionLocation) -> bytes:
    """A region's encoded name: the 32 hex digits that end its full name ("table,start,id.<encoded>.")."""
    if not region.name.endswith(b".") or len(region.name) < 34:
        raise HBaseTerminalError("BadRegionName", f"{region.name!r} carries no encoded name")
    return region.name[-33:-1]


def _spec(region: RegionLocation) -> hbase_types_pb2.RegionSpecifier:
    # The master reads the specifier of moves and merges as an encoded name whatever its type says.
    return hbase_types_pb2.RegionSpecifier(type=hbase_types_pb2.RegionSpecifier.ENCODED_REGION_NAME,
                                           value=encoded_name(region))  # fmt: skip


def live_servers(client: NativeHBaseClient) -> list[ServerName]:
    """The region servers the master counts as live, with their start codes."""
    return [ServerName(s.server.host_name, s.server.port, s.server.start_code) for s in live_server_loads(client)]


def server_at(client: NativeHBaseClient, host: str, port: int) -> ServerName:
    found = [s for s in live_servers(client) if (s.host, s.port) == (host, port)]
    if not found:
        raise HBaseTerminalError("ServerNotRunningYetException", f"no live region server at {host}:{port}")
    return found[0]


def move_region(client: NativeHBaseClient, region: RegionLocation, to: ServerName) -> None:
    """Move a region to a server; the master answers once the region is open there."""
    client.master_call("MoveRegion", master_pb2.MoveRegionRequest(region=_spec(region), dest_server_name=to.as_pb()),
                       master_pb2.MoveRegionResponse)  # fmt: skip


def merge_regions(client: NativeHBaseClient, first: RegionLocation, second: RegionLocation) -> None:
    """Merge two adjacent regions into one (a new region id); waits for the master's procedure."""
    nonce = client.nonce()
    req = master_pb2.MergeTableRegionsRequest(region=[_spec(first), _spec(second)], nonce_group=nonce["nonce_group"],
                                              nonce=nonce["nonce"])  # fmt: skip
    res = client.master_call("MergeTableRegions", req, master_pb2.MergeTableRegionsResponse)
    client.wait_procedure(res.proc_id, f"merge {first.name!r} and {second.name!r}")


def set_balancer(client: NativeHBaseClient, on: bool) -> bool:
    """Turn the balancer's periodic runs on or off; whether it was on."""
    res = client.master_call("SetBalancerRunning", master_pb2.SetBalancerRunningRequest(on=on, synchronous=True),
                             master_pb2.SetBalancerRunningResponse)  # fmt: skip
    return bool(res.prev_balance_value)


def balance(client: NativeHBaseClient) -> int:
    """Run the balancer now (it must be on); the region moves it made."""
    res = client.master_call("Balance", master_pb2.BalanceRequest(), master_pb2.BalanceResponse)
    if not res.balancer_ran:
        raise HBaseTerminalError("BalancerNotRun", "the master did not run the balancer (off, or regions in "
                                 "transition)")  # fmt: skip
    return int(res.moves_executed)


def decommission(client: NativeHBaseClient, server: ServerName, offload: bool = True) -> None:
    """Drain a region server: no new regions go to it, and with `offload` its regions move off (asynchronously:
    see `wait_emptied`)."""
    client.master_call("DecommissionRegionServers",
                       master_pb2.DecommissionRegionServersRequest(server_name=[server.as_pb()], offload=offload),
                       master_pb2.DecommissionRegionServersResponse)  # fmt: skip


def recommission(client: NativeHBaseClient, server: ServerName) -> None:
    req = master_pb2.RecommissionRegionServerRequest(server_name=server.as_pb())
    client.master_call("RecommissionRegionServer", req, master_pb2.RecommissionRegionServerResponse)


def wait_emptied(client: NativeHBaseClient, table: str, server: ServerName, timeout_s: float = 120.0) -> None:
    """Until no region of `table` is on `server` (hbase:meta's account)."""
    deadline = time.monotonic() + timeout_s
    while any((r.host, r.port) == (server.host, server.port) for r in client.regions(table)):
        if time.monotonic() > deadline:
            raise HBaseTerminalError("Timeout", f"{table} still has regions on {server.host}:{server.port} after "
                                     f"{timeout_s:.0f} s")  # fmt: skip
        time.sleep(0.5)
