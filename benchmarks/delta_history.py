"""What keeping history (SCD type 2) costs a Delta sink, beside Delta's documented SCD type 2 MERGE, on the same
events, in one Spark session (local[2]).

MySQL-shaped change events of one table, each change its own transaction (positions [seq, 1, 0]): N inserts, then
update rounds at random keys, then deletes; no key changes twice in one batch, so the docs' MERGE (one change per
key per batch) applies them exactly. The batches are built once as raw Kafka-shaped records (value bytes) and
kept in memory, and every contender starts from them:

1. docs SCD2: the SCD type 2 MERGE from Delta's documentation written plainly (the changed rows' new versions
   staged with a null merge key so they insert, every change staged with its key so it ends the current
   version; a delete ends it too), one MERGE per batch;
2. cdcflow, history off: a `delta` sink in this process, each batch appended, then folded every `--fold-every`
   batches (default: as the sink's `fold_rows` default would) and at the end; append and fold times apart;
3. cdcflow, history on: the same with `history: true`.

Goals: (3) at least 2x the docs SCD2's throughput (both end with an exact history); its folds at most 1.3x
those of (2). Then a point-in-time read of the table (`cdcflow.as_of` at a position among the updates) against
reading its current view, every row and column computed (a hash of each row, summed), median of three; goal at most
2x. Checked: cdcflow's history equals the docs table version by version, and as_of equals the docs table's
versions valid at that position.

Against the local stack's Kafka for the typed table's schema history (`make stack-up kafka` first).

Usage: .venv/bin/python benchmarks/delta_history.py [--rows 200000] [--rounds 4] [--deletes 2000]
           [--batch 20000] [--fold-every N] [--repeat 1]
The batches are kept in the driver: give it the memory (SPARK_DRIVER_MEMORY=6g for a million rows).
"""

from __future__ import annotations

import argparse
import json
import logging
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

from cdcflow.clients import kafka as k
from cdcflow.config.paths import default_stack_home
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.dev.stack import Stack
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.jars import versions
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.library import as_of, history
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.delta.views import current_view

SOURCE, DB, TABLE = "benchh", "shop", "items"
COLUMNS = [("id", "BIGINT"), ("qty", "INT"), ("price", "DECIMAL(12,2)"), ("name", "VARCHAR(64)")]
BASE_TS = 1_750_000_000_000
ENVELOPE = "op string, key string, after string, source struct<pos:array<bigint>,ts_ms:bigint>"
DOCS_TABLE = (
    "id bigint, qty int, price decimal(12,2), name string, current boolean, start_pos array<bigint>, "
    "end_pos array<bigint>"
)
MAX = 2**63 - 1


def event(op: str, key: int, seq: int, after: dict[str, Any] | None) -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": SOURCE, "db": DB, "table": TABLE, "ts_ms": BASE_TS + seq,
                   "snapshot": False, "pos": [seq, 1, 0]},
        "ts_ms": BASE_TS + seq,
    }, separators=(",", ":")).encode()  # fmt: skip


def schema_history(bootstrap: str) -> str:
    topic = f"{SOURCE}-{uuid.uuid4().hex[:6]}-history"
    cols = [{"name": n, "type": t.split("(")[0], "sql_type": t, "nullable": n != "id", "key": n == "id",
             "key_order": 0 if n == "id" else None} for n, t in COLUMNS]  # fmt: skip
    record = {"kind": "table", "source": SOURCE, "db": DB, "table": TABLE, "columns": cols}
    k.create_topic(bootstrap, topic, partitions=1)
    k.produce_sync(bootstrap, topic, [(SOURCE.encode(), json.dumps(record).encode())])
    return topic


