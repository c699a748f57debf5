"""Benchmark of `cdcflow hbase backfill`: existing HBase cells → `op: "r"` events in Kafka.

Against the local stack (`cdcflow stack up kafka hbase` first). Loads a table of --rows rows x --cells
cells (100-byte values) across --regions regions, then measures in the same run:

1. baseline "scan": one process scans every region raw with cdcflow's HBase client, nothing else;
2. baseline "produce": the raw confluent-kafka producer sending as many records of the backfill's
   average size, with the same settings (idempotent, acks=all, lz4), from one process;
3. the backfill itself (`cdcflow hbase backfill`, a fresh process: snapshot, clone, Spark, tasks,
   hand-off, clean-up), once per --masters entry (default local[1] and local[2]): wall time, the
   region tasks' time (from its log: Spark session up → every region read), rows/s and cells/s.

Prints the machine and versions first. Example (1M cells):
  .venv/bin/python benchmarks/hbase_backfill.py --rows 100000 --cells 10
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka
import yaml
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.hbase.model import ColumnFamily, Put
from cdcflow.clients.kafka import end_offsets, tail
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions


def load(client: NativeHBaseClient, table: str, rows: int, cells: int, regions: int) -> None:
    splits = [b"r%09d" % (rows * i // regions) for i in range(1, regions)]
    client.create_table(table, [ColumnFamily("cf", max_versions=1)], split_keys=splits)
    value = os.urandom(100)
    batch = []
    for i in range(rows):
        p = Put(b"r%09d" % i)
        for c in range(cells):
            p.add(b"cf", b"q%02d" % c, value, 1_000_000 + i)
        batch.append(p)
        if len(batch) == 1000:
            client.mutate_batch(table, batch)
            batch = []
    if batch:
        client.mutate_batch(table, batch)


def scan_baseline(client: NativeHBaseClient, table: str) -> tuple[int, int, float]:
    began = time.monotonic()
    rows = cells = 0
    for row in client.scan_rows(table, raw=True, max_versions=2**31 - 1, batch_rows=200):
        rows += 1
        cells += len(row)
    return rows, cells, time.monotonic() - began


def produce_baseline(bootstrap: str, count: int, size: int) -> float:
    topic = f"bench-backfill-raw-{uuid.uuid4().hex[:8]}"
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "compression.type": "lz4",
        "linger.ms": 5, "queue.buffering.max.kbytes": 1024 * 1024,
    })  # fmt: skip
    value = os.urandom(size // 2).hex().encode()[:size]  # JSON-like entropy (hex), not incompressible bytes
    began = time.monotonic()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, b"r%09d" % i)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    left = producer.flush(120)
    assert left == 0, f"{left} records unacknowledged"
    return time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--regions", type=int, default=8)
    ap.add_argument("--masters", default="local[1],local[2]")
    args = ap.parse_args()
    stack = Stack(default_stack_home())
    hb, kafka = stack.endpoints("hbase"), stack.endpoints("kafka")
    bootstrap = str(kafka["bootstrap_servers"])
    print(f"machine: {machine_summary()}")
    print(f"versions: HBase {versions.HBASE_VERSION}, Kafka {versions.KAFKA_VERSION}, Spark {versions.SPARK_VERSION}")
    name = f"bench_backfill_{uuid.uuid4().hex[:8]}"
    client = NativeHBaseClient(str(hb["zk_quorum"]))
    began = time.monotonic()
    load(client, name, args.rows, args.cells, args.regions)
    print(f"loaded {name}: {args.rows} rows x {args.cells} cells in {args.regions} regions "
          f"({time.monotonic() - began:.1f} s)")  # fmt: skip

    rows, cells, secs = scan_baseline(client, name)
    print(f"baseline scan (1 process, raw, no Kafka): {rows} rows, {cells} cells in {secs:.1f} s = "
          f"{rows / secs:,.0f} rows/s, {cells / secs:,.0f} cells/s")  # fmt: skip

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, master in enumerate(m.strip() for m in args.masters.split(",")):
            prefix = f"{name}_{i}"
            config = Path(tmp) / f"{prefix}.yaml"
            config.write_text(yaml.safe_dump({
                "kafka": {"bootstrap_servers": bootstrap},
                "hbase": {"name": "bench", "zk_quorum": hb["zk_quorum"], "topic_prefix": prefix,
                          "peer": {"peer_id": prefix, "znode_parent": f"/{prefix}"},
                          "backfill": {"progress_topic": f"{prefix}-backfill", "spark_master": master}},
            }))  # fmt: skip
            t0 = time.monotonic()
            proc = subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "hbase", "backfill", name, "--config",
                                   str(config)], capture_output=True, text=True, check=False)  # fmt: skip
            wall = time.monotonic() - t0
            if proc.returncode != 0:
                sys.exit(f"backfill failed:\n{proc.stderr[-3000:]}")
            subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "hbase", "peer", "remove", "--config",
                            str(config)], capture_output=True, check=False)  # fmt: skip
            stamps = re.findall(r"^(\S+ \S+) INFO .*?(tasks on local|tasks on spark|regions read)", proc.stderr, re.M)
            t_start, t_end = (time.mktime(time.strptime(s[0].split(",")[0], "%Y-%m-%d %H:%M:%S")) +
                              int(s[0].split(",")[1]) / 1000 for s in stamps[:2])  # fmt: skip
            tasks = t_end - t_start
            done = re.search(r"done, \d+/\d+ regions done, (\d+) rows, (\d+) cells", proc.stdout)
            assert done, proc.stdout
            b_rows, b_cells = int(done.group(1)), int(done.group(2))
            topic = f"{prefix}.default.{name}"
            records = sum(end_offsets(bootstrap, topic).values())
            results.append((master, wall, tasks, b_rows, b_cells, records))
            print(f"backfill on {master}: {b_rows} rows, {b_cells} cells, {records} records; wall {wall:.1f} s "
                  f"({b_rows / wall:,.0f} rows/s), region tasks {tasks:.1f} s ({b_rows / tasks:,.0f} rows/s, "
                  f"{b_cells / tasks:,.0f} cells/s)")  # fmt: skip

    sample = tail(bootstrap, f"{name}_0.default.{name}", 200)
    size = sum(len(r.value or b"") for r in sample) // max(len(sample), 1)
    secs = produce_baseline(bootstrap, rows, size)
    print(f"baseline produce (raw confluent-kafka, {rows} records of {size} bytes, 1 process): {secs:.1f} s = "
          f"{rows / secs:,.0f} records/s")  # fmt: skip
    for master, _wall, tasks, b_rows, _cells, _records in results:
        print(f"ratio backfill region tasks on {master} / raw produce: {(b_rows / tasks) / (rows / secs):.2f}")
    client.delete_table(name)
    client.close()


if __name__ == "__main__":
    main()
