"""What a history fold that appends would cost beside the state's MERGE alone (decision 0027, proposed).

Today a fold with history runs a second MERGE into the history table, which reads and rewrites about as much as
the state's MERGE and grows with every version (`delta_history.py`: folds with history 1.86-2.02x those without,
goal at most 1.3x). The proposed fold keeps the open versions where they already are, in the state table, and
only appends closed ones to the history: the rows the state's MERGE replaced or deleted, which the state table's
Change Data Feed (on for every typed state table) gives back as `update_preimage` and `delete` rows, each ended
by the key's first version in the fold, and the fold's own versions that a later one in the same fold ends.

This measures that fold's core on a state table shaped as cdcflow's typed one (Change Data Feed and deletion
vectors on), in one Spark session (local[2]), the contenders taking turns fold by fold on copies of one table:

- `state`: the state's MERGE alone (the newest change per key, guarded by the position): a fold without history;
- `preimages`: the same MERGE, then the closed versions appended to a history table, their row images the
  preimages' typed columns written as JSON (`to_json`); with the check the fold would need for changes that came
  late or twice (the fold's keys the MERGE left alone: an anti-join with the Change Data Feed's keys) and Delta's
  idempotent append (`txnAppId`/`txnVersion`, so a fold done again after a kill appends nothing twice);
- `keyed`: as `preimages`, with the state table carrying each row's key as the change log has it (a hidden JSON
  column), so the closed versions of a key meet its other versions under the same key text;
- `images`: as `keyed`, with the row image carried too (a second hidden JSON column), so the closed versions are
  copied, not converted: no encoding to keep equal to the capture's, for a wider state table.

Each fold: `--changes` updates at random keys (with repeats, so some keys have several versions in one fold) and
1% deletes, against `--rows` rows. Printed per fold and as medians of the folds after the first: each fold's time
and its ratio to `state`.

Usage: .venv/bin/python benchmarks/history_by_appending.py [--rows 1000000] [--changes 200000] [--folds 6]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from delta.tables import DeltaTable
from machine import machine_summary  # type: ignore[import-not-found]
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from cdcflow.jars import versions
from cdcflow.pipeline.session import build_session

PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}
SOURCE_COLUMNS = ("id", "qty", "price", "name")
HISTORY = (
    "key string, after string, op string, pos array<bigint>, source_ts_ms bigint, valid_to_pos array<bigint>, "
    "valid_to_ts_ms bigint, valid_from_seq bigint, valid_to_seq bigint"
)
HISTORY_COLUMNS = [c.split()[0] for c in HISTORY.split(", ")]


def key_json(df: DataFrame) -> Column:
    return F.to_json(F.struct(df["id"]))


def row_json() -> Column:
    return F.to_json(F.struct(*SOURCE_COLUMNS))


# The hidden columns each contender's state table carries.
CARRIED = {
    "state": (),
    "preimages": (),
    "keyed": ("_cdcflow_key",),
    "images": ("_cdcflow_key", "_cdcflow_after"),
}


def initial_rows(spark: SparkSession, rows: int, carried: tuple[str, ...]) -> DataFrame:
    df = spark.range(rows).select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("qty"),
        (F.col("id") % 10000 + 0.25).cast("decimal(12,2)").alias("price"),
        F.concat(F.lit("item "), F.col("id")).alias("name"),
        F.lit(False).alias("_cdcflow_deleted"),
        F.lit("c").alias("_cdcflow_op"),
        F.array(F.lit(1).cast("bigint"), F.col("id")).alias("_cdcflow_pos"),
        F.lit(1000).cast("bigint").alias("_cdcflow_source_ts_ms"),
    )
    if "_cdcflow_key" in carried:
        df = df.withColumn("_cdcflow_key", key_json(df))
    if "_cdcflow_after" in carried:
        df = df.withColumn("_cdcflow_after", row_json())
    return df


def fold_changes(spark: SparkSession, rows: int, changes: int, fold: int) -> DataFrame:
    """`changes` changes at random keys (some keys more than once), 1% of them deletes, all after the table."""
    n = F.col("n")
    deleted = n % 100 == 0
    df = (
        spark.range(changes)
        .select(F.col("id").alias("n"), (F.abs(F.xxhash64(F.col("id"), F.lit(fold))) % rows).alias("id"))
        .select(
            "id",
            (n % 1_000_000).cast("int").alias("qty"),
            (n % 7 + 0.5).cast("decimal(12,2)").alias("price"),
            F.concat(F.lit("n"), n).alias("name"),
            deleted.alias("_cdcflow_deleted"),
            F.when(deleted, "d").otherwise("u").alias("_cdcflow_op"),
            F.array(F.lit(10 + fold).cast("bigint"), n).alias("_cdcflow_pos"),
            F.lit(2000 + fold).cast("bigint").alias("_cdcflow_source_ts_ms"),
        )
    )
    return df.withColumn("_cdcflow_key", key_json(df)).withColumn(
        "_cdcflow_after", F.when(F.col("_cdcflow_deleted"), F.lit(None)).otherwise(row_json())
    )


def merge_state(spark: SparkSession, path: str, changes: DataFrame, carried: tuple[str, ...]) -> int:
    """The state's guarded MERGE of the newest change per key; the version it committed."""
    newest = Window.partitionBy("id").orderBy(F.col("_cdcflow_pos").desc())
    source = changes.withColumn("_r", F.row_number().over(newest)).where("_r = 1").drop("_r")
    source = source.drop(*(c for c in ("_cdcflow_key", "_cdcflow_after") if c not in carried))
    (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), "t.id <=> s.id")
        .whenMatchedDelete(condition="s._cdcflow_deleted AND s._cdcflow_pos > t._cdcflow_pos")
        .whenMatchedUpdateAll(condition="s._cdcflow_pos > t._cdcflow_pos")
        .whenNotMatchedInsertAll(condition="NOT s._cdcflow_deleted")
        .execute()
    )  # fmt: skip
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()[0])  # type: ignore[index]


