"""A small synchronous HBase client speaking HBase's native RPC (no Thrift or REST gateway).

It finds the master and hbase:meta through ZooKeeper, locates regions by scanning
hbase:meta, and talks MasterService / ClientService with cdcflow's own `hbase.pb` subset.
Results come back as protobuf cells (we announce no cell-block codec), which keeps this
client free of cell-block decoding. Built for tests, admin and verification, not for
high-throughput writes.
"""

from __future__ import annotations

import bisect
import functools
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import Message

from cdcflow.clients.hbase.model import (
    ColumnFamily,
    CounterBuilder,
    DeleteBuilder,
    Mutation,
    PutBuilder,
    TableName,
)
from cdcflow.clients.hbase.rpc import RpcConnection
from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.errors import HBaseRetryableError, HBaseTerminalError, RetryableError, ServiceUnavailable
from cdcflow.events.cells import Cell, CellType
from cdcflow.protocols.hbase import znode
from cdcflow.protocols.hbase.framing import parse_message
from cdcflow.protocols.hbase.pb import client_pb2, hbase_types_pb2, master_pb2

try:  # the compiled reader of multi-get answers (native/, built by `make install`)
    from cdcflow._native import hbase_multi_results as _native_multi_results
except ImportError:
    _native_multi_results = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=Message)
MutationLike = Mutation | PutBuilder | DeleteBuilder | CounterBuilder

META_REGION_NAME = b"hbase:meta,,1"
_DELETE_TYPES = {
    CellType.DELETE: client_pb2.MutationProto.DELETE_ONE_VERSION,
    CellType.DELETE_COLUMN: client_pb2.MutationProto.DELETE_MULTIPLE_VERSIONS,
    CellType.DELETE_FAMILY: client_pb2.MutationProto.DELETE_FAMILY,
    CellType.DELETE_FAMILY_VERSION: client_pb2.MutationProto.DELETE_FAMILY_VERSION,
}
_MUTATION_TYPES = {
    "put": client_pb2.MutationProto.PUT,
    "delete": client_pb2.MutationProto.DELETE,
    "increment": client_pb2.MutationProto.INCREMENT,
    "append": client_pb2.MutationProto.APPEND,
}


@dataclass(frozen=True)
class RegionLocation:
    name: bytes
    start_key: bytes
    end_key: bytes
    host: str
    port: int


def _table_pb(table: TableName) -> hbase_types_pb2.TableName:
    return hbase_types_pb2.TableName(namespace=table.namespace.encode(), qualifier=table.qualifier.encode())


def _as_mutation(m: MutationLike) -> Mutation:
    return m if isinstance(m, Mutation) else m.mutation


def mutation_to_proto(m: Mutation) -> client_pb2.MutationProto:
    proto = client_pb2.MutationProto(row=m.row, mutate_type=_MUTATION_TYPES[m.kind])
    if m.timestamp is not None:
        proto.timestamp = m.timestamp
    by_family: dict[bytes, client_pb2.MutationProto.ColumnValue] = {}
    for op in m.ops:
        cv = by_family.get(op.family)
        if cv is None:
            cv = proto.column_value.add(family=op.family)
            by_family[op.family] = cv
        qv = cv.qualifier_value.add()
        if op.qualifier is not None:
            qv.qualifier = op.qualifier
        if op.timestamp is not None:
            qv.timestamp = op.timestamp
        if op.delete is not None:
            qv.delete_type = _DELETE_TYPES[op.delete]
        else:
            qv.value = op.value
    if m.kind in ("increment", "append"):
        proto.nonce = random.getrandbits(63)  # lets the server drop a retried duplicate
    return proto


_CELL_TYPES = {t.value: t for t in CellType}  # a dict lookup: CellType(n) costs 3x more per cell


def cell_from_proto(c: hbase_types_pb2.Cell) -> Cell:
    return Cell(c.row, c.family, c.qualifier, c.timestamp, _CELL_TYPES[c.cell_type], c.value)


