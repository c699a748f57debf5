"""Where a sink batch's time goes: the steps every sink's batch shares, timed one by one in batch
mode (spark.read of the same Kafka records, warm: each step runs 3 times, the last is printed).

Against the local stack's real HBase and Kafka (`cdcflow stack up kafka hbase`): fills the topics
like `pipeline_apply.py`, then times

  raw → parquet                   the baseline's work (what `pipeline_apply.py` compares against)
  parse → parquet                 `envelope.parse` (one from_json per record) and the validity split
  parse + dedupe → parquet        plus the dedupe shuffle
  ... + persist + stats           plus what the runner does for every sink (persist, count, max ts)
  Delta MERGE of 1,000 rows       the fixed cost of one small MERGE into a Delta table

then, for one batch of 20,000 events (the last fifth of each partition, parsed and deduplicated
once and kept in memory) after the first four fifths are in the changelog (the floor
of a sink that must not write a change twice):

  raw → parquet                   what the baseline does per batch
  parquet append                  the parquet sink's write alone
  Delta append                    a blind Delta append (no duplicate check)
  changelog MERGE                 the delta_changelog sink's apply (insert-only MERGE on the event identity,
                                  bounded by the batch's source times)
  anti-join + idempotent append   the alternative: the batch minus stored identities (same time bound),
                                  appended with txnAppId/txnVersion

With --mysql-formats N (needs `cdcflow stack up kafka mariadb registry`) it instead captures one
MySQL backlog of about N row changes in each output format (cdcflow JSON, debezium JSON with Connect schemas,
debezium Avro with the registry) and times, per format, the raw copy and the pipeline's parse (for the
debezium formats: the transcoding into cdcflow events, then the parse) into parquet.

Usage: .venv/bin/python benchmarks/pipeline_breakdown.py [--mutations 100000] [--stack-home DIR]
       .venv/bin/python benchmarks/pipeline_breakdown.py --mysql-formats 100000
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from machine import machine_summary  # type: ignore[import-not-found]
from pipeline_apply import fill  # type: ignore[import-not-found]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdcflow.config.paths import default_stack_home
from cdcflow.config.sinks import DeltaChangelogOptions
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import dedupe, events_of, parse
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.changelog import IDENTITY, DeltaChangelogSink, changelog_rows
from cdcflow.pipeline.sinks.delta.tables import ensure_table

# sinks made directly, outside a pipeline: Kafka is not read by what these tests do with them
NO_ENDPOINTS = Endpoints(bootstrap_servers="unused:9092")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mutations", type=int, default=100_000)
    ap.add_argument("--stack-home", type=Path, default=None)
    ap.add_argument("--mysql-formats", type=int, default=0, metavar="ROWS",
                    help="time the parse of a MySQL backlog captured in each output format instead")  # fmt: skip
    args = ap.parse_args()
    stack = Stack(args.stack_home or default_stack_home())
    if args.mysql_formats:
        mysql_formats(stack, args.mysql_formats)
        return
    zk, bootstrap = stack.endpoints("hbase")["zk_quorum"], stack.endpoints("kafka")["bootstrap_servers"]
    name = f"brk{uuid.uuid4().hex[:6]}"
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-breakdown-"))
    fill(name, args.mutations, zk, bootstrap, workdir)
    spark = build_session("cdcflow-breakdown")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}")
    outputs = iter(range(1_000_000))

    def raw() -> DataFrame:
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribePattern", f"{name}\\..*").option("startingOffsets", "earliest").load())  # fmt: skip

    def out() -> str:
        return str(workdir / f"out{next(outputs)}")

    def timed(label: str, step: Callable[[], object]) -> None:
        for _ in range(3):
            started = time.perf_counter()
            step()
            seconds = time.perf_counter() - started
        print(f"  {label:44} {seconds:6.2f} s", flush=True)

    def with_stats() -> None:
        batch = dedupe(parse(raw())).persist()
        batch.agg(F.count(F.lit(1)), F.max("source.ts_ms")).first()
        events_of(batch).write.parquet(out())
        batch.unpersist()

    table = str(workdir / "delta")
    rows = spark.range(1000).selectExpr("id", "cast(id as string) as v")
    target = ensure_table(spark, table, rows.schema)
    print(f"{args.mutations} change events, batch mode, seconds of the third run:")
    timed("raw → parquet", lambda: raw().write.parquet(out()))
    timed("parse → parquet", lambda: events_of(parse(raw())).write.parquet(out()))
    timed("parse + dedupe → parquet", lambda: events_of(dedupe(parse(raw()))).write.parquet(out()))
    timed("parse + dedupe + persist + stats → parquet", with_stats)
    timed("Delta MERGE of 1,000 rows", lambda: target.alias("t").merge(rows.alias("s"), "t.id = s.id")
          .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())  # fmt: skip

    batch_floor(spark, raw, workdir, out, timed)


def batch_floor(spark: SparkSession, raw: Callable[[], DataFrame], workdir: Path, out: Callable[[], str],
                timed: Callable[[str, Callable[[], object]], None]) -> None:  # fmt: skip
    events = events_of(dedupe(parse(raw())))
    last = events.groupBy("topic", "partition").agg(F.max("offset").alias("_last"))
    split = events.join(F.broadcast(last), ["topic", "partition"])
    late = F.col("offset") >= F.col("_last") * 0.8
    earlier = split.where(~late).drop("_last").persist()
    batch = split.where(late).drop("_last").persist()
    raw_batch = raw().join(F.broadcast(last), ["topic", "partition"]).where(late).drop("_last").persist()
    print(f"one batch of {batch.count()} events after {earlier.count()} ({raw_batch.count()} raw records); third run:")
    changelogs = iter(range(1_000_000))

    def changelog() -> str:  # a fresh changelog holding the earlier events
        path = str(workdir / f"changelog{next(changelogs)}")
        DeltaChangelogSink("bench", DeltaChangelogOptions(path=path), NO_ENDPOINTS).apply_batch(earlier, 0)
        return path

    def merge() -> None:
        path = changelog()
        started = time.perf_counter()
        DeltaChangelogSink("bench", DeltaChangelogOptions(path=path), NO_ENDPOINTS).apply_batch(batch, 1)
        took.append(time.perf_counter() - started)

    def anti_join_append() -> None:
        path = changelog()
        started = time.perf_counter()
        rows = changelog_rows(batch, 1)
        lo, hi = rows.agg(F.min("source_ts_ms"), F.max("source_ts_ms")).first()  # type: ignore[misc]
        stored = spark.read.format("delta").load(path).where(F.col("source_ts_ms").between(lo, hi)).select(*IDENTITY)
        (rows.join(stored, list(IDENTITY), "left_anti").write.format("delta").mode("append")
         .option("txnAppId", "bench").option("txnVersion", 1).save(path))  # fmt: skip
        took.append(time.perf_counter() - started)

    timed("raw → parquet", lambda: raw_batch.write.parquet(out()))
    timed("parquet append", lambda: batch.write.parquet(out()))
    timed("Delta append", lambda: changelog_rows(batch, 1).write.format("delta").save(out()))
    for label, step in (("changelog MERGE", merge), ("anti-join + idempotent append", anti_join_append)):
        took: list[float] = []
        for _ in range(3):  # the fill of a fresh changelog is not part of the figure
            step()
        print(f"  {label:44} {took[-1]:6.2f} s", flush=True)


def mysql_formats(stack: Stack, rows: int) -> None:
    """The goal: parsing Avro costs at most half of parsing the same events as JSON; parquet on Avro
    events at least 0.7 of the raw copy."""
    from mysql_capture import OUTPUTS, capture_once, write_workload  # type: ignore[import-not-found]
    from pyspark.sql.avro.functions import from_avro

    from cdcflow.clients.mysql import execute, query
    from cdcflow.dev.testing.mysql import admin_endpoint
    from cdcflow.pipeline.debezium_avro import writer_schemas
    from cdcflow.pipeline.debezium_input import transcoded

    mariadb, bootstrap = stack.endpoints("mariadb"), str(stack.endpoints("kafka")["bootstrap_servers"])
    registry = stack.endpoints("registry")["url"]
    admin = admin_endpoint(mariadb)
    db = f"brk_{uuid.uuid4().hex[:6]}"
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id BIGINT PRIMARY KEY, n INT, name VARCHAR(64), "
            "amount DECIMAL(12,2), at DATETIME(6), body TEXT, ratio DOUBLE, flag TINYINT UNSIGNED, day DATE, "
            "tag VARCHAR(32)) DEFAULT CHARSET=utf8mb4")  # fmt: skip
    (start,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    changes = write_workload(admin, db, rows * 10 // 17, rows * 5 // 17, rows * 2 // 17)
    (end,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    topics = {}
    for fmt in OUTPUTS:
        events, seconds, _pairs, topic = capture_once(mariadb, bootstrap, db, start, end, fmt, registry)
        topics[fmt] = topic
        print(f"captured {events} events as {fmt} in {seconds:.1f} s into {topic}", flush=True)
    spark = build_session("cdcflow-breakdown-formats")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]); {changes} row changes")
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-breakdown-formats-"))
    outputs = iter(range(1_000_000))
    figures: dict[str, float] = {}

    def raw(topic: str) -> DataFrame:
        return (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest").load())  # fmt: skip

    def timed(label: str, step: Callable[[], object]) -> None:
        for _ in range(3):
            started = time.perf_counter()
            step()
            seconds = time.perf_counter() - started
        figures[label] = seconds
        print(f"  {label:44} {seconds:6.2f} s", flush=True)

    for fmt, topic in topics.items():
        pattern = topic.replace(".", "\\.")

        def parsed(topic: str = topic, fmt: str = fmt, pattern: str = pattern) -> DataFrame:
            source = raw(topic)
            if fmt != "cdcflow":
                source = transcoded(source, [(pattern, "avro" if fmt.endswith("avro") else "json")], registry)
            return events_of(parse(source))

        def out() -> str:
            return str(workdir / f"o{next(outputs)}")

        timed(f"{fmt}: raw → parquet", lambda topic=topic, out=out: raw(topic).write.parquet(out()))
        timed(f"{fmt}: parse → parquet", lambda parsed=parsed, out=out: parsed().write.parquet(out()))
        if fmt == "debezium-avro":  # Spark's Avro decode alone, without turning the values into cdcflow's
            writer = next(iter(writer_schemas(registry, pattern).readable.values()))
            decode_only = raw(topic).select(from_avro(F.substring("value", 6, 1 << 30), writer.text).alias("e"))
            timed(f"{fmt}: from_avro only → parquet", lambda df=decode_only, out=out: df.write.parquet(out()))
    base = figures["cdcflow: parse → parquet"] - figures["cdcflow: raw → parquet"]
    decode = figures["debezium-avro: from_avro only → parquet"] - figures["debezium-avro: raw → parquet"]
    print(f"Spark's Avro decode alone = {decode / base:.2f}x the cdcflow JSON parse")
    for fmt in ("debezium-json", "debezium-avro"):
        cost = figures[f"{fmt}: parse → parquet"] - figures[f"{fmt}: raw → parquet"]
        share = figures[f"{fmt}: raw → parquet"] / figures[f"{fmt}: parse → parquet"]
        print(f"parse cost of {fmt} = {cost / base:.2f}x the cdcflow JSON parse; parquet on {fmt} events = "
              f"{share:.2f} of its raw copy")  # fmt: skip
    execute(admin, f"DROP DATABASE {db}")


if __name__ == "__main__":
    main()