def append_closed(spark: SparkSession, path: str, history: str, version: int, changes: DataFrame,
                  carried: tuple[str, ...], fold: int) -> DataFrame:  # fmt: skip
    """The versions the fold closed, appended: the state rows the MERGE replaced or deleted (from its Change Data
    Feed) and the fold's versions a later one of the same key ends. Returns the fold's keys the MERGE left alone
    (late or repeated changes: the fold would take those through the history's MERGE), as a query."""
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", version)
        .option("endingVersion", version).load(path)
    )  # fmt: skip
    replaced = feed.where("_change_type IN ('update_preimage', 'delete')")

    def version_rows(df: DataFrame, from_state: bool) -> DataFrame:
        key = F.col("_cdcflow_key") if not from_state or "_cdcflow_key" in carried else key_json(df)
        after = F.col("_cdcflow_after") if not from_state or "_cdcflow_after" in carried else row_json()
        return df.select(
            F.col("id"), key.alias("key"), after.alias("after"), F.col("_cdcflow_op").alias("op"),
            F.col("_cdcflow_pos").alias("pos"), F.col("_cdcflow_source_ts_ms").alias("source_ts_ms"),
        )  # fmt: skip

    by_key = Window.partitionBy("id").orderBy("pos")
    closed = (
        version_rows(replaced, True).unionByName(version_rows(changes, False))
        .withColumn("valid_to_pos", F.lead("pos").over(by_key))
        .withColumn("valid_to_ts_ms", F.lead("source_ts_ms").over(by_key))
        .where("valid_to_pos IS NOT NULL")
        .withColumn("valid_from_seq", F.col("pos")[0])
        .withColumn("valid_to_seq", F.col("valid_to_pos")[0])
        .select(*HISTORY_COLUMNS)
    )  # fmt: skip
    (
        closed.write.format("delta").mode("append").option("txnAppId", "history-fold").option("txnVersion", fold)
        .save(history)
    )  # fmt: skip
    applied = feed.where("_change_type IN ('update_postimage', 'insert', 'delete')").select("id")
    return changes.select("id").distinct().join(applied, "id", "left_anti")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--folds", type=int, default=6)
    args = parser.parse_args()
    spark = build_session("cdcflow-bench-history-append")
    spark.sparkContext.setLogLevel("ERROR")
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}")
    print(f"state table: {args.rows:,} rows; folds of {args.changes:,} changes (1% deletes) at random keys")
    work = Path(tempfile.mkdtemp(prefix="cdcflow-history-append-"))
    try:
        contenders = tuple(CARRIED)
        for name in contenders:
            initial_rows(spark, args.rows, CARRIED[name]).write.format("delta").save(str(work / name))
            for key, value in PROPERTIES.items():
                spark.sql(f"ALTER TABLE delta.`{work / name}` SET TBLPROPERTIES ('{key}' = '{value}')")
            spark.createDataFrame([], HISTORY).write.format("delta").save(str(work / f"{name}-history"))
        times: dict[str, list[float]] = {name: [] for name in contenders}
        for fold in range(args.folds):
            changes = fold_changes(spark, args.rows, args.changes, fold).persist()
            changes.count()
            line = [f"fold {fold}:"]
            for name in contenders:
                path, history = str(work / name), str(work / f"{name}-history")
                started = time.perf_counter()
                version = merge_state(spark, path, changes, CARRIED[name])
                merged = time.perf_counter()
                if name == "state":
                    times[name].append(merged - started)
                    line.append(f"{name} {times[name][-1]:.2f} s")
                    continue
                left = append_closed(spark, path, history, version, changes, CARRIED[name], fold)
                appended = time.perf_counter()
                left_alone = left.count()
                times[name].append(time.perf_counter() - started)
                line.append(f"{name} {times[name][-1]:.2f} s (MERGE {merged - started:.2f}, append "
                            f"{appended - merged:.2f}, check {time.perf_counter() - appended:.2f}; {left_alone} keys "
                            "left alone)")  # fmt: skip
            changes.unpersist()
            print("  ".join(line), flush=True)
        closed = {n: spark.read.format("delta").load(str(work / f"{n}-history")).count() for n in contenders[1:]}
        assert len(set(closed.values())) == 1, closed
        print(f"closed versions appended: {closed['images']:,}")
        state = statistics.median(times["state"][1:])
        for name in contenders:
            median = statistics.median(times[name][1:])
            print(f"  {name:10s} median {median:6.2f} s per fold = {median / state:.2f}x the state's MERGE alone")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