def _multi_results(body: bytes) -> list[list[tuple[int, list[Cell]]]] | None:
    """A multi-get's answer read by compiled code (native/src/hbase_results.rs): per region action, its (action
    index, cells); None when it is not built or the answer holds anything but plain results (an error, a
    partial result): the caller parses it with protobuf and raises the region's error."""
    if _native_multi_results is None:
        return None
    return _native_multi_results(body, Cell, _CELL_TYPES)


# Per-action failures of a Multi call that no retry can fix (HBase's DoNotRetryIOException
# subclasses a write meets); anything else (region moved, server busy) is retried until the deadline.
DO_NOT_RETRY_ACTIONS = frozenset({
    "NoSuchColumnFamilyException", "FailedSanityCheckException", "DoNotRetryIOException",
    "TableNotFoundException", "AccessDeniedException", "InvalidMutationDurabilityException",
})  # fmt: skip


def _raise_first_failure(rar: client_pb2.RegionActionResult) -> None:
    """A Multi call's region result with a failed action (or region) raises its first failure: terminal for the
    actions no retry can fix, retryable otherwise."""
    failures = [rar.exception] if rar.HasField("exception") else []
    failures += [r.exception for r in rar.resultOrException if r.HasField("exception")]
    if failures:
        first = failures[0]
        short = first.name.rsplit(".", 1)[-1]
        cls = HBaseTerminalError if short in DO_NOT_RETRY_ACTIONS else HBaseRetryableError
        raise cls(first.name, first.value.decode("utf-8", "replace"))


