"""Reading a Delta sink's tables at its consistent cut: every MySQL table of one source as of the newest
source transaction the sink holds whole (a transfer between two tables is seen whole or not at all).

The reads are point-in-time reads (history/reads.py) at the cut's position, so the tables keep history: a sink
with `consistent_cut` keeps it for every MySQL table unless `history_tables` turns a table's off.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.cut.state import CUT_FILE, SourceCut, read_cuts
from cdcflow.pipeline.sinks.delta.history import reads as history_reads
from cdcflow.pipeline.sinks.delta.records import read_record, read_text

_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConsistentCut:
    """The newest source transaction a sink holds with every change of it and of every transaction before it."""

    source: str
    gtid: str  # the transaction's GTID
    position: tuple[int, int]  # as a position: after every change of the transaction
    source_ts_ms: int | None  # its commit time at the source
    computed_at_ms: int | None  # when the sink found it
    log_version: int = -1  # the sink's change log version that holds every change up to it


def log_path_of(spark: SparkSession, path: str) -> str:
    """The change log of a Delta sink given its `path` (the log at <path>/_changes) or the log's own path."""
    for candidate in (path, f"{path.rstrip('/')}/_changes"):
        if read_text(spark, f"{candidate.rstrip('/')}/{CUT_FILE}") is not None:
            return candidate
    raise ConfigError(f"{path}: no consistent cut is kept there; set consistent_cut: true in the Delta sink's options "
                      "and mysql.output.transaction_topic in the source's, and give the sink's path (or its "
                      "log_path)")  # fmt: skip


def consistent_cut(spark: SparkSession, path: str, source: str | None = None) -> ConsistentCut:
    """The sink's cut for `source` (may be left out when the sink has one MySQL source)."""
    log_path = log_path_of(spark, path)
    cut = _source_cut(read_cuts(spark, log_path), source, path)
    if cut.seq is None or cut.id is None:
        waiting = f" (waiting for {cut.waiting_for})" if cut.waiting_for else ""
        raise LookupError(f"{path}: no transaction of {cut.source} is whole in the sink yet{waiting}")
    return ConsistentCut(cut.source, cut.id, (cut.seq, _MAX), cut.ts_ms, cut.at_ms, cut.log_version)


def _source_cut(cuts: dict[str, SourceCut], source: str | None, path: str) -> SourceCut:
    if source is None:
        if len(cuts) != 1:
            raise ValueError(f"{path}: the sink keeps cuts of {sorted(cuts)}: name the source")
        return next(iter(cuts.values()))
    if source not in cuts:
        raise LookupError(f"{path}: no consistent cut of source {source!r} (known: {sorted(cuts)})")
    return cuts[source]


def at_cut(spark: SparkSession, path: str, source: str | None = None,
           cut: ConsistentCut | None = None) -> dict[str, DataFrame]:  # fmt: skip
    """Every MySQL table of `source` the sink holds, as "db.table" -> its rows as of `cut` (default: the sink's
    cut now), in the columns of its current view."""
    log_path = log_path_of(spark, path)
    cut = cut or consistent_cut(spark, path, source)
    tables: dict[str, DataFrame] = {}
    for state_path in (read_text(spark, f"{log_path.rstrip('/')}/_cdcflow_tables") or "").splitlines():
        record = read_record(spark, state_path) if state_path else None
        if record is None or record.source != cut.source or record.layout == "hbase":
            continue
        sql = history_reads.as_of_sql(spark, state_path, position=list(cut.position))
        tables[f"{record.db}.{record.table}"] = spark.sql(sql)
    return tables