def generate(rows: int, rounds: int, deletes: int, batch: int) -> tuple[list[list[tuple[bytes, bytes]]], int]:
    """The batches of (key, value) records, and the position (seq) in the middle of the updates."""
    rng = random.Random(54)
    seq = 0
    batches: list[list[tuple[bytes, bytes]]] = []

    def emit(records: list[tuple[bytes, bytes]], op: str, i: int, after: dict[str, Any] | None) -> None:
        nonlocal seq
        seq += 1
        records.append((b'{"id":%d}' % i, event(op, i, seq, after)))

    for start in range(0, rows, batch):
        records: list[tuple[bytes, bytes]] = []
        for i in range(start, min(rows, start + batch)):
            emit(records, "c", i, {"id": i, "qty": i % 1000, "price": f"{i % 10000}.25", "name": f"item {i}"})
        batches.append(records)
    middle = 0
    for r in range(rounds):
        for _ in range(max(1, rows // batch)):  # every key about once a round, none twice in a batch
            records = []
            for i in rng.sample(range(rows), min(batch, rows)):
                after = {"id": i, "qty": rng.randrange(10**6), "price": f"{rng.randrange(10**6)}.50", "name": f"n{seq}"}
                emit(records, "u", i, after)
            batches.append(records)
        if r == rounds // 2:
            middle = seq
    records = []
    for i in rng.sample(range(rows), deletes):
        emit(records, "d", i, None)
    batches.append(records)
    return batches, middle or seq


def raw_frame(spark: SparkSession, records: list[tuple[bytes, bytes]]) -> DataFrame:
    frame = spark.createDataFrame(
        [("t", 0, i, key, value) for i, (key, value) in enumerate(records)],
        "topic string, partition int, offset long, key binary, value binary",
    )
    return frame.persist()


def docs_scd2(spark: SparkSession, path: str, raw: DataFrame) -> None:
    """Delta's documented SCD type 2 MERGE, for one batch (one change per key), deletes ending the version."""
    e = raw.select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e")).select("e.*")
    updates = e.select(
        F.get_json_object("key", "$.id").cast("bigint").alias("id"), "op", F.col("source.pos").alias("pos"),
        F.from_json("after", "qty int, price decimal(12,2), name string").alias("a"),
    ).select("id", "op", "pos", "a.*")  # fmt: skip
    table = DeltaTable.forPath(spark, path)
    current = table.toDF().where("current")
    same = "u.qty <=> c.qty AND u.price <=> c.price AND u.name <=> c.name"
    changed = updates.alias("u").join(current.alias("c"), "id").where(f"u.op != 'd' AND NOT ({same})")
    staged = changed.selectExpr("NULL AS merge_key", "u.*").unionByName(updates.selectExpr("id AS merge_key", "*"))
    (
        table.alias("t").merge(staged.alias("s"), "t.id = s.merge_key")
        .whenMatchedUpdate(condition="t.current AND (s.op = 'd' OR NOT (t.qty <=> s.qty AND t.price <=> s.price "
                                     "AND t.name <=> s.name))",
                           set={"current": "false", "end_pos": "s.pos"})
        .whenNotMatchedInsert(condition="s.op != 'd'",
                              values={"id": "s.id", "qty": "s.qty", "price": "s.price", "name": "s.name",
                                      "current": "true", "start_pos": "s.pos", "end_pos": "NULL"})
        .execute()
    )  # fmt: skip


def run_docs(spark: SparkSession, work: Path, raws: list[DataFrame]) -> tuple[float, str]:
    path = str(work / "docs-scd2")
    spark.sql(f"CREATE TABLE delta.`{path}` ({DOCS_TABLE}) USING delta")
    started = time.perf_counter()
    for raw in raws:
        docs_scd2(spark, path, raw)
    return time.perf_counter() - started, path


def run_cdcflow(
    spark: SparkSession, work: Path, raws: list[DataFrame], bootstrap: str, history_topic: str, keep_history: bool,
    fold_every: int,
) -> tuple[float, float, str]:  # fmt: skip
    """(append seconds, fold seconds, state path)."""
    options = DeltaStateOptions(
        path=str(work / ("with-history" if keep_history else "without")), history=keep_history,
        fold_rows=10**12, fold_interval_s=10**9, register_in_catalog=False, schema_history_topic=history_topic,
    )  # fmt: skip
    sink = DeltaStateSink("bench", options, Endpoints(bootstrap_servers=bootstrap))
    appended = folded = 0.0
    for i, raw in enumerate(raws):
        started = time.perf_counter()
        sink.apply_batch(events_of(parse(raw)), i)
        appended += time.perf_counter() - started
        if (i + 1) % fold_every == 0 or i == len(raws) - 1:
            started = time.perf_counter()
            sink.flush(spark)
            folded += time.perf_counter() - started
    sink.close()
    return appended, folded, sink.table_path(SOURCE, DB, TABLE)


def check(spark: SparkSession, docs: str, state: str, middle: int) -> None:
    def versions(frame: DataFrame, start: str, end: str) -> DataFrame:
        return frame.selectExpr("id", "qty", "CAST(price AS STRING) AS price", "name", f"{start}[0] AS start",
                                f"{end}[0] AS ends")  # fmt: skip

    ours = versions(history(spark, state), "_cdcflow_valid_from_pos", "_cdcflow_valid_to_pos")
    theirs = versions(spark.read.format("delta").load(docs), "start_pos", "end_pos")
    assert ours.count() == theirs.count() and ours.exceptAll(theirs).isEmpty(), "cdcflow's history differs"
    at = f"array(CAST({middle} AS BIGINT), CAST({MAX} AS BIGINT))"
    then = spark.read.format("delta").load(docs).where(f"start_pos <= {at} AND (end_pos IS NULL OR end_pos > {at})")
    read = as_of(spark, state, position=[middle, MAX])
    cols = "id", "qty", "CAST(price AS STRING) AS price", "name"
    assert read.count() == then.count() and read.selectExpr(*cols).exceptAll(then.selectExpr(*cols)).isEmpty()


def read_seconds(frame: DataFrame) -> float:
    """Every row and column computed: a hash of each row, summed. (Spark's noop sink refuses these plans: "Cannot
    work with a non-pinned table snapshot of the TahoeFileIndex".)"""
    started = time.perf_counter()
    frame.select(F.sum(F.hash(*frame.columns))).collect()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--deletes", type=int, default=2_000)
    parser.add_argument("--batch", type=int, default=20_000)
    # cdcflow folds when fold_rows changes are pending: every that many batches by default
    parser.add_argument("--fold-every", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    if args.fold_every is None:
        args.fold_every = max(1, int(DeltaStateOptions.model_fields["fold_rows"].default) // args.batch)
    logging.basicConfig(level=logging.WARNING)
    bootstrap = Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    spark = build_session("cdcflow-bench-history")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}")
    batches, middle = generate(args.rows, args.rounds, args.deletes, args.batch)
    events = sum(len(b) for b in batches)
    print(f"events: {events} ({args.rows} inserts, {args.rounds} rounds of updates, {args.deletes} deletes) in "
          f"{len(batches)} batches of up to {args.batch}; cdcflow folds every {args.fold_every} batches")  # fmt: skip
    raws = [raw_frame(spark, b) for b in batches]
    for raw in raws:
        raw.count()  # built before any timing
    history_topic = schema_history(bootstrap)
    results: dict[str, list[float]] = {}
    for round_no in range(args.repeat + 1):  # round 0 warms the JVM up and is not counted
        with tempfile.TemporaryDirectory(prefix="cdcflow-history-") as tmp:
            work = Path(tmp)
            docs, docs_path = run_docs(spark, work, raws)
            off_append, off_fold, _ = run_cdcflow(spark, work, raws, bootstrap, history_topic, False, args.fold_every)
            on_append, on_fold, state = run_cdcflow(spark, work, raws, bootstrap, history_topic, True, args.fold_every)
            check(spark, docs_path, state, middle)
            reads: dict[str, list[float]] = {"as_of": [], "current": []}
            for _ in range(3):
                reads["current"].append(read_seconds(current_view(spark, state)))
                reads["as_of"].append(read_seconds(as_of(spark, state, position=[middle, MAX])))
        as_of_s, current_s = statistics.median(reads["as_of"]), statistics.median(reads["current"])
        print(f"round {round_no}{' (warm-up)' if round_no == 0 else ''}: docs SCD2 {docs:.1f} s; cdcflow without "
              f"history {off_append + off_fold:.1f} s (append {off_append:.1f}, folds {off_fold:.1f}); with history "
              f"{on_append + on_fold:.1f} s (append {on_append:.1f}, folds {on_fold:.1f}); read of {args.rows:,} rows "
              f"as of a position {as_of_s:.2f} s, current view {current_s:.2f} s", flush=True)  # fmt: skip
        if round_no == 0 and args.repeat:
            continue
        for key, value in (("docs", docs), ("on", on_append + on_fold), ("on_fold", on_fold), ("off_fold", off_fold),
                           ("as_of", as_of_s), ("current", current_s)):  # fmt: skip
            results.setdefault(key, []).append(value)

    def med(key: str) -> float:
        return statistics.median(results[key])

    print("\nmedians:")
    print(f"  history kept by cdcflow: {events / med('on'):,.0f} events/s; docs SCD2 MERGE {events / med('docs'):,.0f} "
          f"events/s: cdcflow is {med('docs') / med('on'):.2f}x it (goal >= 2x)")  # fmt: skip
    print(f"  folds with history {med('on_fold'):.1f} s, without {med('off_fold'):.1f} s: "
          f"{med('on_fold') / med('off_fold'):.2f}x (goal <= 1.3x)")  # fmt: skip
    print(f"  as of a position {med('as_of'):.2f} s vs the current view {med('current'):.2f} s: "
          f"{med('as_of') / med('current'):.2f}x (goal <= 2x)")  # fmt: skip


if __name__ == "__main__":
    main()
