"""The HBase capture's throughput with two cdcflow instances against one, on HBase shaped like production.

Starts `hbase-cluster` (ZooKeeper, HDFS, a master and --region-servers region servers, each its own JVM) in a
stack home of its own, next to the local stack's Kafka (`cdcflow stack up kafka` first, or --bootstrap). Each
run: a table with one region per region server (each server holds one), a serial peer added *disabled*, a
backlog of --rows rows written (--batch rows per write), K instances of `cdcflow hbase run` started, the peer
enabled (calls of at most --call-mb), and the time from the backlog's first record in Kafka to its last taken.
The runs alternate 1 and 2 instances (--runs pairs); figures are rows/s, median [min-max], and the ratio 2/1 per
pair. Each instance's WAL-entries counter shows the share it served.

    .venv/bin/python benchmarks/hbase_cluster_instances.py --rows 600000 --runs 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.clients.hbase import admin as peer_admin
from cdcflow.clients.hbase import region_admin
from cdcflow.clients.hbase.model import ColumnFamily, Put
from cdcflow.clients.hbase.native import NativeHBaseClient
from cdcflow.clients.kafka import end_offsets
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.dev.stack.ports import free_port
from cdcflow.dev.testing.metrics import metric_value
from cdcflow.jars import versions

CLI = [sys.executable, "-m", "cdcflow.cli.main"]


def entries(port: int) -> float:
    return metric_value(port, "cdcflow_hbase_wal_entries_total") or 0.0


def one_run(client: NativeHBaseClient, zk_quorum: str, bootstrap: str, rows: int, batch: int, call_mb: int,
            instances: int, workdir: Path) -> tuple[float, list[float]]:  # fmt: skip
    """rows/s from the first record of the backlog in Kafka to the last; WAL entries per instance."""
    servers = sorted(region_admin.live_servers(client), key=lambda s: s.port)
    name = f"inst{uuid.uuid4().hex[:8]}"
    splits = [b"row-%08d" % (rows * i // len(servers)) for i in range(1, len(servers))]
    client.create_table(name, [ColumnFamily("cf")], split_keys=splits)
    for region, server in zip(client.regions(name), servers, strict=True):
        if (region.host, region.port) != (server.host, server.port):
            region_admin.move_region(client, region, server)
    cfg = workdir / f"{name}.yaml"
    # Calls of at most --call-mb: with HBase's default (64 MB) a region server ships this backlog in a handful of
    # calls, and two instances could share at most that many.
    peer_cfg = {"peer_id": name, "znode_parent": f"/{name}", "port": 0, "hbase_config": {
        "replication.source.ratio": "1.0", "replication.source.size.capacity": str(call_mb * 2**20)}}  # fmt: skip
    hbase_cfg = {"zk_quorum": zk_quorum, "topic_prefix": name, "peer": peer_cfg}
    cfg.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap}, "hbase": hbase_cfg}))
    procs: list[subprocess.Popen[bytes]] = []
    ports = [free_port() for _ in range(instances)]
    try:
        for port in ports:
            procs.append(subprocess.Popen([*CLI, "hbase", "run", "--config", str(cfg), "--metrics-port", str(port)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        time.sleep(3)  # registered
        subprocess.run([*CLI, "hbase", "peer", "add", "--config", str(cfg), "--disabled", f"--table={name}"],
                       check=True, capture_output=True)  # fmt: skip
        rng = random.Random(11)
        order = list(range(rows))
        rng.shuffle(order)  # every region written throughout, in batches the size of a busy application's
        for start in range(0, rows, batch):
            client.mutate_batch(name, [Put(b"row-%08d" % i).add(b"cf", b"v", rng.randbytes(100), 1000 + i)
                                       for i in order[start:start + batch]])  # fmt: skip
        topic = f"{name}.default.{name}"
        peer_admin.enable_peer(client, name)
        first = None
        deadline = time.monotonic() + 900
        while (arrived := sum(end_offsets(bootstrap, topic).values())) < rows:
            if first is None and arrived:
                first = time.perf_counter()
            if time.monotonic() > deadline:
                raise SystemExit(f"{topic}: not all {rows} rows arrived in 900 s")
            time.sleep(0.05)
        elapsed = time.perf_counter() - (first or time.perf_counter())
        time.sleep(2)  # an instance counts a call's entries once it has answered it, after Kafka acknowledged
        return rows / max(elapsed, 0.05), [entries(p) for p in ports]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        subprocess.run([*CLI, "hbase", "peer", "remove", "--config", str(cfg)], capture_output=True, check=False)
        client.delete_table(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the local stack's)")
    ap.add_argument("--rows", type=int, default=600_000)
    ap.add_argument("--batch", type=int, default=1000, help="rows per write (one WAL entry per region)")
    ap.add_argument("--call-mb", type=int, default=4, help="largest call (replication.source.size.capacity)")
    ap.add_argument("--runs", type=int, default=3, help="pairs of runs (1 instance, then 2)")
    ap.add_argument("--region-servers", type=int, default=3)
    args = ap.parse_args()
    bootstrap = args.bootstrap or Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    print(f"machine: {machine_summary()}; HBase {versions.HBASE_VERSION}")
    with tempfile.TemporaryDirectory(prefix="cdcflow-bench-") as tmp:
        workdir = Path(tmp)
        cluster = Stack(workdir / "stack", region_servers=args.region_servers)
        cluster.up(["hbase-cluster"])
        try:
            ep = cluster.endpoints("hbase-cluster")
            client = NativeHBaseClient(ep["zk_quorum"], ep["znode_parent"])
            found: dict[int, list[float]] = {1: [], 2: []}
            for run in range(args.runs):
                for instances in (1, 2):
                    rate, shares = one_run(client, ep["zk_quorum"], bootstrap, args.rows, args.batch, args.call_mb,
                                           instances, workdir)  # fmt: skip
                    found[instances].append(rate)
                    print(f"run {run + 1}, {instances} instance(s): {rate:,.0f} rows/s; WAL entries per instance "
                          f"{[int(s) for s in shares]}", flush=True)  # fmt: skip
            client.close()
        finally:
            cluster.down()
    for instances, rates in found.items():
        print(f"{instances} instance(s), {args.region_servers} source region servers, {args.rows:,} rows: "
              f"{statistics.median(rates):,.0f} rows/s [{min(rates):,.0f}-{max(rates):,.0f}]")  # fmt: skip
    ratios = [two / one for one, two in zip(found[1], found[2], strict=True)]
    print(f"2 instances / 1: {', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
