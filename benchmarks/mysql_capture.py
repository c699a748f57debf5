"""Benchmark of the MySQL/MariaDB capture path: binlog -> change events -> Kafka acknowledgements.

Runs against the local stack's real MariaDB and Kafka (`cdcflow stack up kafka mariadb` first; the
stack home is taken from CDCFLOW__STACK__HOME or the default). In one run, on one machine:

1. a mixed-DML workload is written first (multi-row INSERTs, single-row UPDATEs in 500-row
   transactions, a large DELETE), so the capture then reads a ready binlog at full speed;
2. capture: `MySqlCapture` from the GTID before the workload until its checkpoint (every event
   acknowledged by Kafka, acks=all) reaches the last GTID; rows/s = change events / seconds;
3. baseline: the raw confluent-kafka producer sending the very same encoded events, same settings;
4. decode only: cdcflow's decoder over the same binlog, and python-mysql-replication 1.0.17 over
   the same binlog (touching every row), both without Kafka: why cdcflow has its own decoder;
5. Debezium (with --anchor-rows N): Debezium 3.5's MariaDB connector and `cdcflow mysql run` drain the
   same backlog of N row changes, --anchor-repeat times in alternating order, through the side-by-side
   kit in $CDCFLOW_ANCHORS/debezium (its README; skipped with a line saying so when it is not set up).

With --runs N the capture and the baseline run N times each; figures are median [min-max].
With --formats cdcflow,debezium-json,debezium-avro each run also captures the same backlog in the other output
formats (debezium+Avro within 0.8x of cdcflow+JSON); Avro needs the stack's registry
(`cdcflow stack up registry`).

    .venv/bin/python benchmarks/mysql_capture.py [--inserts 100000 --updates 50000 --deletes 20000]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
import uuid
from importlib.metadata import version
from pathlib import Path

import confluent_kafka
from anchors import Figures, run_kit  # type: ignore[import-not-found]
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.kafka.producer import ProducerSettings
from cdcflow.clients.mysql import BinlogStream, StreamStart, connect, execute, query
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, repl_endpoint, source_config
from cdcflow.sources.mysql.binlog.events import BinlogDecoder, RowsEvent

TABLE = """(id BIGINT PRIMARY KEY, n INT, name VARCHAR(64), amount DECIMAL(12,2), at DATETIME(6), body TEXT,
            ratio DOUBLE, flag TINYINT UNSIGNED, day DATE, tag VARCHAR(32)) DEFAULT CHARSET=utf8mb4"""


def write_workload(ep: object, db: str, inserts: int, updates: int, deletes: int) -> int:
    conn = connect(ep, autocommit=False)  # type: ignore[arg-type]
    rows = 0
    with conn.cursor() as cur:
        for start in range(0, inserts, 500):
            values = [(i, i % 1000, f"name-{i}", f"{i % 100000}.{i % 100:02d}", "2026-01-02 03:04:05.123456",
                       "body text " * 8, i / 7, i % 256, "2026-11-22", f"tag{i % 50}")
                      for i in range(start, min(start + 500, inserts))]  # fmt: skip
            cur.executemany(f"INSERT INTO {db}.t VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", values)
            conn.commit()
            rows += len(values)
        for start in range(0, updates, 500):
            for i in range(start, min(start + 500, updates)):
                cur.execute(f"UPDATE {db}.t SET n = n + 1, name = %s WHERE id = %s", (f"upd-{i}", (i * 7) % inserts))
                rows += 1
            conn.commit()
        cur.execute(f"DELETE FROM {db}.t WHERE id < %s", (deletes,))
        rows += cur.rowcount
        conn.commit()
    conn.close()
    return rows


def pymysqlreplication_only(repl: object, start: str, expected_rows: int, db: str) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    stream = BinLogStreamReader(
        connection_settings=repl.connection_settings(),  # type: ignore[attr-defined]
        server_id=910_000 + os.getpid() % 1000, auto_position=start, is_mariadb=True, blocking=True,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[db],
    )  # fmt: skip
    rows, t0 = 0, time.perf_counter()
    for event in stream:
        rows += sum(1 for r in event.rows if r)
        if rows >= expected_rows:
            break
    elapsed = time.perf_counter() - t0
    stream.close()
    return rows, elapsed


def raw_producer(bootstrap: str, values: list[tuple[bytes | None, bytes]], topic: str) -> float:
    settings = ProducerSettings(bootstrap)
    producer = confluent_kafka.Producer(settings.librdkafka_config())
    errors: list[str] = []

    def on_delivery(err: confluent_kafka.KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err.str())

    t0 = time.perf_counter()
    for key, value in values:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0 and not errors, errors[:3]
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inserts", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=50_000)
    parser.add_argument("--deletes", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=1, help="capture and baseline this many times each")
    parser.add_argument("--anchor-rows", type=int, default=0, help="also drain ROWS through the Debezium kit")
    parser.add_argument("--anchor-repeat", type=int, default=3)
    parser.add_argument("--formats", default="cdcflow", help="comma-separated: cdcflow, debezium-json, debezium-avro")
    args = parser.parse_args()
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    unknown = set(formats) - set(OUTPUTS)
    if unknown or formats[0] != "cdcflow":
        parser.error(f"--formats: choose from {', '.join(OUTPUTS)}, cdcflow first (got {args.formats})")
    home = Path(os.environ.get("CDCFLOW__STACK__HOME") or default_stack_home())
    stack = Stack(home)
    mariadb, bootstrap = stack.endpoints("mariadb"), str(stack.endpoints("kafka")["bootstrap_servers"])
    admin, repl = admin_endpoint(mariadb), repl_endpoint(mariadb)
    db = f"bench_{uuid.uuid4().hex[:8]}"
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t {TABLE}")
    (start,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    t0 = time.perf_counter()
    rows = write_workload(admin, db, args.inserts, args.updates, args.deletes)
    write_s = time.perf_counter() - t0
    (end,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    print(machine_summary())
    print(f"MariaDB {query(admin, 'SELECT VERSION()')[0][0]}, Kafka broker of the stack, "
          f"confluent-kafka {version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]})")  # fmt: skip
    print(f"workload: {rows} row changes ({args.inserts} inserts in 500-row statements, {args.updates} single-row "
          f"updates in 500-row transactions, one {args.deletes}-row DELETE), written in {write_s:.1f} s")  # fmt: skip

    registry = stack.endpoints("registry")["url"] if "debezium-avro" in formats else None
    fig = Figures()
    for run in range(args.runs):
        for fmt in formats[1:]:  # the other formats first, alternating which runs first has no meaning here
            f_events, f_s, _pairs, _topic = capture_once(mariadb, bootstrap, db, start, end, fmt, registry)
            fig.add(fmt, f_events / f_s)
            print(f"run {run + 1}: {fmt}: {f_events} events acknowledged in {f_s:.1f} s = {f_events / f_s:,.0f} rows/s")
        events, capture_s, pairs, topic = capture_once(mariadb, bootstrap, db, start, end)
        mb = sum(len(v) for _, v in pairs) / 2**20
        base_s = raw_producer(bootstrap, pairs, f"{topic}.baseline")
        print(f"run {run + 1}: capture {events} events ({mb:.0f} MB JSON) acknowledged in {capture_s:.1f} s = "
              f"{events / capture_s:,.0f} rows/s (includes connecting and preflight); raw producer, same "
              f"events and settings, {len(pairs) / base_s:,.0f} rows/s; "
              f"capture/baseline = {base_s / capture_s:.2f}")  # fmt: skip
        fig.add("capture", events / capture_s)
        fig.add("baseline", len(pairs) / base_s)
        fig.add("ratio", base_s / capture_s)
    print(f"capture : {fig.summary('capture')} rows/s; raw producer {fig.summary('baseline')} rows/s; "
          f"capture/baseline {fig.summary('ratio', '{:.2f}')} (median [min-max] of {args.runs})")  # fmt: skip
    for fmt in formats[1:]:
        ratio = statistics.median(fig.values[fmt]) / statistics.median(fig.values["capture"])
        print(f"output {fmt}: {fig.summary(fmt)} rows/s = {ratio:.2f} of the cdcflow format's median")

    dec_rows, dec_s = decode_only_rows(repl, start, rows)
    print(f"decode only, cdcflow decoder: {dec_rows} rows in {dec_s:.1f} s = {dec_rows / dec_s:,.0f} rows/s")
    lib_rows, lib_s = pymysqlreplication_only(repl, start, rows, db)
    print(f"decode only, python-mysql-replication {version('mysql-replication')}: {lib_rows} rows in {lib_s:.1f} s "
          f"= {lib_rows / lib_s:,.0f} rows/s")  # fmt: skip
    execute(admin, f"DROP DATABASE {db}")
    sys.stdout.flush()
    if args.anchor_rows:
        debezium_vs_cdcflow(args.anchor_rows, args.anchor_repeat)


Pairs = list[tuple[bytes | None, bytes]]


OUTPUTS: dict[str, dict[str, str]] = {
    "cdcflow": {},
    "debezium-json": {"format": "debezium"},
    "debezium-avro": {"format": "debezium", "serialization": "avro"},
}


def capture_once(mariadb: object, bootstrap: str, db: str, start: str, end: str, fmt: str = "cdcflow",
                 registry: str | None = None) -> tuple[int, float, Pairs, str]:  # fmt: skip
    """A fresh capture (own name, topics, checkpoint at `start`) until its checkpoint reaches `end`."""
    name = f"bench{uuid.uuid4().hex[:6]}"
    cfg = source_config(name, [db], start="latest", output=OUTPUTS[fmt])
    capture = CaptureThread(cfg, mariadb, bootstrap, registry_url=registry)  # type: ignore[arg-type]
    # start from the GTID before the workload: the checkpoint topic gets that position first
    from cdcflow.clients.kafka.client import produce_sync
    from cdcflow.sources.mysql.checkpoint import Checkpoint

    produce_sync(bootstrap, cfg.offsets_topic, [(name.encode(), Checkpoint(start, "", 4).to_bytes())])
    t0 = time.perf_counter()
    capture.start()
    while True:
        cp = capture.capture.stats.checkpoint
        if cp is not None and cp.gtid_state == end:
            break
        if capture.error is not None:
            raise capture.error
        time.sleep(0.05)
    capture_s = time.perf_counter() - t0
    stats = capture.stop()
    topic = f"{cfg.topic_prefix}.{db}.t"
    total = sum(end_offsets(bootstrap, topic).values())
    records = consume(bootstrap, topic, expected=total, timeout_s=300)
    return stats.events, capture_s, [(r.key, r.value) for r in records if r.value is not None], topic


# One per-run line of the Debezium kit's table (bench.py): system, rows | total s, rows/s | drain s, rows/s
# | 2nd-half rows/s | CPU s, /1k | drain CPU s, /1k | 2nd-half CPU /1k | peak RSS MB | load.
_KIT_LINE = re.compile(
    r"^\s+(?P<system>cdcflow|debezium)\s+(?P<rows>\d+) \|\s+(?P<total_s>[\d.]+)\s+(?P<total_rps>[\d,]+) \|"
    r"\s+(?P<drain_s>[\d.]+)\s+(?P<drain_rps>[\d,]+) \|\s+(?P<half_rps>[\d,]+) \|\s+[\d.]+\s+(?P<cpu_1k>[\d.]+) \|"
    r"\s+[\d.]+\s+(?P<drain_cpu_1k>[\d.]+) \|\s+(?P<half_cpu_1k>[\d.]+) \|\s+(?P<rss>\d+) \|"
)


def debezium_vs_cdcflow(n_rows: int, repeat: int) -> None:
    env = {"CDCFLOW_BIN": str(Path(sys.executable).parent / "cdcflow")}
    found = run_kit("debezium", ["--rows", str(n_rows), "--repeat", str(repeat)], env, _KIT_LINE, until="summary")
    if not found:
        return
    print(f"\nDebezium kit, {n_rows} row changes: median [min-max] of {repeat} runs")
    for system, f in found.items():
        print(f"  {system:8} drain {f.summary('drain_rps'):>22} rows/s, 2nd half {f.summary('half_rps'):>22} rows/s, "
              f"CPU {f.summary('drain_cpu_1k', '{:.3f}'):>20} s/1k rows (drain), "
              f"peak RSS {f.summary('rss'):>14} MB")  # fmt: skip
    if {"cdcflow", "debezium"} <= found.keys():
        for what in ("drain_rps", "half_rps"):
            ours, theirs = found["cdcflow"].values[what], found["debezium"].values[what]
            ratios = sorted(c / d for c, d in zip(ours, theirs, strict=True))
            print(f"  cdcflow/Debezium {what}: {statistics.median(ratios):.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}]")


def decode_only_rows(repl: object, start: str, expected_rows: int) -> tuple[int, float]:
    stream = BinlogStream(repl, server_id=920_000 + os.getpid() % 1000)  # type: ignore[arg-type]
    stream.open(StreamStart(gtid_state=start))
    decoder = BinlogDecoder()
    decoder.checksum = stream.checksum
    rows, t0 = 0, time.perf_counter()
    while rows < expected_rows:
        ev = decoder.decode(stream.read())
        if isinstance(ev, RowsEvent):
            rows += len(ev.rows)
    elapsed = time.perf_counter() - t0
    stream.close()
    return rows, elapsed


if __name__ == "__main__":
    main()
