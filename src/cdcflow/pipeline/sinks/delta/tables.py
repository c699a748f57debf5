"""Creating Delta tables the way every cdcflow Delta sink wants them."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdcflow.errors import ConfigError
from cdcflow.pipeline import metrics

log = logging.getLogger(__name__)


def ensure_table(
    spark: SparkSession, path: str, schema: StructType, properties: Mapping[str, str] | None = None
) -> DeltaTable:
    """The Delta table at `path`, created empty with `schema` (and table `properties`) if absent.

    Without Delta's auto-compaction: it compacts every table at its first commit in each process
    whatever its files (measured: 1-2 s per table and fold, a state table and its deletes table alike);
    the sink compacts its tables itself (FoldService.compact_if_due).
    """
    drop_log_without_commits(spark, path)
    if not DeltaTable.isDeltaTable(spark, path):
        # One commit with the properties, so a table's first version already has them (Change Data
        # Feed from version 0).
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        builder.execute()
    return DeltaTable.forPath(spark, path)


def append_creating(spark: SparkSession, path: str, rows: DataFrame, schema: StructType) -> None:
    """Append `rows` (cast to `schema`'s types) to the Delta table at `path`; where there is none yet, the append
    makes it, in one commit. For tables that take blind appends and need no table properties (a MySQL table's
    deletes): creating one empty first was a commit of its own, about 0.3 s of a warm local session per table, and
    the first fold of every table with deletes paid it. (Delta makes every column of a table it creates this way
    nullable.)"""
    drop_log_without_commits(spark, path)
    rows.select(*(F.col(f.name).cast(f.dataType) for f in schema.fields)).write.format("delta").mode("append").save(
        path
    )


DELETION_VECTORS = "delta.enableDeletionVectors"


@dataclass(frozen=True)
class TableSize:
    bytes: int  # of the table's files
    deletion_vectors: bool  # the table has them turned on


def table_size(spark: SparkSession, path: str) -> TableSize | None:
    """The table's size and whether it has deletion vectors, from the snapshot Delta holds in memory and the
    checksum it writes with each commit (no Spark job); where Delta wrote no checksum for the newest version
    (`spark.databricks.delta.writeChecksumFile.enabled` false), from the snapshot's state (one job, as DESCRIBE
    DETAIL). None while no table is there."""
    sc = spark.sparkContext
    assert sc._jvm is not None
    snapshot = sc._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path).unsafeVolatileSnapshot()
    if snapshot.version() < 0:
        return None
    checksum = snapshot.checksumOpt()
    size = int(checksum.get().tableSizeBytes()) if checksum.isDefined() else int(snapshot.sizeInBytes())
    setting = snapshot.metadata().configuration().get(DELETION_VECTORS)
    on = bool(setting.isDefined()) and str(setting.get()).lower() == "true"
    return TableSize(size, on)


def turn_on_deletion_vectors(spark: SparkSession, path: str) -> None:
    """From this commit on, the table's MERGEs, UPDATEs and DELETEs mark rows instead of rewriting files (a
    metadata commit; readers need Delta reader version 3 from here)."""
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{DELETION_VECTORS}' = 'true')")


_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint.*\.parquet)$")


def drop_log_without_commits(spark: SparkSession, path: str) -> None:
    """A process killed while creating a table can leave `_delta_log` with no commit in it: Delta then
    neither creates the table nor reads it (DELTA_TABLE_NOT_FOUND on every retry). Such a log holds no
    data, so it is removed and the table created afresh."""
    sc = spark.sparkContext
    assert sc._jvm is not None and sc._jsc is not None
    log_dir = sc._jvm.org.apache.hadoop.fs.Path(path.rstrip("/") + "/_delta_log")
    fs = log_dir.getFileSystem(sc._jsc.hadoopConfiguration())
    if not fs.exists(log_dir):
        return
    if any(_COMMIT_FILE.match(str(st.getPath().getName())) for st in fs.listStatus(log_dir)):
        return
    log.warning("%s: a Delta log with no commit (a creation interrupted); creating the table afresh", path)
    fs.delete(log_dir, True)


# Delta's optimistic concurrency: another writer committed first and the commit was refused
# (io.delta.exceptions.*). Redoing the read and the MERGE is safe; nothing of ours was written.
_CONFLICTS = (
    "ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
    "ConcurrentWriteException",
)  # fmt: skip


def commit_conflict(exc: BaseException) -> str | None:
    """The name of the Delta conflict `exc` reports, or None when it is some other failure."""
    text = f"{type(exc).__name__}: {exc}"
    return next((name for name in _CONFLICTS if name in text), None)


# How often a MERGE runs again after another writer committed first.
CONFLICT_RETRIES = 8


def merge_guarded(sink: str, path: str, merge: Callable[[], None]) -> None:
    """Run a MERGE whose guard is inside it; when Delta refuses the commit because another writer committed
    first, run it again (it re-reads the table)."""
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            merge()
            return
        except Exception as exc:
            if not commit_conflict(exc) or attempt == CONFLICT_RETRIES:
                raise
            log.warning("sink %s: %s: another writer committed first (%s); merging again", sink, path,
                        commit_conflict(exc))  # fmt: skip
            metrics.DELTA_CONFLICTS.labels(sink).inc()
            time.sleep(min(5.0, 0.2 * 2**attempt))


def refuse_old_layout(spark: SparkSession, sink: str, old: str, new: str) -> None:
    """Earlier cdcflow versions kept a state table at <path>/<db>/<table>, without the source name.
    Refuse to start a second table beside it: the user moves it (or maps it with table_map) knowingly."""
    if DeltaTable.isDeltaTable(spark, old) and not DeltaTable.isDeltaTable(spark, new):
        raise ConfigError(
            f"sink {sink}: a state table exists at {old}, the layout before tables were kept per source; "
            f"move it to {new} (or map it with table_map) so it is continued, not rebuilt beside it"
        )
