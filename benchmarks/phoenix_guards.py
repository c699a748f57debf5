"""Benchmark: two ways to guard Phoenix writes from the executors, side by side.

Against the local stack's Phoenix (`cdcflow stack up phoenix` first), in one Spark session, the same
N rows (a BIGINT key and 5 typed columns) written from the executors (2 partitions) three times:
inserts (new keys), newer updates of every key, and a replay of the inserts (older positions):

- plain:   `UPSERT ... VALUES` with no guard at all: the floor (and the replay overwrites newer rows);
- guarded: cdcflow's `UPSERT ... ON DUPLICATE KEY UPDATE` comparing `_CDCFLOW_POS` (GuardedUpsert.java,
  what the phoenix sink runs; decision 0016);
- scn:     each row through a connection whose CurrentSCN is the row's own timestamp, so HBase's
  newest-timestamp-wins is the guard and nothing is read (benchmarks/java/ScnUpsert.java). Phoenix
  takes one SCN per connection, so it is one connection per row; it runs on --scn-rows rows. The
  timestamps must lie after the table's creation (before it Phoenix finds no table) and before
  the time of the reads (later cells are invisible).

After the replay, the rows holding the update's values are counted: a guard that lets the replay win
is wrong whatever its speed.

Usage: .venv/bin/python benchmarks/phoenix_guards.py [--rows 100000] [--scn-rows 5000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from machine import machine_summary  # type: ignore[import-not-found]
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cdcflow.clients.phoenix import PhoenixJvm, write_from_executors
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.jars import phoenix as phoenix_jars
from cdcflow.jars import versions
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.phoenix import guarded
from cdcflow.pipeline.sinks.phoenix import schema as ps

COLUMNS = (
    ps.PhoenixColumn("ID", "BIGINT"), ps.PhoenixColumn("NAME", "VARCHAR"), ps.PhoenixColumn("AMOUNT", "DECIMAL(14,2)"),
    ps.PhoenixColumn("QTY", "INTEGER"), ps.PhoenixColumn("RATIO", "DOUBLE"), ps.PhoenixColumn("NOTE", "VARCHAR"),
)  # fmt: skip


def scn_jar(workdir: Path) -> Path:
    """benchmarks/java/ScnUpsert.java compiled against Spark's and Phoenix's jars."""
    spark_jars = phoenix_jars._pyspark_jars()
    classpath = ":".join([f"{spark_jars}/*", *map(str, phoenix_jars.client_jars())])
    source = Path(__file__).parent / "java" / "ScnUpsert.java"
    classes, jar = workdir / "scn-classes", workdir / "scn-upsert.jar"
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    assert javac and jar_tool, "a JDK is needed"
    subprocess.run([javac, "-nowarn", "--release", "17", "-cp", classpath, "-d", str(classes), str(source)], check=True)
    subprocess.run([jar_tool, "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


def rows(spark: Any, n: int, pass_: int, base_ms: int, partitions: int) -> DataFrame:
    """pass 0: inserts; 1: newer updates of every key; 2: the inserts again (older positions)."""
    version = 1 if pass_ == 1 else 0
    frame = spark.range(n).select(
        F.col("id").alias("ID"),
        F.concat(F.lit(f"name-v{version}-"), F.col("id").cast("string")).alias("NAME"),
        (F.col("id") * 1.25 + version).cast("decimal(14,2)").alias("AMOUNT"),
        (F.col("id") % 1000 + version).cast("int").alias("QTY"),
        (F.col("id") / 7).alias("RATIO"),
        F.lit("note " * 8).alias("NOTE"),
        # the position (as the sink's text) and, for the scn way, a timestamp in the same order
        F.format_string("%020d.%020d", F.lit(version + 1), F.col("id")).alias(guarded.GUARD_POS),
        F.lit(False).alias(guarded.GUARD_DELETED),
        (F.lit(base_ms + version * n) + F.col("id")).alias("_SCN"),
    )
    return frame.repartition(partitions, "ID")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--scn-rows", type=int, default=5_000)
    ap.add_argument("--commit-rows", type=int, default=2000, help="rows per commit of each executor's connection")
    ap.add_argument("--partitions", type=int, default=2, help="Spark partitions (concurrent writers)")
    ap.add_argument("--stack-home", type=Path, default=None)
    args = ap.parse_args()
    url = Stack(args.stack_home or default_stack_home()).endpoints("phoenix")["jdbc_url"]
    workdir = Path(tempfile.mkdtemp(prefix="cdcflow-guards-"))
    spark = build_session(
        "cdcflow-bench-guards",
        sink_jars=[str(j) for j in (*phoenix_jars.client_jars(), phoenix_jars.helper_jar(), scn_jar(workdir))],
    )
    spark.sparkContext.setLogLevel("ERROR")
    schema = f"G{uuid.uuid4().hex[:8].upper()}"
    plain = ps.PhoenixTable(schema, "PLAIN", COLUMNS, ("ID",))
    guarded_table = guarded.physical_table(ps.PhoenixTable(schema, "GUARDED", COLUMNS, ("ID",)))
    scn = ps.PhoenixTable(schema, "SCN", COLUMNS, ("ID",))
    data = [c.name for c in COLUMNS]
    with PhoenixJvm.launch(url) as phoenix:
        for t in (plain, guarded_table, scn):
            phoenix.execute(ps.create_table_sql(t))
    layout = [*COLUMNS, *guarded.GUARD_COLUMNS]
    types = [guarded.sql_type(c.type) for c in layout]
    kinds = [guarded.PLAIN] * len(layout)
    plain_sql = f"UPSERT INTO {plain.qualified} ({', '.join(ps.quote(n) for n in data)}) VALUES " \
                f"({', '.join('?' for _ in data)})"  # fmt: skip
    guarded_sql, params = guarded.upsert_sql(guarded_table)
    # SCNs after the tables' creation: at an SCN before it, Phoenix finds no table ("Table undefined")
    base_ms = int(time.time() * 1000) + 1000

    def timed(label: str, n: int, pass_: int, write: Any) -> float:
        frame = rows(spark, n, pass_, base_ms, args.partitions).persist()
        frame.count()  # generated and cached before the clock starts
        started = time.perf_counter()
        write(frame)
        seconds = time.perf_counter() - started
        frame.unpersist()
        print(f"{label:8} pass {pass_} ({['inserts', 'updates', 'stale replay'][pass_]:12}): {n:7d} rows "
              f"{seconds:6.1f} s {n / seconds:8.0f} rows/s")  # fmt: skip
        return seconds

    results: dict[str, list[float]] = {"plain": [], "guarded": [], "scn": []}
    for pass_ in range(3):
        results["plain"].append(
            timed(
                "plain",
                args.rows,
                pass_,
                lambda f: write_from_executors(
                    f.select(*data),
                    url,
                    plain_sql,
                    list(range(len(data))),
                    types,
                    kinds,
                    args.commit_rows,
                    "bench-plain",
                ),
            )
        )
        results["guarded"].append(timed("guarded", args.rows, pass_, lambda f: write_from_executors(
            f.select(*data, guarded.GUARD_POS, guarded.GUARD_DELETED), url, guarded_sql, params, types, kinds,
            args.commit_rows, "bench-guarded")))  # fmt: skip
        results["scn"].append(
            timed(
                "scn",
                args.scn_rows,
                pass_,
                lambda f: spark.sparkContext._jvm.io.cdcflow.bench.ScnUpsert.write(
                    f.select(*data, "_SCN")._jdf, url, plain_sql.replace(plain.qualified, scn.qualified)
                ),
            )
        )

    time.sleep(max(0.0, (base_ms + 2 * args.scn_rows) / 1000 - time.time() + 1))  # reads at now see every SCN
    with PhoenixJvm.launch(url) as phoenix:

        def newest(table: ps.PhoenixTable) -> int:
            return int(phoenix.query(f"SELECT COUNT(*) FROM {table.qualified} WHERE \"NAME\" LIKE 'name-v1-%'")[0][0])

        exact = {"plain": (newest(plain), args.rows), "guarded": (newest(guarded_table), args.rows),
                 "scn": (newest(scn), args.scn_rows)}  # fmt: skip
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]); HBase {versions.HBASE_VERSION}; "
          f"Phoenix {versions.PHOENIX_VERSION}")  # fmt: skip
    for way, seconds in results.items():
        n = args.scn_rows if way == "scn" else args.rows
        held, total = exact[way]
        rates = " / ".join(f"{n / s:.0f}" for s in seconds)
        print(f"{way:8} rows/s inserts / updates / stale replay: {rates}; newest values kept after the replay: "
              f"{held} of {total}{'' if held == total else '  (NOT EXACT)'}")  # fmt: skip
    spark.stop()


if __name__ == "__main__":
    main()
