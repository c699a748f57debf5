"""Benchmark of the pipeline's apply throughput per sink (issue #4).

Against the local stack's real HBase and Kafka (`make stack-up` first):

1. fill: the demo workload (`cdcflow.demo.hbase_workload`: puts of 1-4 columns, every delete type, versions
   out of order) writes N mutations to 3 HBase tables; the cdcflow peer captures them into Kafka.
2. baseline: a plain Spark Structured Streaming job, Kafka → Parquet append of the raw records
   (no parsing), over the same topics, with an availableNow trigger.
3. each sink alone, in the same Spark session, on a fresh checkpoint, over the same records:
   parse + dead-letter split + dedupe + the sink's apply. rows/s = change events / wall time.

Usage: .venv/bin/python benchmarks/pipeline_apply.py [--mutations 100000] [--sinks hbase,delta,...]
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml
from machine import machine_summary  # type: ignore[import-not-found]
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import connect
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.demo.hbase_workload import TYPED_COLUMNS, HBaseWorkload
from cdcflow.jars import versions
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.stack import Stack

CLI = [sys.executable, "-m", "cdcflow.cli.main"]


def machine() -> str:
    return (f"{machine_summary()}; "
            f"Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}; "
            f"Kafka {versions.KAFKA_VERSION}; HBase {versions.HBASE_VERSION}")  # fmt: skip


def fill(name: str, mutations: int, zk: str, bootstrap: str, workdir: Path) -> list[str]:
    """Write the workload to HBase and wait until the peer put every change into Kafka."""
    client = connect(zk)
    tables = [f"{name}_t{i}" for i in range(3)]
    workload = HBaseWorkload(client, tables, rows_per_table=5000, seed=7)
    workload.create_tables(with_copies=True)
    cfg = workdir / "capture.yaml"
    peer = {"peer_id": name, "znode_parent": f"/{name}"}
    cfg.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap},
                                   "hbase": {"zk_quorum": zk, "topic_prefix": name, "peer": peer}}))  # fmt: skip
    subprocess.run([*CLI, "hbase", "peer", "add", "--config", str(cfg), *(f"--table={t}" for t in tables)],
                   check=True, capture_output=True)  # fmt: skip
    log = open(workdir / "peer.log", "wb")  # noqa: SIM115 - owned by the process
    proc = subprocess.Popen([*CLI, "hbase", "run", "--config", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
    topics = [f"{name}.default.{t}" for t in tables]
    try:
        started = time.perf_counter()
        workload.run(mutations)
        while sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics) < mutations:
            time.sleep(1)
        print(f"fill        : {mutations} mutations in HBase and Kafka after {time.perf_counter() - started:.1f} s")
    finally:
        proc.terminate()
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            print(f"peer did not stop within 90 s of SIGTERM (see {workdir / 'peer.log'}); killing it")
            proc.kill()
            proc.wait()
        subprocess.run([*CLI, "hbase", "peer", "remove", "--config", str(cfg)], capture_output=True)
        client.close()
    return topics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutations", type=int, default=100_000)
    ap.add_argument("--sinks", default="parquet,hbase,delta,delta_changelog")
    ap.add_argument("--max-offsets", type=int, default=200_000, help="maxOffsetsPerTrigger for every query")
    ap.add_argument("--max-versions", type=int, default=1, help="the delta sink's max_versions (its default: 1)")
    ap.add_argument("--stack-home", type=Path, default=None, help="the running stack (default: cdcflow's default)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    stack = Stack(args.stack_home or default_stack_home())
    zk, bootstrap = stack.endpoints("hbase")["zk_quorum"], stack.endpoints("kafka")["bootstrap_servers"]
    name = f"bench{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-bench-"))
    topics = fill(name, args.mutations, zk, bootstrap, workdir)
    events = sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics)

    spark = build_session("cdcflow-bench")
    spark.sparkContext.setLogLevel("ERROR")
    baseline = raw_kafka_to_parquet_seconds(spark, bootstrap, f"{name}\\..*", args.max_offsets, workdir)
    results = [("baseline: Kafka → Parquet, raw", baseline)]

    options = {
        "parquet": {"path": str(workdir / "parquet")},
        "hbase": {},
        "delta": {"path": str(workdir / "state"), "max_versions": args.max_versions, "typed_columns": TYPED_COLUMNS},
        "delta_changelog": {"path": str(workdir / "changelog")},
    }
    context = {"bootstrap_servers": bootstrap, "zk_quorum": zk}
    for sink in args.sinks.split(","):
        cfg = PipelineConfig(
            topics=f"{name}\\..*", max_offsets_per_trigger=args.max_offsets,
            sinks=(SinkConfig(name=sink, type=sink, options=options[sink]),),  # type: ignore[arg-type]
        )  # fmt: skip
        started = time.perf_counter()
        result = Pipeline(cfg, context, workdir / "checkpoints").run(available_now=True, dead_letters=False)
        assert result[sink] == "done", result
        results.append((f"sink {sink}", time.perf_counter() - started))

    print(f"machine: {machine()}")
    print(f"records: {events} change events in {len(topics)} topics (3 tables x 5000 rows; "
          f"maxOffsetsPerTrigger {args.max_offsets}; delta max_versions {args.max_versions})")  # fmt: skip
    for label, seconds in results:
        ratio = baseline / seconds
        print(f"{label:34} {seconds:7.1f} s {events / seconds:9.0f} rows/s   ratio to baseline {ratio:5.2f}")
    spark.stop()


if __name__ == "__main__":
    main()
