"""Benchmark of the pipeline's apply throughput per sink.

Against the local stack's real HBase and Kafka (`make stack-up` first):

1. fill: the demo workload (`cdcflow.dev.demo.hbase_workload`: puts of 1-4 columns, every delete type, versions
   out of order) writes N mutations to 3 HBase tables; the cdcflow peer captures them into Kafka.
2. warm-up (untimed): the baseline and every sink once, so the JVM's JIT and Spark's caches are
   warm for everyone and no figure carries the first run's start-up cost.
3. rounds: the baseline, a plain Spark Structured Streaming job (Kafka → Parquet append of the raw
   records, no parsing), then each sink alone, in the same Spark session, each on a fresh checkpoint
   and fresh tables over the same records, as in production: parse + dead-letter split (the sink's
   query writes the dead letters, decision 0009) + dedupe + the sink's apply. rows/s = change events /
   wall time of the availableNow run. Each sink's ratio is taken against the baseline of its round.

Usage: .venv/bin/python benchmarks/pipeline_apply.py [--mutations 100000] [--sinks hbase,delta,...]
           [--max-offsets 20000,200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from machine import machine_summary  # type: ignore[import-not-found]
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import connect
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.demo.hbase_workload import TYPED_COLUMNS, HBaseWorkload
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session

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


def run_sink(sink: str, options: dict[str, Any], name: str, max_offsets: int, context: dict[str, Any],
             checkpoints: Path) -> float:  # fmt: skip
    cfg = PipelineConfig(
        topics=f"{name}\\..*", max_offsets_per_trigger=max_offsets,
        sinks=(SinkConfig(name=sink, type=sink, options=options),),  # type: ignore[arg-type]
    )  # fmt: skip
    started = time.perf_counter()
    result = Pipeline(cfg, context, checkpoints).run(available_now=True)
    assert all(state == "done" for state in result.values()), result
    return time.perf_counter() - started


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} [{min(values):5.2f}-{max(values):5.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutations", type=int, default=100_000)
    ap.add_argument("--sinks", default="parquet,hbase,delta,delta_changelog")
    ap.add_argument("--max-offsets", default="20000,200000", help="maxOffsetsPerTrigger values, comma-separated")
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per maxOffsetsPerTrigger value")
    ap.add_argument("--max-versions", type=int, default=1, help="the delta sink's max_versions (its default: 1)")
    ap.add_argument("--stack-home", type=Path, default=None, help="the running stack (default: cdcflow's default)")
    ap.add_argument("--verbose", action="store_true", help="log each sink batch (INFO) while timing")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    if args.verbose:
        logging.getLogger("cdcflow").setLevel(logging.INFO)
    stack = Stack(args.stack_home or default_stack_home())
    zk, bootstrap = stack.endpoints("hbase")["zk_quorum"], stack.endpoints("kafka")["bootstrap_servers"]
    name = f"bench{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-bench-"))
    topics = fill(name, args.mutations, zk, bootstrap, workdir)
    events = sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics)
    dead_letter_topic = f"{name}-dead-letters"
    k.create_topic(bootstrap, dead_letter_topic, partitions=1)
    context = {"bootstrap_servers": bootstrap, "zk_quorum": zk, "dead_letter_topic": dead_letter_topic}
    sinks = args.sinks.split(",")

    spark = build_session("cdcflow-bench")
    spark.sparkContext.setLogLevel("ERROR")
    run_no = 0

    def fresh() -> Path:
        nonlocal run_no
        run_no += 1
        return workdir / f"run{run_no}"

    def options(sink: str, where: Path) -> dict[str, Any]:
        return {
            "parquet": {"path": str(where / "parquet")},
            "hbase": {},
            "delta": {"path": str(where / "state"), "max_versions": args.max_versions, "typed_columns": TYPED_COLUMNS},
            "delta_changelog": {"path": str(where / "changelog")},
        }[sink]

    def baseline(max_offsets: int) -> float:
        return raw_kafka_to_parquet_seconds(spark, bootstrap, f"{name}\\..*", max_offsets, fresh())

    def sink_seconds(sink: str, max_offsets: int) -> float:
        where = fresh()
        return run_sink(sink, options(sink, where), name, max_offsets, context, where / "checkpoints")

    print("warm-up (untimed): the baseline and each sink once", flush=True)
    baseline(200_000)
    for sink in sinks:
        sink_seconds(sink, 200_000)

    print(f"machine: {machine()}")
    print(f"records: {events} change events in {len(topics)} topics (3 tables x 5000 rows; "
          f"delta max_versions {args.max_versions}); dead letters written by the sink query; "
          f"{args.rounds} rounds after a warm-up")  # fmt: skip
    for max_offsets in (int(m) for m in args.max_offsets.split(",")):
        seconds: dict[str, list[float]] = {"baseline": [], **{s: [] for s in sinks}}
        ratios: dict[str, list[float]] = {s: [] for s in sinks}
        for _ in range(args.rounds):
            base = baseline(max_offsets)
            seconds["baseline"].append(base)
            for sink in sinks:
                took = sink_seconds(sink, max_offsets)
                seconds[sink].append(took)
                ratios[sink].append(base / took)
        print(f"maxOffsetsPerTrigger {max_offsets}: seconds and ratio to the baseline of the same round, "
              "median [min-max]")  # fmt: skip
        print(f"  {'baseline: Kafka → Parquet, raw':34} {spread(seconds['baseline'])} s "
              f"{events / statistics.median(seconds['baseline']):9.0f} rows/s")  # fmt: skip
        for sink in sinks:
            rate = events / statistics.median(seconds[sink])
            print(f"  {'sink ' + sink:34} {spread(seconds[sink])} s {rate:9.0f} rows/s   ratio {spread(ratios[sink])}")
        sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    main()
