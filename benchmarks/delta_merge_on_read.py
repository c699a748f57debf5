"""Benchmark of the merge-on-read `delta` sink beside its anchors, on the same events.

Against the local stack's Kafka (`make stack-up kafka` first). MySQL-shaped change events of one
table (N inserts, then updates at random keys, then deletes; `cdcflow mysql`'s envelope, with a
schema-history record so the sink builds its typed table) are produced once; then, per round, on
fresh checkpoints and tables, in one Spark session (local[2]):

1. raw copy: Kafka → Parquet of the raw records (`spark_baseline`), the floor of any sink;
2. docs MERGE: the foreachBatch upsert from Delta's documentation written plainly (parse, newest per
   key, one MERGE guarded by the source position; deletes delete);
3. cdcflow: `cdcflow pipeline run --available-now` with a `delta` sink (parse, dead letters,
   dedupe, the change log's append; the final fold of every table included in its time). Its append
   path (the last batch applied) is reported beside it, and the fold's time.

Both tables are checked row by row against the state the generated events lead to.

`--tables 100` spreads the same events over 100 tables (one sink) and runs only cdcflow, to
compare its per-batch append time with the one-table run of the same round.

Usage: .venv/bin/python benchmarks/delta_merge_on_read.py [--rows 200000] [--updates 80000]
           [--deletes 2000] [--max-offsets 20000] [--rounds 3] [--tables 1,100]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from machine import machine_summary  # type: ignore[import-not-found]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from spark_baseline import foreach_batch_seconds, raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.jars import versions
from cdcflow.pipeline.progress import PROGRESS_FILE
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.views import current_view

SOURCE, DB = "bench", "shop"
COLUMNS = [("id", "BIGINT"), ("qty", "INT"), ("price", "DECIMAL(12,2)"), ("name", "VARCHAR(64)")]


def event(table: str, op: str, key: int, seq: int, after: dict[str, Any] | None) -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": SOURCE, "db": DB, "table": table, "ts_ms": int(time.time() * 1000),
                   "snapshot": False, "pos": [1, seq, 0]},
        "ts_ms": int(time.time() * 1000),
    }, separators=(",", ":")).encode()  # fmt: skip


def history(table: str) -> bytes:
    cols = [{"name": n, "type": t.split("(")[0], "sql_type": t, "nullable": n != "id", "key": n == "id",
             "key_order": 0 if n == "id" else None} for n, t in COLUMNS]  # fmt: skip
    return json.dumps({"kind": "table", "source": SOURCE, "db": DB, "table": table, "columns": cols}).encode()


def produce(
    bootstrap: str, prefix: str, tables: int, rows: int, updates: int, deletes: int
) -> dict[tuple[str, int], Any]:
    """Write the events to one topic per table; the expected final rows per (table, id)."""
    rng = random.Random(32)
    names = [f"t{i:03d}" for i in range(tables)]
    per_topic: dict[str, list[tuple[bytes, bytes]]] = {n: [] for n in names}
    expected: dict[tuple[str, int], Any] = {}
    seq = 0

    def emit(op: str, i: int, after: dict[str, Any] | None) -> None:
        nonlocal seq
        seq += 1
        table = names[i % tables]
        per_topic[table].append((b'{"id":%d}' % i, event(table, op, i, seq, after)))
        expected[(table, i)] = None if after is None else (after["qty"], after["price"], after["name"])

    for i in range(rows):
        emit("c", i, {"id": i, "qty": i % 1000, "price": f"{i % 10000}.25", "name": f"item {i}"})
    for _ in range(updates):
        i = rng.randrange(rows)
        emit("u", i, {"id": i, "qty": rng.randrange(10**6), "price": f"{rng.randrange(10**6)}.50", "name": f"n{seq}"})
    for i in rng.sample(range(rows), deletes):
        emit("d", i, None)
    k.create_topic(bootstrap, f"{prefix}-history", partitions=1)
    k.produce_sync(bootstrap, f"{prefix}-history", [(SOURCE.encode(), history(n)) for n in names])
    for name, records in per_topic.items():
        topic = f"{prefix}.{DB}.{name}"
        k.create_topic(bootstrap, topic, partitions=2)
        for start in range(0, len(records), 50_000):
            k.produce_sync(bootstrap, topic, records[start : start + 50_000], timeout_s=120)
    return {key: v for key, v in expected.items() if v is not None}


ENVELOPE = (
    "op string, key string, after string, source struct<connector:string,name:string,db:string,table:string,"
    "pos:array<bigint>,ts_ms:bigint>"
)


DOCS_TABLE = "id bigint, qty int, price decimal(12,2), name string, pos array<bigint>"


def docs_merge_seconds(
    spark: SparkSession, bootstrap: str, pattern: str, max_offsets: int, workdir: Path, create: bool = True
) -> float:
    """Delta's documented foreachBatch upsert, written the way a user would (plus the position guard);
    into <workdir>/docs-merge (created empty, or there already with `create=False`)."""
    path = str(workdir / "docs-merge")
    if create:
        spark.sql(f"CREATE TABLE delta.`{path}` ({DOCS_TABLE}) USING delta")

    def upsert(batch: DataFrame, _batch_id: int) -> None:
        e = batch.select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e")).select("e.*")
        rows = e.select(
            F.get_json_object("key", "$.id").cast("bigint").alias("id"), "op", F.col("source.pos").alias("pos"),
            F.from_json("after", "qty int, price decimal(12,2), name string").alias("a"),
        )  # fmt: skip
        latest = rows.groupBy("id").agg(F.max_by(F.struct("op", "pos", "a"), "pos").alias("n")).select("id", "n.*")
        (
            DeltaTable.forPath(spark, path).alias("t")
            .merge(latest.alias("s"), "t.id = s.id")
            .whenMatchedDelete(condition="s.op = 'd' AND s.pos > t.pos")
            .whenMatchedUpdate(condition="s.pos > t.pos",
                               set={"qty": "s.a.qty", "price": "s.a.price", "name": "s.a.name", "pos": "s.pos"})
            .whenNotMatchedInsert(condition="s.op != 'd'",
                                  values={"id": "s.id", "qty": "s.a.qty", "price": "s.a.price", "name": "s.a.name",
                                          "pos": "s.pos"})
            .execute()
        )  # fmt: skip

    return foreach_batch_seconds(spark, bootstrap, pattern, max_offsets, workdir / "docs-merge-checkpoint", upsert)


def cdcflow_seconds(
    bootstrap: str, pattern: str, prefix: str, max_offsets: int, workdir: Path, **options: Any
) -> tuple[float, float, int]:
    """(whole run incl. the final fold, the append path up to the last applied batch, batches)."""
    cfg = PipelineConfig(
        topics=pattern, dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=max_offsets,
        sinks=(SinkConfig(name="delta", type="delta",
                          options={"path": str(workdir / "cdcflow"), "schema_history_topic": f"{prefix}-history",
                                   **options}),),
    )  # fmt: skip
    checkpoints = workdir / "cdcflow-checkpoints"
    started = time.time()
    result = Pipeline(cfg, {"bootstrap_servers": bootstrap}, checkpoints).run(available_now=True)
    ended = time.time()
    assert result == {"delta": "done"}, result
    doc = json.loads((checkpoints / "delta" / PROGRESS_FILE).read_text())
    return ended - started, doc["applied_at_ms"] / 1000 - started, int(doc["batch_id"]) + 1


def check_docs(spark: SparkSession, workdir: Path, expected: dict[tuple[str, int], Any]) -> None:
    got = {("t000", r["id"]): (r["qty"], f"{r['price']:.2f}", r["name"])
           for r in spark.read.format("delta").load(str(workdir / "docs-merge")).collect()}  # fmt: skip
    assert got == {key: (q, f"{float(p):.2f}", n) for key, (q, p, n) in expected.items()}, "docs MERGE not exact"


def check_cdcflow(spark: SparkSession, workdir: Path, tables: int, expected: dict[tuple[str, int], Any]) -> None:
    got: dict[tuple[str, int], Any] = {}
    for i in range(tables):
        name = f"t{i:03d}"
        path = str(workdir / "cdcflow" / SOURCE / DB / name)
        state = spark.read.format("delta").load(path).where("NOT _cdcflow_deleted")
        view = current_view(spark, path)
        assert state.count() == view.count(), f"{name}: the state table and the view differ after the final fold"
        for r in view.collect():
            got[(name, r["id"])] = (r["qty"], f"{r['price']:.2f}", r["name"])
    assert got == {key: (q, f"{float(p):.2f}", n) for key, (q, p, n) in expected.items()}, "cdcflow not exact"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=80_000)
    parser.add_argument("--deletes", type=int, default=2_000)
    parser.add_argument("--max-offsets", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tables", default="1,100")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("cdcflow").setLevel(os.environ.get("CDCFLOW_BENCH_LOG", "WARNING"))
    bootstrap = Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    spark = build_session("cdcflow-bench-mor")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}, "
          f"Kafka {versions.KAFKA_VERSION}")  # fmt: skip
    table_counts = [int(t) for t in args.tables.split(",")]
    events = args.rows + args.updates + args.deletes
    print(f"events: {events} ({args.rows} inserts, {args.updates} updates, {args.deletes} deletes), "
          f"batches of {args.max_offsets}")  # fmt: skip
    results: dict[str, list[float]] = {}
    for tables in table_counts:
        prefix = f"mor{uuid.uuid4().hex[:6]}"
        expected = produce(bootstrap, prefix, tables, args.rows, args.updates, args.deletes)
        pattern = f"{prefix}\\.{DB}\\..*"
        for round_no in range(args.rounds + 1):  # round 0 warms the JVM up and is not counted
            with tempfile.TemporaryDirectory(prefix="cdcflow-mor-") as tmp:
                work = Path(tmp)
                raw = raw_kafka_to_parquet_seconds(spark, bootstrap, pattern, args.max_offsets, work / "raw")
                docs = None
                if tables == 1:
                    docs = docs_merge_seconds(spark, bootstrap, pattern, args.max_offsets, work)
                    check_docs(spark, work, expected)
                total, append_path, batches = cdcflow_seconds(bootstrap, pattern, prefix, args.max_offsets, work)
                check_cdcflow(spark, work, tables, expected)
            line = (f"tables={tables} round {round_no}{' (warm-up)' if round_no == 0 else ''}: raw copy {raw:.1f} s; "
                    + (f"docs MERGE {docs:.1f} s; " if docs is not None else "")
                    + f"cdcflow {total:.1f} s (append path {append_path:.1f} s over {batches} batches, "
                    f"{append_path / batches:.2f} s per batch; final fold {total - append_path:.1f} s)")  # fmt: skip
            print(line, flush=True)
            if round_no == 0:
                continue
            for key, value in (("raw", raw), ("docs", docs), ("total", total), ("append", append_path),
                               ("per_batch", append_path / batches)):  # fmt: skip
                if value is not None:
                    results.setdefault(f"{tables}:{key}", []).append(value)

    def med(key: str) -> float:
        return statistics.median(results[key])

    print("\nmedians:")
    for tables in table_counts:
        raw, total, append = med(f"{tables}:raw"), med(f"{tables}:total"), med(f"{tables}:append")
        line = (
            f"  tables={tables}: cdcflow {events / total:,.0f} events/s with the final fold, append path "
            f"{events / append:,.0f} events/s = {raw / append:.2f} of the raw copy ({events / raw:,.0f} events/s)"
        )
        if f"{tables}:docs" in results:
            docs = med(f"{tables}:docs")
            line += f"; docs MERGE {events / docs:,.0f} events/s: cdcflow is {docs / total:.2f}x it"
        print(line)
    if len(table_counts) > 1:
        one, many = med(f"{table_counts[0]}:per_batch"), med(f"{table_counts[-1]}:per_batch")
        print(f"  per-batch append time, {table_counts[-1]} tables vs {table_counts[0]}: {many:.2f} s vs {one:.2f} s "
              f"= {many / one:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
