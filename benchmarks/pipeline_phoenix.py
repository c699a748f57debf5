"""Benchmark: MySQL change events into Phoenix, next to the Delta sink on the same events.

Against the local stack's real MariaDB, Kafka and HBase + Phoenix (`cdcflow stack up mariadb kafka
phoenix` first):

1. fill: a table with 12 typed columns (BIGINT UNSIGNED, DECIMAL, DATETIME(6), TIMESTAMP(3), TIME,
   VARCHAR, BLOB, ...) gets N inserted rows, then updates of a third of them and deletes of a tenth,
   in transactions of 1,000 rows; the MySQL capture (in this process) puts every change into Kafka.
2. baseline: a plain Spark Structured Streaming job, Kafka → Parquet append of the raw records.
3. each sink alone, in the same Spark session, on a fresh checkpoint, over the same records:
   parse + dedupe + the sink's apply. rows/s = change events / wall time.
   With --runs N, the baseline and the phoenix sink (into a new Phoenix table each time) run N
   times, alternating; the figures are the medians.
4. `verify mysql-phoenix` must find no difference in any of the Phoenix tables (a fast wrong sink
   is no result).

Usage: .venv/bin/python benchmarks/pipeline_phoenix.py [--rows 100000] [--max-offsets 200000] [--runs 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from machine import machine_summary  # type: ignore[import-not-found]
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.clients.kafka import read_latest
from cdcflow.clients.mysql import execute, query
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, source_config
from cdcflow.jars import versions
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.registry import make_sink
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.verify.phoenix import verify_mysql_phoenix

TABLE = """(
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY, name VARCHAR(60), amount DECIMAL(14,2), qty INT, ratio DOUBLE,
    created DATETIME(6), stamp TIMESTAMP(3) NULL, day DATE, dur TIME, note TEXT, data BLOB, flag TINYINT
)"""


def fill(mariadb: dict[str, str], bootstrap: str, db: str, rows: int) -> tuple[str, str, int]:
    """Write the workload and wait until the capture acknowledged all of it. Returns (topic, history, events)."""
    admin = admin_endpoint(mariadb)  # type: ignore[arg-type]
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.items {TABLE}")
    source = source_config(f"bench_{db}", [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()  # type: ignore[arg-type]
    started = time.perf_counter()
    step = 1000
    in_db = admin_endpoint(mariadb, database=db)  # type: ignore[arg-type]  # seq_* tables need a database
    for lo in range(1, rows + 1, step):
        hi = min(rows, lo + step - 1)
        execute(
            in_db,
            f"INSERT INTO {db}.items SELECT seq, CONCAT('name-', seq, '-é'), seq * 1.25, seq % 1000, seq / 7, "
            f"TIMESTAMP('2024-01-01') + INTERVAL seq * 1000 MICROSECOND, "
            f"FROM_UNIXTIME(1700000000 + seq), DATE('2000-01-01') + INTERVAL seq % 9000 DAY, SEC_TO_TIME(seq % 86400), "
            f"REPEAT('note ', seq % 20), UNHEX(SHA1(seq)), seq % 100 FROM seq_{lo}_to_{hi}",
        )
    for lo in range(1, rows + 1, step * 3):
        execute(admin, f"UPDATE {db}.items SET amount = amount + 1, note = 'updated' "
                       f"WHERE id BETWEEN {lo} AND {lo + step * 3 - 1} AND id % 3 = 0")  # fmt: skip
    execute(admin, f"DELETE FROM {db}.items WHERE id % 10 = 0")
    (gtid,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    while True:
        raw = read_latest(bootstrap, source.offsets_topic, source.name.encode())
        if raw and Checkpoint.from_bytes(raw).gtid_state == gtid:
            break
        time.sleep(0.5)
    capture.stop()
    topic = f"{source.topic_prefix}.{db}.items"
    events = sum(k.end_offsets(bootstrap, topic).values())
    print(f"fill        : {events} change events in Kafka after {time.perf_counter() - started:.1f} s")
    return topic, source.schema_history_topic, events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--max-offsets", type=int, default=200_000, help="maxOffsetsPerTrigger for every query")
    ap.add_argument("--runs", type=int, default=3, help="runs of the baseline and the phoenix sink (median)")
    ap.add_argument("--stack-home", type=Path, default=None, help="the running stack (default: cdcflow's default)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("cdcflow.pipeline.sinks.phoenix.sink").setLevel(logging.INFO)  # per-batch stage/apply times
    stack = Stack(args.stack_home or default_stack_home())
    bootstrap = stack.endpoints("kafka")["bootstrap_servers"]
    mariadb = stack.endpoints("mariadb")
    url = stack.endpoints("phoenix")["jdbc_url"]
    zk = stack.endpoints("hbase")["zk_quorum"]
    db = f"bench_{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-bench-"))
    topic, history, events = fill(mariadb, bootstrap, db, args.rows)

    context = {"bootstrap_servers": bootstrap, "zk_quorum": zk}

    def phoenix_sink(run: int) -> SinkConfig:  # a new table per run: each run inserts, as the first did
        table_map = {f"{db}.items": f"{db.upper()}.ITEMS_R{run}"}
        return SinkConfig(name="phoenix", type="phoenix", options={
            "url": url, "create_tables": True, "schema_history_topic": history, "table_map": table_map})  # fmt: skip

    delta = SinkConfig(name="delta", type="delta", options={
        "path": str(workdir / "delta"), "schema_history_topic": history})  # typed tables  # fmt: skip
    # One session for everything, with the Phoenix jars in it from the start.
    spark = build_session("cdcflow-bench", sink_jars=make_sink(phoenix_sink(0), context).jars())
    spark.sparkContext.setLogLevel("ERROR")
    pattern = topic.replace(".", "\\.")

    def run_sink(sink: SinkConfig, checkpoints: Path) -> float:
        cfg = PipelineConfig(topics=pattern, max_offsets_per_trigger=args.max_offsets, sinks=(sink,))
        started = time.perf_counter()
        result = Pipeline(cfg, context, checkpoints).run(available_now=True)
        assert result[sink.name] == "done", result
        return time.perf_counter() - started

    # the baseline once untimed first: a cold first query would flatter the sinks' ratios
    (workdir / "warm").mkdir()
    raw_kafka_to_parquet_seconds(spark, bootstrap, pattern, args.max_offsets, workdir / "warm")
    baselines, phoenix_runs = [], []
    for run in range(args.runs):
        raw = workdir / f"raw{run}"
        raw.mkdir()
        baselines.append(raw_kafka_to_parquet_seconds(spark, bootstrap, pattern, args.max_offsets, raw))
        phoenix_runs.append(run_sink(phoenix_sink(run), workdir / f"checkpoints-phoenix-{run}"))
        print(f"run {run + 1}: baseline {baselines[-1]:.1f} s, phoenix {phoenix_runs[-1]:.1f} s "
              f"(ratio {baselines[-1] / phoenix_runs[-1]:.2f})")  # fmt: skip
    baseline = statistics.median(baselines)
    results = [("baseline: Kafka → Parquet, raw", baseline), ("sink phoenix", statistics.median(phoenix_runs)),
               ("sink delta", run_sink(delta, workdir / "checkpoints-delta"))]  # fmt: skip

    reports = []
    with PhoenixJvm.launch(url) as phoenix:
        for run in range(args.runs):
            table_map = {f"{db}.items": f"{db.upper()}.ITEMS_R{run}"}
            report = verify_mysql_phoenix(admin_endpoint(mariadb), db, "items", phoenix, table_map)  # type: ignore[arg-type]
            assert report.clean, report.summary() + "\n" + "\n".join(report.examples)
            reports.append(report)
    report = reports[0]

    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}; "
          f"Kafka {versions.KAFKA_VERSION}; HBase {versions.HBASE_VERSION}; Phoenix {versions.PHOENIX_VERSION}; "
          f"MariaDB {mariadb.get('version', versions.MARIADB_SERIES)}")  # fmt: skip
    print(f"records: {events} MySQL change events (1 table, 12 typed columns; inserts, updates, deletes); "
          f"maxOffsetsPerTrigger {args.max_offsets}; runs {args.runs} (medians); verify mysql-phoenix, every "
          f"table: {report.summary()}")  # fmt: skip
    for label, seconds in results:
        print(
            f"{label:34} {seconds:7.1f} s {events / seconds:9.0f} rows/s   ratio to baseline {baseline / seconds:5.2f}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
