"""Where a streaming batch's time goes, per query: Spark's own breakdown (durationMs: addBatch,
walCommit, commitOffsets, ...) summed over the batches of an availableNow run, for the raw
Kafka → Parquet baseline and for sinks run through cdcflow's Pipeline, round after round in one
Spark session over the same records. `addBatch` is the sink's whole foreachBatch (parse, dedupe,
dead letters, apply); the rest is Structured Streaming's own bookkeeping, which the baseline pays
too. Good for A/B runs of the common path (run it on the old and the new code, same topics).

Against a running stack (`make stack-up`): fills new topics like `pipeline_apply.py` (the demo
workload through a cdcflow peer), or reads the topics of --pattern, filled before (same records
for an A/B run).

Usage: .venv/bin/python benchmarks/pipeline_batch_times.py --pattern 'bench1234\\..*' [--sinks parquet,hbase]
           [--max-offsets 20000] [--rounds 3] [--stack-home DIR] [--fill N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from machine import machine_summary  # type: ignore[import-not-found]
from pipeline_apply import fill  # type: ignore[import-not-found]

from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.queries import Query
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session


def summary(label: str, progresses: list[dict[str, Any]], wall: float) -> str:
    sums: dict[str, float] = {}
    for p in progresses:
        for key, ms in (p.get("durationMs") or {}).items():
            sums[key] = sums.get(key, 0.0) + ms / 1000
    rows = sum(int(p.get("numInputRows") or 0) for p in progresses)
    parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(sums.items()) if k != "triggerExecution")
    return f"  {label:16} wall {wall:6.2f} s, {len(progresses)} batches, {rows} rows; seconds: {parts}"


class _RecordingPipeline(Pipeline):
    """A Pipeline that keeps every StreamingQueryProgress of its queries."""

    progresses: list[dict[str, Any]]

    def _query_progress(self, r: Query) -> None:
        if r.query is not None:
            seen = {p["batchId"] for p in self.progresses}
            self.progresses += [p for p in r.query.recentProgress if p["batchId"] not in seen and p["numInputRows"]]
        super()._query_progress(r)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pattern", help="the topics (a Java regex); default: fill new ones (--fill)")
    ap.add_argument("--fill", type=int, default=100_000, help="mutations to fill new topics with, without --pattern")
    ap.add_argument("--sinks", default="parquet,hbase")
    ap.add_argument("--max-offsets", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="the first round warms up")
    ap.add_argument("--stack-home", type=Path, default=None)
    args = ap.parse_args()
    stack = Stack(args.stack_home or default_stack_home())
    zk, bootstrap = stack.endpoints("hbase")["zk_quorum"], stack.endpoints("kafka")["bootstrap_servers"]
    work = Path(tempfile.mkdtemp(prefix="cdcflow-batch-times-"))
    pattern = args.pattern
    if not pattern:
        name = f"bt{uuid.uuid4().hex[:6]}"
        fill(name, args.fill, zk, bootstrap, work)
        pattern = f"{name}\\..*"
    spark = build_session("cdcflow-batch-times")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}")
    print(f"topics {pattern}, maxOffsetsPerTrigger {args.max_offsets}; round 1 warms up")
    options = {
        "parquet": lambda w: {"path": str(w / "parquet")},
        "hbase": lambda w: {},
        "delta": lambda w: {"path": str(w / "state")},
        "delta_changelog": lambda w: {"path": str(w / "changelog")},
    }
    for n in range(1, args.rounds + 1):
        print(f"round {n}")
        where = work / f"round{n}"
        started = time.perf_counter()
        query = (
            spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribePattern", pattern).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(args.max_offsets)).load()
            .writeStream.format("parquet").option("path", str(where / "baseline"))
            .option("checkpointLocation", str(where / "baseline-checkpoint")).trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        print(summary("baseline (raw)", batches, time.perf_counter() - started), flush=True)
        for sink in args.sinks.split(","):
            cfg = PipelineConfig(
                topics=pattern, max_offsets_per_trigger=args.max_offsets, dead_letter_topic=f"{pattern[:8]}-dead",
                sinks=(SinkConfig(name=sink, type=sink, options=options[sink](where)),),  # type: ignore[arg-type]
            )  # fmt: skip
            pipeline = _RecordingPipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": zk}, where / sink)
            pipeline.progresses = []
            started = time.perf_counter()
            result = pipeline.run(available_now=True)
            assert result[sink] == "done", result
            print(summary(f"sink {sink}", pipeline.progresses, time.perf_counter() - started), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
