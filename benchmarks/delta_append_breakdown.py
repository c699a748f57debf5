"""Where the Delta sink's append path spends its time, step by step, over the same change events in one session.

Each step adds one thing to the one before, as its own Structured Streaming query (foreachBatch, batches of
`--max-offsets`, trigger availableNow, fresh checkpoint and paths each round):

1. raw copy: the Kafka records to Parquet as they are (`spark_baseline`, the anchor);
2. parse: the envelope parsed (`envelope.parse`, usable events) and written to Parquet;
3. log rows: the change log's rows (`log.changelog_rows`), partitioned by source table like the log;
4. Delta, column statistics on: the same rows appended to a Delta table made as Delta makes one by default
   (statistics on its first 32 columns), Change Data Feed on;
5. Delta, as the change log is made (`log.ensure_log`);
6. the `delta` sink through cdcflow's runner (the pipeline, folds held back: the append path up to the last
   applied batch, then the final fold of everything).

Round 0 warms the JVM up and is not counted; the medians of the others are printed with each step's ratio to
the raw copy. Needs the local stack's Kafka (`cdcflow stack up kafka`).

Usage: .venv/bin/python benchmarks/delta_append_breakdown.py [--rows 200000] [--updates 80000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from delta.tables import DeltaTable
from delta_merge_on_read import DB, cdcflow_seconds, produce  # type: ignore[import-not-found]
from machine import machine_summary  # type: ignore[import-not-found]
from pyspark.sql import DataFrame, SparkSession
from spark_baseline import foreach_batch_seconds, raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.log import PARTITIONS, changelog_rows, ensure_log

Step = Callable[[DataFrame, int], None]


def steps(spark: SparkSession, work: Path) -> dict[str, Step]:
    def parsed(frame: DataFrame, _batch: int) -> None:
        events_of(parse(frame)).write.mode("append").parquet(str(work / "parsed"))

    def log_rows(frame: DataFrame, batch: int) -> None:
        rows = changelog_rows(events_of(parse(frame)), batch)
        rows.write.mode("append").partitionBy(*PARTITIONS).parquet(str(work / "rows"))

    def delta(path: Path, made_as_log: bool) -> Step:
        def append(frame: DataFrame, batch: int) -> None:
            rows = changelog_rows(events_of(parse(frame)), batch)
            if not DeltaTable.isDeltaTable(spark, str(path)):
                if made_as_log:
                    ensure_log(spark, str(path), rows.schema)
                else:
                    (DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(rows.schema)
                     .partitionedBy(*PARTITIONS).property("delta.enableChangeDataFeed", "true").execute())  # fmt: skip
            rows.write.format("delta").mode("append").option("mergeSchema", "true").save(str(path))

        return append

    return {
        "parse → Parquet": parsed,
        "log rows → Parquet (partitioned)": log_rows,
        "log rows → Delta, default statistics": delta(work / "delta-default", made_as_log=False),
        "log rows → Delta, made as the log": delta(work / "delta-log", made_as_log=True),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=80_000)
    parser.add_argument("--deletes", type=int, default=2_000)
    parser.add_argument("--max-offsets", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bootstrap = Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    spark = build_session("cdcflow-bench-append-breakdown")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}, "
          f"Kafka {versions.KAFKA_VERSION}")  # fmt: skip
    events = args.rows + args.updates + args.deletes
    print(f"events: {events} ({args.rows} inserts, {args.updates} updates, {args.deletes} deletes, one table), "
          f"batches of {args.max_offsets}")  # fmt: skip
    prefix = f"apb{uuid.uuid4().hex[:6]}"
    produce(bootstrap, prefix, 1, args.rows, args.updates, args.deletes)
    pattern = f"{prefix}\\.{DB}\\..*"
    results: dict[str, list[float]] = {}
    for round_no in range(args.rounds + 1):  # round 0 warms the JVM up and is not counted
        with tempfile.TemporaryDirectory(prefix="cdcflow-apb-") as tmp:
            work = Path(tmp)
            took = {"raw copy": raw_kafka_to_parquet_seconds(spark, bootstrap, pattern, args.max_offsets, work / "raw")}
            for n, (name, step) in enumerate(steps(spark, work).items()):
                took[name] = foreach_batch_seconds(spark, bootstrap, pattern, args.max_offsets, work / f"step{n}", step)
            total, append, batches = cdcflow_seconds(bootstrap, pattern, prefix, args.max_offsets, work,
                                                     fold_interval_s=1e9, fold_rows=10**12)  # fmt: skip
            took["delta sink, append path (runner)"] = append
            took["delta sink, final fold"] = total - append
        print(
            f"round {round_no}{' (warm-up)' if round_no == 0 else ''}: "
            + "; ".join(f"{name} {s:.1f} s" for name, s in took.items())
            + f" ({batches} batches)",
            flush=True,
        )
        if round_no:
            for name, s in took.items():
                results.setdefault(name, []).append(s)
    raw = statistics.median(results["raw copy"])
    print("\nmedians:")
    for name, values in results.items():
        s = statistics.median(values)
        print(f"  {name:40s} {s:6.1f} s  {events / s:9,.0f} events/s  {raw / s:5.2f} of the raw copy")


if __name__ == "__main__":
    main()
