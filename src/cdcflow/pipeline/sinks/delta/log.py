"""The change log of a Delta sink: every change of every source table, appended once per batch.

One Delta table per sink, partitioned by source table (`connector`, `source_name`, `db`, `table`), so a fold or
a view reads one table's changes without the others'. Each micro-batch is **one** blind append
(one Delta commit whatever the number of tables, one Spark job), made idempotent across replays by
`BatchLog`: each commit names its sink, query and batch in its commit info (`userMetadata`), and a
batch at or below the last one committed for its query is skipped. Not Delta's own transaction ids
(`txnAppId`/`txnVersion`): Delta answers "was this batch committed?" from the table's whole state,
which it recomputes (three Spark jobs) on every commit; `BatchLog` answers it from the commit files
once per process and from memory after that.

A change the capture delivered twice (in one batch, or in two: at-least-once capture after a
restart, or a checkpoint reset that reads the topics again) is appended twice: a duplicate check
against the stored rows is what made the old changelog cost a MERGE per batch, and even the
in-batch dedupe costs a shuffle of the whole batch (decision 0014). Readers see each change once:
`changes()` keeps one row per change identity (the earliest batch's), and the folds are idempotent
(a change applied twice leaves the state as applied once).

Why not a MERGE per batch: decisions 0013 and 0014 (a MERGE's fixed cost is more than the raw
copy's whole batch, and the old design paid it once per source table).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdcflow.pipeline.envelope import batch_value
from cdcflow.pipeline.sinks.delta.records import read_text
from cdcflow.pipeline.sinks.delta.tables import drop_log_without_commits

log = logging.getLogger(__name__)

# The columns that identify one change: a row with the same values is the same change.
IDENTITY = ("event_key", "region", "pos", "db", "table", "connector", "source_name", "cluster_id")
PARTITIONS = ("connector", "source_name", "db", "table")


def changelog_rows(events: DataFrame, batch_id: int) -> DataFrame:
    """The log's row of each event of a batch."""
    return events.select(
        F.col("kafka_key").alias("event_key"),
        F.col("source.connector").alias("connector"),
        F.col("source.name").alias("source_name"),
        F.coalesce(F.col("source.cluster_id"), F.lit("")).alias("cluster_id"),
        F.col("source.db").alias("db"),
        F.col("source.table").alias("table"),
        F.coalesce(F.col("source.region"), F.lit("")).alias("region"),
        F.col("source.pos").alias("pos"),
        F.col("source.ts_ms").alias("source_ts_ms"),
        "op",
        "key",
        "before",
        "after",
        "cells",
        F.col("topic").alias("kafka_topic"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        batch_value(batch_id).alias("batch_id"),
    )


def ensure_log(spark: SparkSession, path: str, schema: StructType) -> None:
    """Create the log (partitioned by source table, Change Data Feed on: folds read the rows of a
    version range from it) unless it exists. A log made by an earlier cdcflow (the changelog sink's
    unpartitioned table) is continued as it is.

    Column statistics only on `batch_id`: nothing reads the log by a column's range (folds read versions of a
    table's partition), and by default Delta takes minimum, maximum and null count of its first 32 columns in
    every append, the event's JSON texts among them (about a tenth of a plain Delta append of change events,
    benchmarks/delta_append_breakdown.py). Row counts are kept: `_added_rows` reads them."""
    drop_log_without_commits(spark, path)
    if DeltaTable.isDeltaTable(spark, path):
        return
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).partitionedBy(*PARTITIONS)
    builder = builder.property("delta.enableChangeDataFeed", "true")
    builder.property("delta.dataSkippingStatsColumns", "batch_id").execute()


# The key of cdcflow's mark in a batch commit's `userMetadata`.
MARK = "cdcflow_batch"
# How many commits `BatchLog` reads back, at most, to find a query's last batch after a start.
SCAN_LIMIT = 10_000


@dataclass(frozen=True)
class Commit:
    """A batch's commit to the log: its version and the rows it added per source table (connector,
    source, db, table), read from the commit file itself (`add` actions carry partition values and
    row counts)."""

    version: int
    tables: dict[tuple[str, str, str, str], int]


@dataclass(frozen=True)
class Mark:
    sink: str
    query: str
    reassembled: bool
    batch: int


