"""Does a Delta sink's cost follow the changes or the table? (update batches against a
5M-row table should cost at most 1.5x the same batches against a 50k-row table.)

Against the local stack's Kafka (`cdcflow stack up kafka` first). For each table size N: a typed
state table of N rows is written directly, as cdcflow's folds would have left it (same columns,
properties and fold record), and the docs-MERGE table with the same N rows; then the same number of
update events at random keys of that table (MySQL-shaped, one topic per size) are applied, in one
Spark session (local[2]), by

1. the raw Kafka → Parquet copy of the update records (the floor);
2. the docs' foreachBatch MERGE (`delta_merge_on_read.docs_merge_seconds`);
3. cdcflow `pipeline run --available-now` with a `delta` sink: the append path, then the final fold
   of the updates into the N-row table (both timed), on a state table with deletion vectors
   (`deletion_vectors_from_bytes: 0`); with `--both`, again on one without (copy-on-write,
   `deletion_vectors: false`); with `--sized`, again with the sink's defaults: the table starts without
   them and the fold turns them on when the table is past `deletion_vectors_from_bytes`.

Each result is checked: every updated key holds its newest values, and the table still has N rows.

Usage: .venv/bin/python benchmarks/delta_table_size.py [--sizes 50000,5000000] [--updates 100000]
           [--max-offsets 20000] [--both] [--sized]
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import uuid
from pathlib import Path
from typing import Any

from delta_merge_on_read import COLUMNS, DB, DOCS_TABLE, SOURCE, cdcflow_seconds, docs_merge_seconds, event, history
from machine import machine_summary  # type: ignore[import-not-found]
from pyspark.sql import DataFrame, SparkSession
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.clients import kafka as k
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
from cdcflow.jars import versions
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.delta.layouts.mysql_typed import TYPED_TABLE_PROPERTIES
from cdcflow.pipeline.sinks.delta.records import FoldRecord, write_record
from cdcflow.pipeline.sinks.delta.tables import DELETION_VECTORS, ensure_table, table_size
from cdcflow.pipeline.sinks.mysql_history import mysql_columns

TABLE = "t000"
BASE_ROWS = (
    "id", "CAST(id % 1000 AS INT) AS qty", "CAST(concat(id % 10000, '.25') AS DECIMAL(12,2)) AS price",
    "concat('item ', id) AS name",
)  # fmt: skip


def produce_updates(bootstrap: str, prefix: str, rows: int, updates: int) -> dict[int, tuple[int, str, str]]:
    rng = random.Random(rows)
    records, expected = [], {}
    for seq in range(1, updates + 1):
        i = rng.randrange(rows)
        after = {"id": i, "qty": rng.randrange(10**6), "price": f"{rng.randrange(10**6)}.50", "name": f"n{seq}"}
        records.append((b'{"id":%d}' % i, event(TABLE, "u", i, seq, after)))
        expected[i] = (after["qty"], after["price"], after["name"])
    k.create_topic(bootstrap, f"{prefix}-history", partitions=1)
    k.produce_sync(bootstrap, f"{prefix}-history", [(SOURCE.encode(), history(TABLE))])
    k.create_topic(bootstrap, f"{prefix}.{DB}.{TABLE}", partitions=2)
    for start in range(0, len(records), 50_000):
        k.produce_sync(bootstrap, f"{prefix}.{DB}.{TABLE}", records[start : start + 50_000], timeout_s=120)
    return expected


def write_cdcflow_state(spark: SparkSession, workdir: Path, rows: int, deletion_vectors: bool) -> str:
    """An N-row typed state table and its fold record (nothing of the log folded yet)."""
    root = workdir / "cdcflow"
    path = str(root / SOURCE / DB / TABLE)
    cols = json.loads(history(TABLE))["columns"]
    shape = mysql_columns(cols)
    properties = dict(TYPED_TABLE_PROPERTIES)
    if deletion_vectors:
        properties[DELETION_VECTORS] = "true"
    ensure_table(spark, path, mt.table_schema(shape), properties)
    base = spark.range(rows).selectExpr(
        *BASE_ROWS, f"false AS {mt.DELETED}", f"'c' AS {mt.OP}", f"array(0L, id, 0L) AS {mt.POS}",
        f"0L AS {mt.SOURCE_TS}",
    )  # fmt: skip
    base.write.format("delta").mode("append").save(path)
    record = FoldRecord(log=str(root / "_changes"), source=SOURCE, db=DB, table=TABLE, layout="typed",
                        mysql_columns=[vars(c) for c in shape])  # fmt: skip
    write_record(spark, path, record)
    return path


def write_docs_table(spark: SparkSession, workdir: Path, rows: int) -> str:
    path = str(workdir / "docs-merge")
    spark.sql(f"CREATE TABLE delta.`{path}` ({DOCS_TABLE}) USING delta")
    spark.range(rows).selectExpr(*BASE_ROWS, "array(0L, id, 0L) AS pos").write.format("delta").mode("append").save(path)
    return path


def check(table: DataFrame, rows: int, expected: dict[int, tuple[int, str, str]], label: str) -> None:
    assert table.count() == rows, f"{label}: {rows} rows expected"
    spark = table.sparkSession
    want = spark.createDataFrame([(i, q, p, n) for i, (q, p, n) in expected.items()], "id bigint, e_qty int, "
                                 "e_price string, e_name string")  # fmt: skip
    wrong = want.join(table, "id", "left").where(
        "qty IS NULL OR qty != e_qty OR price != CAST(e_price AS DECIMAL(12,2)) OR name != e_name"
    )
    assert wrong.count() == 0, f"{label}: {wrong.limit(3).collect()}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="50000,5000000")
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--max-offsets", type=int, default=20_000)
    parser.add_argument("--both", action="store_true", help="also without deletion vectors")
    parser.add_argument("--sized", action="store_true", help="also with the defaults (deletion vectors by size)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bootstrap = Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    spark = build_session("cdcflow-bench-table-size")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}, "
          f"Kafka {versions.KAFKA_VERSION}")  # fmt: skip
    print(f"{args.updates} updates at random keys, batches of {args.max_offsets}; columns {COLUMNS}")
    results: dict[int, dict[str, float]] = {}
    for rows in (int(s) for s in args.sizes.split(",")):
        prefix = f"size{uuid.uuid4().hex[:6]}"
        expected = produce_updates(bootstrap, prefix, rows, args.updates)
        pattern = f"{prefix}\\.{DB}\\..*"
        got: dict[str, float] = {}
        # (label, the state table written with deletion vectors, the sink's options)
        variants: list[tuple[str, bool, dict[str, Any]]] = [("cdcflow", True, {"deletion_vectors_from_bytes": 0})]
        if args.both:
            variants.append(("cdcflow without DVs", False, {"deletion_vectors": False}))
        if args.sized:
            variants.append(("cdcflow DVs by size", False, {}))
        with tempfile.TemporaryDirectory(prefix="cdcflow-size-") as tmp:
            work = Path(tmp)
            got["raw"] = raw_kafka_to_parquet_seconds(spark, bootstrap, pattern, args.max_offsets, work / "raw")
            docs = write_docs_table(spark, work, rows)
            got["docs"] = docs_merge_seconds(spark, bootstrap, pattern, args.max_offsets, work, create=False)
            check(spark.read.format("delta").load(docs), rows, expected, "docs MERGE")
            for label, dv, options in variants:
                run = work / label.replace(" ", "-")
                path = write_cdcflow_state(spark, run, rows, dv)
                size = table_size(spark, path)
                table_bytes = f"{size.bytes:,} bytes" if size else "size unknown"
                total, append, _batches = cdcflow_seconds(
                    bootstrap, pattern, prefix, args.max_offsets, run, register_in_catalog=False, **options
                )
                check(spark.read.format("delta").load(path), rows, expected, label)
                after = table_size(spark, path)
                print(f"  {label}: state table {table_bytes}; deletion vectors after the folds: "
                      f"{after.deletion_vectors if after else 'unknown'}", flush=True)  # fmt: skip
                got[f"{label} total"], got[f"{label} append"], got[f"{label} fold"] = total, append, total - append
        results[rows] = got
        print(f"rows={rows:,}: " + "; ".join(f"{key} {value:.1f} s" for key, value in got.items()), flush=True)
    sizes = sorted(results)
    if len(sizes) > 1:
        small, large = results[sizes[0]], results[sizes[-1]]
        print(f"\n{sizes[-1]:,} rows vs {sizes[0]:,} rows (goal for cdcflow: <= 1.5x):")
        for key in small:
            print(f"  {key}: {large[key]:.1f} s vs {small[key]:.1f} s = {large[key] / small[key]:.2f}x")


if __name__ == "__main__":
    main()
