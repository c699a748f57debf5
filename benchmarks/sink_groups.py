"""Several sinks as one query each against the same sinks as one group (decision 0022), on the same events.

Against the local stack's real HBase and Kafka (`cdcflow stack up`):

1. fill: the demo workload writes N mutations to 3 HBase tables; the cdcflow peer captures them into Kafka
   (`pipeline_apply.fill`).
2. warm-up (untimed): each form once.
3. rounds, the order of the two forms alternating: the sinks (default hbase, delta, delta_changelog) as
   one query each, as `make run` has them, then as one group, each run `--available-now` on fresh
   checkpoints and Delta paths over the same records; and the raw copy (Kafka → Parquet, no parsing) as
   the anchor of the round. Wall time, and the machine's CPU seconds over the run (all processes, from
   /proc/stat: the Spark JVM, its Python workers, and what HBase and Kafka spend serving it).

Usage: .venv/bin/python benchmarks/sink_groups.py [--mutations 100000] [--sinks hbase,delta,delta_changelog]
           [--max-offsets 2000,20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import machine_summary  # type: ignore[import-not-found]
from pipeline_apply import fill  # type: ignore[import-not-found]
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.demo.hbase_workload import TYPED_COLUMNS
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent (user, nice, system, irq, softirq, steal), from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def measured(run: Callable[..., Any], *args: Any) -> tuple[float, float]:
    """(wall seconds, machine CPU seconds) of `run(*args)`."""
    cpu, wall = busy_seconds(), time.perf_counter()
    run(*args)
    return time.perf_counter() - wall, busy_seconds() - cpu


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):6.2f}-{max(values):6.2f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutations", type=int, default=100_000)
    ap.add_argument("--sinks", default="hbase,delta,delta_changelog")
    ap.add_argument("--max-offsets", default="2000,20000", help="maxOffsetsPerTrigger values, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--stack-home", type=Path, default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    stack = Stack(args.stack_home or default_stack_home())
    zk, bootstrap = stack.endpoints("hbase")["zk_quorum"], stack.endpoints("kafka")["bootstrap_servers"]
    name = f"groups{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-groups-"))
    topics = fill(name, args.mutations, zk, bootstrap, workdir)
    events = sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics)
    dead_letter_topic = f"{name}-dead-letters"
    k.create_topic(bootstrap, dead_letter_topic, partitions=1)
    context = {"bootstrap_servers": bootstrap, "zk_quorum": zk}
    sinks = args.sinks.split(",")
    spark = build_session("cdcflow-pipeline")
    spark.sparkContext.setLogLevel("ERROR")
    runs = 0

    def fresh() -> Path:
        nonlocal runs
        runs += 1
        return workdir / f"run{runs}"

    def options(sink: str, where: Path) -> dict[str, Any]:
        return {
            "parquet": {"path": str(where / "parquet")},
            "hbase": {},
            "delta": {"path": str(where / "state"), "typed_columns": TYPED_COLUMNS},
            "delta_changelog": {"path": str(where / "changelog")},
        }[sink]

    def pipeline(grouped: bool, max_offsets: int) -> None:
        where = fresh()
        cfg = PipelineConfig(
            topics=f"{name}\\..*", dead_letter_topic=dead_letter_topic, max_offsets_per_trigger=max_offsets,
            sinks=tuple(SinkConfig(name=s, type=s, group="all" if grouped else None, options=options(s, where))  # type: ignore[arg-type]
                        for s in sinks),
        )  # fmt: skip
        result = Pipeline(cfg, context, where / "checkpoints").run(available_now=True)
        assert all(state == "done" for state in result.values()), result

    def baseline(max_offsets: int) -> None:
        raw_kafka_to_parquet_seconds(spark, bootstrap, f"{name}\\..*", max_offsets, fresh())

    print("warm-up (untimed): each form once", flush=True)
    pipeline(False, 20_000)
    pipeline(True, 20_000)
    baseline(20_000)
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}; "
          f"Kafka {versions.KAFKA_VERSION}; HBase {versions.HBASE_VERSION}")  # fmt: skip
    print(f"records: {events} change events in {len(topics)} topics; sinks {', '.join(sinks)}; {args.rounds} rounds")
    for max_offsets in (int(m) for m in args.max_offsets.split(",")):
        walls: dict[str, list[float]] = {"apart": [], "group": [], "raw copy": []}
        cpus: dict[str, list[float]] = {"apart": [], "group": [], "raw copy": []}
        for i in range(args.rounds):
            forms = [("apart", False), ("group", True)]
            for form, grouped in forms if i % 2 == 0 else forms[::-1]:
                wall, cpu = measured(pipeline, grouped, max_offsets)
                walls[form].append(wall)
                cpus[form].append(cpu)
            wall, cpu = measured(baseline, max_offsets)
            walls["raw copy"].append(wall)
            cpus["raw copy"].append(cpu)
        print(f"maxOffsetsPerTrigger {max_offsets}: median [min-max]")
        for form in ("apart", "group", "raw copy"):
            per_k = [c / events * 1000 for c in cpus[form]]
            print(f"  {form:9} wall {spread(walls[form])} s   machine CPU {spread(cpus[form])} s   "
                  f"CPU-s per 1,000 changes {spread(per_k)}")  # fmt: skip
        ratio = [a / g for a, g in zip(walls["apart"], walls["group"], strict=True)]
        cpu_ratio = [a / g for a, g in zip(cpus["apart"], cpus["group"], strict=True)]
        print(f"  apart / group: wall {spread(ratio)}, CPU {spread(cpu_ratio)}")
        sys.stdout.flush()
    spark.stop()


if __name__ == "__main__":
    main()