class BatchLog:
    """Appends one sink's batches to a change log, each batch once per query and pass (the batch's
    changes, or its oversized changes put back together: `reassembled`).

    A replayed batch (a crash after the commit, before Spark recorded the batch done) is the only
    one a query can see twice, and it is the query's newest: the last batch committed for a query is
    read back from the newest commits once (the first batch after a start), then kept in memory."""

    def __init__(self, path: str, sink: str) -> None:
        self.path = path
        self.sink = sink
        self.version = -1  # the newest log version this writer knows of
        self._last: dict[tuple[str, bool], int] = {}  # (query id, reassembled) -> last batch committed
        self.tables_before = 0  # source tables in the last batch this writer committed

    def open(self, spark: SparkSession) -> None:
        self.version = latest_version(spark, self.path)

    def append(
        self, spark: SparkSession, rows: DataFrame, query: str, batch_id: int, reassembled: bool = False
    ) -> Commit | None:
        """One commit with every row of the batch; None (nothing written) when the batch was committed
        before."""
        stream = (query, reassembled)
        if stream not in self._last:
            self._last[stream] = self._last_batch(spark, query, reassembled)
        if batch_id <= self._last[stream]:
            log.info("%s: batch %d of query %s was committed before (a replay): not written again", self.path,
                     batch_id, query)  # fmt: skip
            return None
        mark = {MARK: {"sink": self.sink, "query": query, "reassembled": reassembled, "batch": batch_id}}
        (
            by_table(rows, self.tables_before).write.format("delta").mode("append")
            .option("userMetadata", json.dumps(mark, separators=(",", ":")))
            .option("mergeSchema", "true")
            .save(self.path)
        )  # fmt: skip
        commit = self._find(spark, Mark(self.sink, query, reassembled, batch_id))
        self._last[stream] = batch_id
        self.version = commit.version
        self.tables_before = len(commit.tables)
        return commit

    def _find(self, spark: SparkSession, mark: Mark) -> Commit:
        """The commit this writer just made: the first after the version it knew of that bears its mark. None
        there: the batch had no rows (a batch of oversize markers only), and Delta commits no empty append
        (spark.databricks.delta.skipRecordingEmptyCommits); a replay of it has nothing to write twice."""
        version = self.version + 1
        while True:
            actions = _commit_actions(spark, self.path, version)
            if actions is None:
                log.debug("%s: no commit for %s: an empty batch", self.path, mark)
                return Commit(self.version, {})
            if mark_of(actions, self.sink) == mark:
                return Commit(version, _added_rows(actions))
            version += 1

    def _last_batch(self, spark: SparkSession, query: str, reassembled: bool) -> int:
        """The newest batch committed for (query, pass), from the newest commits back: -1 when a commit
        of another query of this sink comes first (a reset checkpoint starts a new query, and the old
        one never writes again), or none is found."""
        newest = latest_version(spark, self.path)
        self.version = max(self.version, newest)
        for version in range(newest, max(-1, newest - SCAN_LIMIT), -1):
            actions = _commit_actions(spark, self.path, version)
            if actions is None:  # cleaned up (older than the log's retention)
                break
            mark = mark_of(actions, self.sink)
            if mark is None:
                continue  # OPTIMIZE, the table's creation, or another sink's commit
            if mark.query != query:
                break
            if mark.reassembled == reassembled:
                return mark.batch
        return -1


def by_table(rows: DataFrame, tables_before: int) -> DataFrame:
    """The batch's rows, each source table's in one task, when the batch before held more tables than the session
    has cores; else as they are.

    The log is partitioned by table, so each task writes a file per table it holds: rows of 100 tables read by four
    tasks were 180-186 files per batch (about 20 ms of executor time each on the local file system, more on object
    stores), one table two. Moved to one task per table by a shuffle, they are 100. A batch of few tables keeps
    its tasks, and a table with all the batch's changes its two-core write. The batch before stands for this one
    since counting the tables of this batch would cost a job."""
    tasks = rows.sparkSession.sparkContext.defaultParallelism
    return rows.repartition(tasks, *PARTITIONS) if tables_before > tasks else rows


