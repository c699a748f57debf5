"""The production-shaped HBase (`cdcflow stack up hbase-cluster`) with a SERIAL peer served by cdcflow instances and
a randomized workload (puts with versions written out of order, deletes of every kind) writing in a thread; what
the cluster tests share. Increments and appends go beside the workload's puts and deletes: every mutation type."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from cdcflow.clients.hbase.model import Append, ColumnFamily, Increment
from cdcflow.clients.hbase.native import NativeHBaseClient
from cdcflow.dev.demo.hbase_workload import FAMILIES, HBaseWorkload
from cdcflow.dev.stack import Stack
from cdcflow.dev.stack.ports import free_port
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.hbase_cluster import RegionServers
from cdcflow.dev.testing.metrics import metric_value

from .hbase_capture import PeerSetup, Rebuilder

# HBase's master finishing the procedure that hands a dead server's replication queue to a survivor.
CLAIMED = re.compile(r"Finished pid=\d+, ppid=\d+, state=SUCCESS; \S*ClaimReplicationQueueRemoteProcedure")
# A region server's replication source failing to ship a batch to the peer (it retries the same batch).
FAILED_SHIPMENT = re.compile(
    r"HBaseInterClusterReplicationEndpoint: .*Can't replicate because of a local or network error"
)


class ClusterCapture:
    """The cluster, its client, a serial peer of `instances` cdcflow instances (each serving metrics) for one
    table, and the workload's writer thread."""

    def __init__(self, home: Path, kafka: dict[str, Any], instances: int = 2, region_servers: int = 3) -> None:
        self.home, self.kafka, self.instances = home, kafka, instances
        self.stack = Stack(home / "hbase-cluster", region_servers=region_servers)
        self.stopped = threading.Event()
        self.failure: BaseException | None = None
        self.writer: threading.Thread | None = None
        self.metrics_ports: list[int] = []
        self.counter_mutations = 0

    def __enter__(self) -> ClusterCapture:
        self.stack.up(["hbase-cluster"])
        endpoints = self.stack.endpoints("hbase-cluster")
        self.servers = RegionServers(endpoints)
        self.client = NativeHBaseClient(endpoints["zk_quorum"], endpoints["znode_parent"])
        self.peer = PeerSetup(unique_name("pc"), endpoints, self.kafka, self.home)
        self.peer.write_config()
        self.source, self.target = f"{self.peer.name}_src", f"{self.peer.name}_copy"
        # The writer thread has a client of its own: a client's connections serve one thread.
        self.writer_client = NativeHBaseClient(endpoints["zk_quorum"], endpoints["znode_parent"])
        self.workload = HBaseWorkload(self.writer_client, [self.source], rows_per_table=2000, seed=7)
        self.workload.create_tables()  # four regions
        self.client.create_table(self.target, [ColumnFamily(f.name, f.max_versions, replication_scope=0)
                                               for f in FAMILIES])  # fmt: skip
        self.peer.add_peer(self.source)
        self.procs = [self.start_instance(i) for i in range(self.instances)]
        return self

    def start_instance(self, index: int) -> Any:
        port = free_port()
        if index < len(self.metrics_ports):
            self.metrics_ports[index] = port
        else:
            self.metrics_ports.append(port)
        return self.peer.start(index, "--metrics-port", str(port))

    def metric(self, index: int, name: str) -> float:
        return metric_value(self.metrics_ports[index], name) or 0.0

    def entries(self, index: int) -> float:
        """WAL entries instance `index` received."""
        return self.metric(index, "cdcflow_hbase_wal_entries_total")

    def counters(self, step: int) -> None:
        """An increment and an append in each of the table's first regions, beside the workload's puts (with
        timestamps of its own) and deletes of every kind: mutations that HBase stamps itself, not idempotent."""
        for region in range(4):
            row = b"row-%05d-counter" % (region * 500 + 7)
            self.writer_client.mutate(self.source, Increment(row).add(b"cf", b"n", 1))
            self.writer_client.mutate(self.source, Append(row).add(b"cg", b"log", b"%d," % step))
            self.counter_mutations += 2

    def start_writing(self, pause_s: float = 0.1) -> None:
        def keep_writing() -> None:
            try:
                step = 0
                while not self.stopped.is_set():
                    self.workload.step(40)
                    if step % 3 == 0:  # (eight single calls: kept from slowing the workload's batches much)
                        self.counters(step)
                    step += 1
                    time.sleep(pause_s)
            except BaseException as exc:  # surfaced by stop_writing
                self.failure = exc

        self.writer = threading.Thread(target=keep_writing, daemon=True)
        self.writer.start()

    def stop_writing(self) -> None:
        self.stopped.set()
        if self.writer is not None:
            self.writer.join(120)
        if self.failure is not None:
            raise AssertionError(f"the workload failed: {self.failure!r}") from self.failure

    def master_log(self) -> str:
        return (self.home / "hbase-cluster" / "hbase-cluster" / "hbase-cluster.log").read_text(errors="replace")

    def wait_for_log(self, pattern: re.Pattern[str], what: str, timeout_s: float = 180) -> int:
        """Until the cluster's log (master and region servers) shows `pattern`; how often it does."""
        deadline = time.monotonic() + timeout_s
        while not (found := len(pattern.findall(self.master_log()))):
            assert time.monotonic() < deadline, f"HBase's log never showed {what}"
            time.sleep(2)
        return found

    def placement(self) -> dict[bytes, tuple[str, int]]:
        return {r.name: (r.host, r.port) for r in self.client.regions(self.source)}

    def verify(self, label: str) -> None:
        """The table rebuilt from the topic equals HBase; each row's changes in order."""
        rebuild = Rebuilder(self.client, self.kafka["bootstrap_servers"], f"{self.peer.name}.default.{self.source}",
                            self.target)  # fmt: skip
        try:
            rebuild.until_equal(self.source, timeout_s=300)
            rebuild.assert_row_order()
            # (More events than mutations when regions moved: the client writes a whole batch again when a region
            # of it moved, and HBase logs those mutations twice.)
            print(f"hbase cluster, {label}: {self.workload.mutations + self.counter_mutations} mutations "
                  f"({self.counter_mutations} increments and appends), {len(rebuild.records)} events, "
                  f"{rebuild.duplicates()} duplicates")  # fmt: skip
        finally:
            rebuild.close()

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        try:
            self.peer.stop_all()
            self.client.close()
            self.writer_client.close()
        finally:
            self.stack.down(grace_s=2.0)  # thrown away: no clean shutdown to wait for