class NativeHBaseClient:
    """See module docstring. Not thread-safe: use one per thread."""

    def __init__(
        self,
        zk_quorum: str,
        znode_parent: str = "/hbase",
        rpc_timeout_s: float = 30.0,
        op_timeout_s: float = 120.0,
    ) -> None:
        self._zk = ZooKeeper(zk_quorum)
        self._parent = znode_parent.rstrip("/")
        self._rpc_timeout_s = rpc_timeout_s
        self._op_timeout_s = op_timeout_s
        self._conns: dict[tuple[str, int, str], RpcConnection] = {}
        self._regions: dict[TableName, list[RegionLocation]] = {}
        self._start_keys: dict[TableName, tuple[list[RegionLocation], list[bytes]]] = {}
        self._nonce_group = random.getrandbits(63)

    # --- plumbing ---------------------------------------------------------------------------------

    def _conn(self, host: str, port: int, service: str) -> RpcConnection:
        key = (host, port, service)
        conn = self._conns.get(key)
        if conn is None:
            conn = RpcConnection(host, port, service, self._rpc_timeout_s)
            self._conns[key] = conn
        return conn

    def _drop_conn(self, conn: RpcConnection) -> None:
        conn.close()
        self._conns = {k: c for k, c in self._conns.items() if c is not conn}

    def _server_from_znode(self, name: str, cls: type[M]) -> M:
        data = self._zk.get(f"{self._parent}/{name}")
        if data is None:
            raise ServiceUnavailable(f"znode {self._parent}/{name} missing: HBase not up yet")
        return parse_message(cls, znode.protobuf_payload(data))

    def _rpc(self, host: str, port: int, service: str, method: str, req: Message, resp: type[M]) -> M:
        return parse_message(resp, self._rpc_raw(host, port, service, method, req))

    def _rpc_raw(self, host: str, port: int, service: str, method: str, req: Message) -> bytes:
        conn = self._conn(host, port, service)
        try:
            return conn.call_raw(method, req)
        except ServiceUnavailable:
            self._drop_conn(conn)
            raise

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        """Run `fn`, retrying retryable failures with back-off until the operation deadline."""
        deadline = time.monotonic() + self._op_timeout_s
        delay = 0.05
        while True:
            try:
                return fn()
            except RetryableError as exc:
                if time.monotonic() + delay > deadline:
                    raise
                log.debug("%s: retrying after %s", what, exc)
                self._regions.clear()
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def region_server_call(self, host: str, port: int, service: str, method: str, req: Message, resp: type[M]) -> M:
        """One call to a region server's service, retried like the others (admin calls: rolling a WAL)."""
        return self._retrying(f"{service}.{method} on {host}:{port}",
                              lambda: self._rpc(host, port, service, method, req, resp))  # fmt: skip

    def master_call(self, method: str, req: Message, resp: type[M]) -> M:
        def once() -> M:
            master = self._server_from_znode("master", hbase_types_pb2.Master).master
            return self._rpc(master.host_name, master.port, "MasterService", method, req, resp)

        return self._retrying(f"master {method}", once)

    def wait_procedure(self, proc_id: int, what: str) -> None:
        deadline = time.monotonic() + self._op_timeout_s
        while True:
            res = self.master_call(
                "getProcedureResult",  # sic: lower-case g in MasterService
                master_pb2.GetProcedureResultRequest(proc_id=proc_id),
                master_pb2.GetProcedureResultResponse,
            )
            if res.state == master_pb2.GetProcedureResultResponse.FINISHED:
                if res.HasField("exception"):
                    ge = res.exception.generic_exception
                    raise HBaseTerminalError(ge.class_name or "ProcedureFailed", f"{what}: {ge.message}")
                return
            if res.state == master_pb2.GetProcedureResultResponse.NOT_FOUND:
                # The master hands a finished procedure's result out once and then forgets it: an earlier poll
                # whose answer was lost (a timeout under load, then a retry) took it, or the master's cleaner
                # evicted it. HBase's own clients take NOT_FOUND as done too; what the procedure did is the
                # caller's next read.
                log.warning("%s: procedure %d unknown to master: taken as finished (its result was collected by "
                            "a poll whose answer was lost, or evicted)", what, proc_id)  # fmt: skip
                return
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"{what}: procedure {proc_id} still running after {self._op_timeout_s}s")
            time.sleep(0.1)

    def nonce(self) -> dict[str, int]:
        return {"nonce_group": self._nonce_group, "nonce": random.getrandbits(63)}

    # --- admin ------------------------------------------------------------------------------------

    def ping(self) -> bool:
        """A real master call: true once the master runs and is initialized enough to list tables."""
        self.master_call(
            "GetTableNames",
            master_pb2.GetTableNamesRequest(include_sys_tables=True),
            master_pb2.GetTableNamesResponse,
        )
        return True

    def list_tables(self) -> list[str]:
        res = self.master_call("GetTableNames", master_pb2.GetTableNamesRequest(), master_pb2.GetTableNamesResponse)
        return sorted(str(TableName(t.namespace.decode(), t.qualifier.decode())) for t in res.table_names)

    def table_exists(self, table: str) -> bool:
        return table.strip() in self.list_tables() or str(TableName.parse(table)) in self.list_tables()

    def create_table(
        self, table: str, families: Sequence[ColumnFamily | str], split_keys: Sequence[bytes] = ()
    ) -> None:
        name = TableName.parse(table)
        schema = hbase_types_pb2.TableSchema(table_name=_table_pb(name))
        for fam in families:
            cf = ColumnFamily(fam) if isinstance(fam, str) else fam
            pb = schema.column_families.add(name=cf.name.encode())
            for key, value in cf.attributes().items():
                pb.attributes.add(first=key.encode(), second=value.encode())
        req = master_pb2.CreateTableRequest(table_schema=schema, split_keys=sorted(split_keys), **self.nonce())
        res = self.master_call("CreateTable", req, master_pb2.CreateTableResponse)
        self.wait_procedure(res.proc_id, f"create table {name}")
        self._retrying(f"locate regions of {name}", lambda: self._locate_all(name))

    def disable_table(self, table: str) -> None:
        """Take the table's regions offline (its data and its WAL edits stay); reads of it fail until enabled."""
        name = TableName.parse(table)
        res = self.master_call(
            "DisableTable",
            master_pb2.DisableTableRequest(table_name=_table_pb(name), **self.nonce()),
            master_pb2.DisableTableResponse,
        )
        self.wait_procedure(res.proc_id, f"disable table {name}")
        self._regions.pop(name, None)

    def enable_table(self, table: str) -> None:
        name = TableName.parse(table)
        res = self.master_call(
            "EnableTable",
            master_pb2.EnableTableRequest(table_name=_table_pb(name), **self.nonce()),
            master_pb2.EnableTableResponse,
        )
        self.wait_procedure(res.proc_id, f"enable table {name}")
        self._retrying(f"locate regions of {name}", lambda: self._locate_all(name))

    def delete_table(self, table: str) -> None:
        name = TableName.parse(table)
        self.disable_table(table)
        res2 = self.master_call(
            "DeleteTable",
            master_pb2.DeleteTableRequest(table_name=_table_pb(name), **self.nonce()),
            master_pb2.DeleteTableResponse,
        )
        self.wait_procedure(res2.proc_id, f"delete table {name}")
        self._regions.pop(name, None)

    def truncate_table(self, table: str, preserve_splits: bool = True) -> None:
        """Empty a table as HBase's `truncate` does (disabled first): new regions, nothing written to the WAL."""
        name = TableName.parse(table)
        self.disable_table(table)
        res = self.master_call(
            "truncateTable",
            master_pb2.TruncateTableRequest(tableName=_table_pb(name), preserveSplits=preserve_splits, **self.nonce()),
            master_pb2.TruncateTableResponse,
        )
        self.wait_procedure(res.proc_id, f"truncate table {name}")
        self._regions.pop(name, None)

    def split_region(self, table: str, split_row: bytes) -> None:
        """Split the region of `table` holding `split_row` at that row (two daughter regions, new region ids)."""
        name = TableName.parse(table)
        self._regions.pop(name, None)
        region = self._locate(name, split_row)
        info = hbase_types_pb2.RegionInfo(region_id=int(region.name.split(b",")[-1].split(b".")[0]),
                                          table_name=_table_pb(name), start_key=region.start_key,
                                          end_key=region.end_key)  # fmt: skip
        res = self.master_call(
            "SplitRegion",
            master_pb2.SplitTableRegionRequest(region_info=info, split_row=split_row, **self.nonce()),
            master_pb2.SplitTableRegionResponse,
        )
        self.wait_procedure(res.proc_id, f"split {name} at {split_row!r}")
        self._regions.pop(name, None)

    def family_attributes(self, table: str) -> dict[str, dict[str, str]]:
        """Column families of `table` with their attributes (REPLICATION_SCOPE, VERSIONS, ...)."""
        req = master_pb2.GetTableDescriptorsRequest(table_names=[_table_pb(TableName.parse(table))])
        res = self.master_call("GetTableDescriptors", req, master_pb2.GetTableDescriptorsResponse)
        if not res.table_schema:
            raise HBaseTerminalError("TableNotFoundException", table)
        return {
            cf.name.decode(): {a.first.decode(): a.second.decode() for a in cf.attributes}
            for cf in res.table_schema[0].column_families
        }

    # --- snapshots (the HBase backfill's consistent read) ------------------------------------------

    def cluster_id(self) -> uuid.UUID:
        """This cluster's UUID (`<parent>/hbaseid`): the `cluster_id` its own WAL entries carry."""
        data = self._zk.get(f"{self._parent}/hbaseid")
        if data is None:
            raise ServiceUnavailable(f"znode {self._parent}/hbaseid missing: HBase not up yet")
        return znode.cluster_id(data)

    def snapshot(self, table: str, name: str) -> None:
        """Take a flush snapshot of `table` (each region flushed, its files recorded), waiting until done."""
        desc = hbase_types_pb2.SnapshotDescription(
            name=name, table=str(TableName.parse(table)), type=hbase_types_pb2.SnapshotDescription.FLUSH
        )
        res = self.master_call("Snapshot", master_pb2.SnapshotRequest(snapshot=desc, **self.nonce()),
                               master_pb2.SnapshotResponse)  # fmt: skip
        if res.HasField("proc_id") and res.proc_id > 0:
            self.wait_procedure(res.proc_id, f"snapshot {name} of {table}")
            return
        deadline = time.monotonic() + max(self._op_timeout_s, res.expected_timeout / 1000)
        while True:  # the pre-procedure path: poll IsSnapshotDone (raises the snapshot's failure)
            done = self.master_call("IsSnapshotDone", master_pb2.IsSnapshotDoneRequest(snapshot=desc),
                                    master_pb2.IsSnapshotDoneResponse)  # fmt: skip
            if done.done:
                return
            if time.monotonic() > deadline:
                raise ServiceUnavailable(f"snapshot {name} of {table} not done after {res.expected_timeout} ms")
            time.sleep(0.2)

    def list_snapshots(self) -> dict[str, int]:
        """Completed snapshots: name → creation time (epoch ms)."""
        res = self.master_call("GetCompletedSnapshots", master_pb2.GetCompletedSnapshotsRequest(),
                               master_pb2.GetCompletedSnapshotsResponse)  # fmt: skip
        return {s.name: s.creation_time for s in res.snapshots}

    def clone_snapshot(self, name: str, table: str) -> None:
        """Create `table` from snapshot `name` (its files linked, not copied): HBase clones when the
        target of a restore does not exist."""
        target = TableName.parse(table)
        desc = hbase_types_pb2.SnapshotDescription(name=name, table=str(target))
        nonce = self.nonce()
        req = master_pb2.RestoreSnapshotRequest(snapshot=desc, nonce_group=nonce["nonce_group"], nonce=nonce["nonce"])
        res = self.master_call("RestoreSnapshot", req, master_pb2.RestoreSnapshotResponse)
        self.wait_procedure(res.proc_id, f"clone snapshot {name} into {target}")
        self._regions.pop(target, None)
        self._retrying(f"locate regions of {target}", lambda: self._locate_all(target))

    def delete_snapshot(self, name: str) -> None:
        self.master_call("DeleteSnapshot",
                         master_pb2.DeleteSnapshotRequest(snapshot=hbase_types_pb2.SnapshotDescription(name=name)),
                         master_pb2.DeleteSnapshotResponse)  # fmt: skip

    # --- region location --------------------------------------------------------------------------

    def _locate_all(self, table: TableName) -> list[RegionLocation]:
        cached = self._regions.get(table)
        if cached is not None:
            return cached
        meta = self._server_from_znode("meta-region-server", hbase_types_pb2.MetaRegionServer).server
        prefix = str(table).encode()
        # hbase:meta compares rows field by field (split at commas), so the bounds are the ones
        # HBase's MetaTableAccessor uses: "table,," (first region) to "table ," (past the last).
        scan = client_pb2.Scan(start_row=prefix + b",,", stop_row=prefix + b" ,", caching=1000)
        regions: list[RegionLocation] = []
        for result in self._scan_region(meta.host_name, meta.port, META_REGION_NAME, scan):
            cols = {(c.family, c.qualifier): c.value for c in result.cell}
            info_bytes = cols.get((b"info", b"regioninfo"))
            if info_bytes is None:
                continue
            info = parse_message(hbase_types_pb2.RegionInfo, znode.protobuf_payload(info_bytes))
            if info.offline or info.split or info.replica_id != 0:
                continue
            if (info.table_name.namespace, info.table_name.qualifier) != (
                table.namespace.encode(),
                table.qualifier.encode(),
            ):
                continue
            server = cols.get((b"info", b"server"))
            if not server:
                raise ServiceUnavailable(f"region {result.cell[0].row!r} of {table} not assigned yet")
            host, _, port = server.decode().rpartition(":")
            regions.append(RegionLocation(result.cell[0].row, info.start_key, info.end_key, host, int(port)))
        if not regions:
            raise HBaseTerminalError("TableNotFoundException", f"no regions for {table} in hbase:meta")
        regions.sort(key=lambda r: r.start_key)
        self._regions[table] = regions
        return regions

    def region_ids(self) -> dict[str, frozenset[int]]:
        """Every user table's online regions, from one scan of hbase:meta: {"ns:table": {region id, ...}}.
        A region id is the time (ms) the master made the region: a table created or truncated gets new ones."""

        def once() -> dict[str, frozenset[int]]:
            meta = self._server_from_znode("meta-region-server", hbase_types_pb2.MetaRegionServer).server
            found: dict[str, set[int]] = {}
            for result in self._scan_region(meta.host_name, meta.port, META_REGION_NAME,
                                            client_pb2.Scan(caching=1000)):  # fmt: skip
                info_bytes = next((c.value for c in result.cell if (c.family, c.qualifier) == (b"info", b"regioninfo")),
                                  None)  # fmt: skip
                if info_bytes is None:
                    continue
                info = parse_message(hbase_types_pb2.RegionInfo, znode.protobuf_payload(info_bytes))
                namespace = info.table_name.namespace.decode()
                if info.offline or info.split or info.replica_id != 0 or namespace == "hbase":
                    continue
                found.setdefault(f"{namespace}:{info.table_name.qualifier.decode()}", set()).add(info.region_id)
            return {table: frozenset(ids) for table, ids in found.items()}

        return self._retrying("scan hbase:meta", once)

    def holds_cells_before(self, table: str, ts: int) -> bool:
        """Whether `table` shows any cell older than `ts` (ms): a scan of each region for one row with a cell in
        the time range [0, ts) (HBase skips the files whose time range lies past it)."""
        name = TableName.parse(table)

        def once() -> bool:
            self._regions.pop(name, None)
            for loc in self._locate_all(name):
                scan = client_pb2.Scan(time_range=hbase_types_pb2.TimeRange(**{"from": 0, "to": ts}), caching=1,
                                       start_row=loc.start_key, stop_row=loc.end_key)  # fmt: skip
                for result in self._scan_region(loc.host, loc.port, loc.name, scan):
                    if result.cell:
                        return True
            return False

        return self._retrying(f"look for cells of {name} older than {ts}", once)

    def regions(self, table: str) -> list[RegionLocation]:
        """The table's regions in key order (fresh from hbase:meta)."""
        name = TableName.parse(table)
        self._regions.pop(name, None)
        return self._retrying(f"locate regions of {name}", lambda: self._locate_all(name))

    def _locate(self, table: TableName, row: bytes) -> RegionLocation:
        regions = self._locate_all(table)
        # The start keys are listed once per region list (a multi-get locates every row it reads: listing them per
        # row cost O(regions) each); the list's identity says whether the cached keys are still its keys.
        held = self._start_keys.get(table)
        if held is None or held[0] is not regions:
            held = self._start_keys[table] = (regions, [r.start_key for r in regions])
        idx = bisect.bisect_right(held[1], row) - 1
        return regions[max(idx, 0)]

    def _scan_region(
        self, host: str, port: int, region_name: bytes, scan: client_pb2.Scan
    ) -> Iterator[client_pb2.Result]:
        spec = hbase_types_pb2.RegionSpecifier(type=hbase_types_pb2.RegionSpecifier.REGION_NAME, value=region_name)
        req = client_pb2.ScanRequest(region=spec, scan=scan, number_of_rows=scan.caching or 100)
        res = self._rpc(host, port, "ClientService", "Scan", req, client_pb2.ScanResponse)
        call_seq = 0
        while True:
            yield from res.results
            in_region = res.more_results_in_region if res.HasField("more_results_in_region") else True
            if not res.more_results or not in_region or not res.HasField("scanner_id"):
                if res.HasField("scanner_id") and res.more_results:
                    close = client_pb2.ScanRequest(scanner_id=res.scanner_id, close_scanner=True)
                    self._rpc(host, port, "ClientService", "Scan", close, client_pb2.ScanResponse)
                return
            # The region server expects 0 on the first "next" after the open, then +1 each time.
            nxt = client_pb2.ScanRequest(
                scanner_id=res.scanner_id, number_of_rows=scan.caching or 100, next_call_seq=call_seq
            )
            call_seq += 1
            res = self._rpc(host, port, "ClientService", "Scan", nxt, client_pb2.ScanResponse)

    # --- data -------------------------------------------------------------------------------------

    def mutate(self, table: str, mutation: MutationLike) -> list[Cell]:
        """Apply one row mutation; returns the cells of the result (increment/append), else []."""
        name = TableName.parse(table)
        proto = mutation_to_proto(_as_mutation(mutation))

        def once() -> list[Cell]:
            loc = self._locate(name, proto.row)
            spec = hbase_types_pb2.RegionSpecifier(type=hbase_types_pb2.RegionSpecifier.REGION_NAME, value=loc.name)
            req = client_pb2.MutateRequest(region=spec, mutation=proto, nonce_group=self._nonce_group)
            res = self._rpc(loc.host, loc.port, "ClientService", "Mutate", req, client_pb2.MutateResponse)
            return [cell_from_proto(c) for c in res.result.cell]

        return self._retrying(f"mutate {name}", once)

    def mutate_batch(self, table: str, mutations: Sequence[MutationLike]) -> None:
        """Several row mutations in one Multi call per region server (one WAL entry per region).

        Puts and deletes only; increments and appends are not idempotent, so they go through
        `mutate` with a nonce. The whole batch is retried if any action fails, which is safe
        for puts and deletes with explicit timestamps.
        """
        name = TableName.parse(table)
        protos = [mutation_to_proto(_as_mutation(m)) for m in mutations]
        if any(p.mutate_type not in (client_pb2.MutationProto.PUT, client_pb2.MutationProto.DELETE) for p in protos):
            raise ValueError("mutate_batch takes puts and deletes only")

        def once() -> None:
            by_server: dict[tuple[str, int], dict[bytes, list[client_pb2.MutationProto]]] = {}
            for proto in protos:
                loc = self._locate(name, proto.row)
                by_server.setdefault((loc.host, loc.port), {}).setdefault(loc.name, []).append(proto)
            for (host, port), regions in by_server.items():
                req = client_pb2.MultiRequest(nonceGroup=self._nonce_group)
                for region_name, items in regions.items():
                    ra = req.regionAction.add()
                    ra.region.type = hbase_types_pb2.RegionSpecifier.REGION_NAME
                    ra.region.value = region_name
                    for i, proto in enumerate(items):
                        ra.action.add(index=i, mutation=proto)
                res = self._rpc(host, port, "ClientService", "Multi", req, client_pb2.MultiResponse)
                for rar in res.regionActionResult:
                    _raise_first_failure(rar)

        self._retrying(f"multi {name}", once)

    def get_rows(self, table: str, rows: Sequence[bytes]) -> dict[bytes, list[Cell]]:
        """The newest version of every column of each of `rows` (a row that is gone: no entry), read with one
        Multi call per region server. Retried as a whole on a retryable failure (reads are idempotent)."""
        name = TableName.parse(table)
        wanted = list(dict.fromkeys(rows))

        def once() -> dict[bytes, list[Cell]]:
            by_server: dict[tuple[str, int], dict[bytes, list[bytes]]] = {}
            for row in wanted:
                loc = self._locate(name, row)
                by_server.setdefault((loc.host, loc.port), {}).setdefault(loc.name, []).append(row)
            found: dict[bytes, list[Cell]] = {}
            for (host, port), regions in by_server.items():
                req = client_pb2.MultiRequest()
                asked: list[list[bytes]] = []
                for region_name, region_rows in regions.items():
                    ra = req.regionAction.add()
                    ra.region.type = hbase_types_pb2.RegionSpecifier.REGION_NAME
                    ra.region.value = region_name
                    for i, row in enumerate(region_rows):
                        ra.action.add(index=i, get=client_pb2.Get(row=row, max_versions=1))
                    asked.append(region_rows)
                body = self._rpc_raw(host, port, "ClientService", "Multi", req)
                compiled = _multi_results(body)
                if compiled is not None:
                    for region_rows, results in zip(asked, compiled, strict=True):
                        for index, cells in results:
                            if cells:
                                found[region_rows[index]] = cells
                    continue
                res = parse_message(client_pb2.MultiResponse, body)
                for region_rows, rar in zip(asked, res.regionActionResult, strict=True):
                    _raise_first_failure(rar)
                    for roe in rar.resultOrException:
                        cells = [cell_from_proto(c) for c in roe.result.cell]
                        if cells:
                            found[region_rows[roe.index]] = cells
            return found

        return self._retrying(f"multi-get {name}", once)

    def scan(
        self,
        table: str,
        *,
        start_row: bytes = b"",
        stop_row: bytes = b"",
        max_versions: int = 1,
        batch_rows: int = 500,
    ) -> Iterator[Cell]:
        """Every cell of `table` in row order, with timestamps; up to `max_versions` per column."""
        name = TableName.parse(table)
        position = start_row
        while True:
            loc, rows = self._retrying(
                f"scan {name}",
                functools.partial(self._scan_from, name, position, stop_row, max_versions, batch_rows),
            )
            for result in rows:
                for c in result.cell:
                    yield cell_from_proto(c)
            if not loc.end_key or (stop_row and loc.end_key >= stop_row):
                return
            position = loc.end_key

    def scan_rows(
        self,
        table: str,
        *,
        start_row: bytes = b"",
        stop_row: bytes = b"",
        max_versions: int = 1,
        raw: bool = False,
        batch_rows: int = 500,
    ) -> Iterator[list[Cell]]:
        """The cells of each row of `table` in [start_row, stop_row), one list per row, streamed.

        `raw`: delete markers and the versions they mask too, as HBase stores them (a raw scan).
        A failed region server call is retried from the row after the last one returned, so a
        consumer never sees a row twice or misses one, and nothing is buffered beyond a scan batch.
        """
        name = TableName.parse(table)
        attributes = [hbase_types_pb2.NameBytesPair(name="_raw_", value=b"\xff")] if raw else []
        position, include_start = start_row, True
        deadline, delay = time.monotonic() + self._op_timeout_s, 0.05  # the deadline moves with progress
        while True:
            try:
                loc = self._locate(name, position)
                stop = loc.end_key if not stop_row or (loc.end_key and loc.end_key < stop_row) else stop_row
                scan = client_pb2.Scan(
                    start_row=position, stop_row=stop, max_versions=max_versions, caching=batch_rows,
                    include_start_row=include_start, attribute=attributes,
                )  # fmt: skip
                for result in self._scan_region(loc.host, loc.port, loc.name, scan):
                    cells = [cell_from_proto(c) for c in result.cell]
                    if cells:
                        position, include_start = cells[0].row, False
                        deadline, delay = time.monotonic() + self._op_timeout_s, 0.05
                        yield cells
            except RetryableError as exc:
                if time.monotonic() + delay > deadline:
                    raise
                log.debug("scan %s: resuming after row %r: %s", name, position[:64], exc)
                self._regions.clear()
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if not loc.end_key or (stop_row and loc.end_key >= stop_row):
                return
            position, include_start = loc.end_key, True

    def _scan_from(
        self, name: TableName, pos: bytes, stop_row: bytes, max_versions: int, batch_rows: int
    ) -> tuple[RegionLocation, list[client_pb2.Result]]:
        """All rows of the region holding `pos`, from `pos` on (a retry restarts the region)."""
        loc = self._locate(name, pos)
        stop = loc.end_key if not stop_row or (loc.end_key and loc.end_key < stop_row) else stop_row
        scan = client_pb2.Scan(start_row=pos, stop_row=stop, max_versions=max_versions, caching=batch_rows)
        return loc, list(self._scan_region(loc.host, loc.port, loc.name, scan))

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
        self._zk.close()

    def __enter__(self) -> NativeHBaseClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