def _commit_actions(spark: SparkSession, path: str, version: int) -> list[dict[str, Any]] | None:
    text = read_text(spark, f"{path.rstrip('/')}/_delta_log/{version:020d}.json")
    return None if text is None else [json.loads(line) for line in text.splitlines() if line.strip()]


def mark_of(actions: list[dict[str, Any]], sink: str) -> Mark | None:
    """The batch mark of a commit by this sink: from its commit info, or, for commits of earlier cdcflow
    versions, from Delta's transaction id (`txn`: appId cdcflow-<sink>-<query id>[-reassembled])."""
    for action in actions:
        meta = (action.get("commitInfo") or {}).get("userMetadata")
        if meta and MARK in meta:
            try:
                doc = json.loads(meta)[MARK]
                mark = Mark(str(doc["sink"]), str(doc["query"]), bool(doc["reassembled"]), int(doc["batch"]))
            except (ValueError, KeyError, TypeError):
                continue
            return mark if mark.sink == sink else None
        txn = action.get("txn")
        if txn and str(txn.get("appId", "")).startswith(f"cdcflow-{sink}-"):
            app = str(txn["appId"])[len(f"cdcflow-{sink}-") :]
            reassembled = app.endswith("-reassembled")
            return Mark(sink, app.removesuffix("-reassembled"), reassembled, int(txn["version"]))
    return None


def _added_rows(actions: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], int]:
    tables: dict[tuple[str, str, str, str], int] = {}
    for a in actions:
        add = a.get("add")
        if not add:
            continue
        values = add.get("partitionValues") or {}
        key = (values.get("connector") or "", values.get("source_name") or "", values.get("db") or "",
               values.get("table") or "")  # fmt: skip
        rows = json.loads(add.get("stats") or "{}").get("numRecords", 1)
        tables[key] = tables.get(key, 0) + int(rows)
    return tables


def commit_time_ms(spark: SparkSession, path: str, version: int) -> int | None:
    """When a log version was committed (its commit file's time), None when it is not there (not
    committed yet, or its commit file already cleaned up)."""
    sc = spark.sparkContext
    assert sc._jvm is not None and sc._jsc is not None
    commit = sc._jvm.org.apache.hadoop.fs.Path(f"{path.rstrip('/')}/_delta_log/{max(version, 0):020d}.json")
    fs = commit.getFileSystem(sc._jsc.hadoopConfiguration())
    return int(fs.getFileStatus(commit).getModificationTime()) if fs.exists(commit) else None


def latest_version(spark: SparkSession, path: str) -> int:
    """The log's newest committed version (-1 when it has none)."""
    if not DeltaTable.isDeltaTable(spark, path):
        return -1
    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    return int(row["version"]) if row else -1


def table_changes(
    spark: SparkSession, path: str, source: str, db: str, table: str, after_version: int, up_to_version: int
) -> DataFrame:
    """The log rows of one source table committed after `after_version`, up to `up_to_version`
    (both log versions; -1: from the start). Read from the Change Data Feed, so only the files
    those commits added are read, not the whole history."""
    where = (F.col("source_name") == source) & (F.col("db") == db) & (F.col("table") == table)
    if up_to_version <= after_version:
        return spark.read.format("delta").load(path).where(where).limit(0)
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", after_version + 1).option("endingVersion", up_to_version)
        .load(path)
    )  # fmt: skip
    return feed.where(where & (F.col("_change_type") == "insert")).drop(
        "_change_type", "_commit_version", "_commit_timestamp"
    )


# The deletes table's key for "every row of the table" (a TRUNCATE): no row's key is empty (MySQL keys are
# JSON objects), so the row never matches one key and stands for all of them.
WHOLE_TABLE = ""


def changes(spark: SparkSession, path: str) -> DataFrame:
    """The change log with each change once: the row of the earliest batch per change identity
    (a replayed batch is never appended twice; a change delivered twice in two batches is)."""
    logged = spark.read.format("delta").load(path)
    nullable = {"source_name", "cluster_id"}  # null in rows written before these columns existed
    identity = [F.coalesce(F.col(c), F.lit("")) if c in nullable else F.col(c) for c in IDENTITY]
    first = Window.partitionBy(*identity).orderBy("batch_id", "kafka_topic", "kafka_partition", "kafka_offset")
    return logged.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n")
