"""Backlog drain on Oracle MySQL 8.0: `cdcflow mysql run` against Debezium 3.5's MySQL connector.

The same scheme as the MariaDB kit in $CDCFLOW_ANCHORS/debezium (whose measuring code this imports:
`bench.Workload`, `bench.drain`, `anchor_lib`'s capture processes), pointed at the stack's MySQL 8.0:

1. a database with the kit's 10-column table `t` and a `marker` table; both captures started fresh and
   stopped once each has published a marker row, so each holds a stored position (Connect's offsets file,
   cdcflow's checkpoint topic) just before the backlog;
2. with both stopped, N row changes in transactions of ~200 (the kit's mix of multi-row INSERTs, single and
   range UPDATEs and DELETEs), written with `binlog_transaction_compression` OFF, then (a second backlog)
   ON: MySQL then writes each transaction as one zstd TRANSACTION_PAYLOAD event;
3. each capture resumes in turn (the order alternates) until its topic holds all N changes (acks=all):
   total (from process launch), drain (first record to last), CPU seconds and peak RSS, as the kit prints.

Debezium: MySqlConnector over the stack's MySQL, the kit's connector settings (no data snapshot, no locks,
decimals as strings, precise BIGINT UNSIGNED, no tombstones) with TLS preferred (MySQL 8's default
caching_sha2_password needs TLS or an RSA key exchange), user `dbz` with the grants Debezium documents for
MySQL. Its classpath (benchmarks/debezium_mysql/pom.xml: 75 jars) is gathered once with Maven.

    cdcflow stack up kafka mysql
    cd benchmarks && ../.venv/bin/python mysql8_debezium.py --rows 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

from anchors import anchors_dir  # type: ignore[import-not-found]
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack as CdcflowStack

HERE = Path(__file__).resolve().parent
LIB = Path(os.environ.get("DBZ_MYSQL_LIB") or Path.home() / ".cache" / "cdcflow-anchors" / "debezium-mysql" / "lib")
GOAL = 2.0  # drain rows/s at least twice Debezium's, with and without compression


def fetch_classpath() -> None:
    if LIB.is_dir() and any(LIB.glob("debezium-connector-mysql-*.jar")):
        return
    LIB.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mvn", "-q", "-B", "-f", str(HERE / "debezium_mysql" / "pom.xml"), "dependency:copy-dependencies",
                    f"-DoutputDirectory={LIB}", "-DincludeScope=runtime"], check=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000, help="row changes in each backlog")
    p.add_argument("--repeat", type=int, default=1, help="backlogs per compression setting (order alternates)")
    p.add_argument("--compression", default="off,on", help="binlog_transaction_compression settings to run")
    p.add_argument("--database", default="anchor_dbz_my8")
    p.add_argument("--timeout", type=float, default=1800.0)
    args = p.parse_args()

    kit = anchors_dir() / "debezium"
    if not (kit / "bench.py").exists():
        raise SystemExit(f"no Debezium kit at {kit} (set CDCFLOW_ANCHORS to the anchors folder)")
    sys.path.insert(0, str(kit))
    import anchor_lib  # type: ignore[import-not-found]
    import bench  # type: ignore[import-not-found]

    fetch_classpath()
    os.environ["DBZ_LIB"] = str(LIB)  # run_connect.sh's classpath: the MySQL connector's
    home = default_stack_home()
    ours = CdcflowStack(home)
    my, kafka = ours.endpoints("mysql"), ours.endpoints("kafka")
    stack = anchor_lib.Stack(home, str(my["host"]), int(my["port"]), str(my["user"]), str(my["password"]),
                             str(kafka["bootstrap_servers"]))  # fmt: skip
    admin = stack.sql()
    with admin.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS 'dbz'@'127.0.0.1' IDENTIFIED BY 'dbz'")
        cur.execute(
            "GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, LOCK TABLES "
            "ON *.* TO 'dbz'@'127.0.0.1'"
        )  # Debezium's documented grants for MySQL
        cur.execute(f"DROP DATABASE IF EXISTS {args.database}")
        cur.execute(f"CREATE DATABASE {args.database}")
        cur.execute(f"CREATE TABLE {args.database}.t {bench.TABLE}")
        cur.execute(f"CREATE TABLE {args.database}.marker (id BIGINT PRIMARY KEY, note VARCHAR(64))")
    version = anchor_lib.sql_one(admin, "SELECT VERSION()")
    db = args.database
    run_id, run_dir = anchor_lib.new_run_dir("my8")
    ids = random.Random(uuid.uuid4().int)
    dbz = anchor_lib.DebeziumCapture(
        run_dir, f"dbz_{run_id}", stack, db, 500_000 + ids.randrange(10**5), "dbz", "dbz",
        ["connector.class=io.debezium.connector.mysql.MySqlConnector", "database.ssl.mode=preferred"], [],
    )  # fmt: skip
    cdc = anchor_lib.CdcflowCapture(run_dir, f"cf_{run_id}", stack, db, 600_000 + ids.randrange(10**5))
    cfg = json.loads(cdc.config_path.read_text())  # the kit's config reads the stack's MariaDB: point it at MySQL
    cfg["mysql"].update(host=stack.host, port=stack.port, user=my["repl_user"], password=my["repl_password"])
    cdc.config_path.write_text(json.dumps(cfg, indent=2) + "\n")
    captures = {"cdcflow": cdc, "debezium": dbz}
    topics = {name: c.topic(db, "t") for name, c in captures.items()}
    anchor_lib.create_topics(
        stack.bootstrap, [t for c in captures.values() for t in (c.topic(db, "t"), c.topic(db, "marker"))]
    )

    print(machine_summary())
    print(f"run folder: {run_dir}; MySQL {version}; Kafka at {stack.bootstrap}")
    print(f"Debezium {bench_lib_version('debezium-connector-mysql-')} (MySqlConnector) on Kafka Connect "
          f"{bench_lib_version('connect-runtime-')}; cdcflow {cdc.command()[0]}")  # fmt: skip
    t0 = time.perf_counter()
    anchor_lib.bring_to_streaming(stack, db, list(captures.values()))
    print(f"both streaming and stopped at a stored position ({time.perf_counter() - t0:.1f} s)")

    wm = anchor_lib.Watermarks(stack.bootstrap)
    workload = bench.Workload(stack, db, seed=7)
    results: dict[str, list[bench.Result]] = {}
    try:
        rep = 0
        for setting in [s.strip().upper() for s in args.compression.split(",") if s.strip()]:
            with workload.conn.cursor() as cur:
                cur.execute(f"SET SESSION binlog_transaction_compression = {setting}")
            for _ in range(args.repeat):
                n = workload.write(args.rows)
                executed = anchor_lib.sql_one(admin, "SELECT @@gtid_executed")
                print(f"\nbacklog {rep + 1}: {n} row changes, binlog_transaction_compression={setting}, written "
                      f"while both were stopped (executed {executed})")  # fmt: skip
                print("  " + bench.Result.HEADER + "\n  " + bench.Result.UNITS)
                order = ["cdcflow", "debezium"] if rep % 2 == 0 else ["debezium", "cdcflow"]
                for name in order:
                    res = bench.drain(captures[name], topics[name], wm, n, args.timeout, settle_s=3.0)
                    results.setdefault(f"{name} {setting}", []).append(res)
                    print("  " + res.line(), flush=True)
                rep += 1
    finally:
        wm.close()
        for c in captures.values():
            c.stop()

    print(f"\nsummary: median drain of {args.repeat} backlog(s) per setting, {args.rows} row changes each")
    for setting in [s.strip().upper() for s in args.compression.split(",") if s.strip()]:
        c = bench._median_result(results[f"cdcflow {setting}"])
        d = bench._median_result(results[f"debezium {setting}"])
        ratio = d.drain_s / c.drain_s
        print(f"  compression {setting:3s}: cdcflow {c.rows / c.drain_s:8,.0f} rows/s drain "
              f"({1000 * c.cpu_drain_s / c.rows:.3f} CPU s/1k rows, {c.peak_rss_mb:.0f} MB), Debezium "
              f"{d.rows / d.drain_s:8,.0f} rows/s ({1000 * d.cpu_drain_s / d.rows:.3f} CPU s/1k rows, "
              f"{d.peak_rss_mb:.0f} MB): {ratio:.2f}x; total (launch to last ack) {d.total_s / c.total_s:.2f}x; goal "
              f">= {GOAL:.1f}x {'met' if ratio >= GOAL else 'MISSED'}")  # fmt: skip
    for name, topic in topics.items():
        counts, mb = bench.op_counts(stack, topic)
        print(f"  {name:9s} {topic}: {sum(counts.values())} records {dict(sorted(counts.items()))}, {mb:.1f} MB JSON "
              f"(written: {sum(workload.counts.values())} row changes)")  # fmt: skip
    with admin.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {db}")
    bench.delete_topics(stack, [c.topic_prefix for c in captures.values()])
    admin.close()


def bench_lib_version(prefix: str) -> str:
    for jar in LIB.glob(f"{prefix}*.jar"):
        return jar.name[len(prefix) : -len(".jar")]
    return "?"


if __name__ == "__main__":
    main()
