"""The Delta sink's consistent cut, kept up to date: the newest source transaction the sink holds whole.

Run by the fold thread's upkeep every `consistent_cut_interval_s` (and at the end of an --available-now run),
for each MySQL source whose capture writes a transaction topic (`mysql.output.transaction_topic`):

1. the transaction records written since the last ones read (a Kafka read of one partition; the topic is the
   source's, in either output format);
2. the distinct changes per (table, transaction) the change log holds past the cut: one Spark aggregation over
   the log versions that can hold them (from the oldest version with a change past the cut; the Change Data
   Feed reads only the files those versions added);
3. the rule of `tally.py`, then the result into `<log>/_cdcflow_cut.json` (`records.py` writes it whole or not
   at all), which readers use (`reads.py`) and a restart continues from.

Records read and not passed are kept in memory only: the file keeps the offset of the first of them, so a
restart reads them again. Nothing here changes data: a failure is logged and the next round tries again.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdcflow.clients.kafka import KafkaEndpoint, read_from
from cdcflow.clients.registry import SchemaRegistry
from cdcflow.events.debezium.transcode import Transcoder
from cdcflow.events.json_codec import MalformedEvent
from cdcflow.events.topics import change_topic
from cdcflow.events.transactions import TRANSACTION_SCHEMA_ID, TransactionEnd, read_transaction_record
from cdcflow.pipeline.sinks.delta.cut.state import CUT_FILE, SourceCut, read_cuts, write_cuts
from cdcflow.pipeline.sinks.delta.cut.tally import Pending, add_records, advance

log = logging.getLogger(__name__)

# Transaction records read per source and round, at most (a sink far behind reads the rest in later rounds).
RECORDS_PER_ROUND = 50_000
# Records kept in memory per source before the cut passes them; past this, reading waits for the cut.
MAX_PENDING = 200_000


Applied = dict[str, dict[tuple[str, int], int]]  # per source: distinct changes per ("db.table", position)
Oldest = dict[str, dict[int, int]]  # per source: the oldest log version holding a change of each position


@dataclass(frozen=True)
class TransactionSource:
    """A MySQL source whose capture writes transaction records: its name, its transaction topic, and the
    prefix of its change topics (which tables the sink takes follows from the sink's topic pattern)."""

    source: str
    topic: str
    topic_prefix: str


class CutTracker:
    def __init__(self, sink: str, log_path: str, sources: Sequence[TransactionSource], bootstrap: KafkaEndpoint,
                 registry_url: str | None, every_s: float) -> None:  # fmt: skip
        self.sink = sink
        self.log_path = log_path
        self.sources = list(sources)
        self.bootstrap = bootstrap
        self.every_s = every_s
        self.topics_pattern: str | None = None  # the sink's subscribe pattern (set by the runner): tables it takes
        self._transcoder = Transcoder(SchemaRegistry(registry_url).schema if registry_url else None)
        self._cuts: dict[str, SourceCut] | None = None  # per source, as last written
        self._pending: dict[str, dict[int, Pending]] = {s.source: {} for s in self.sources}
        self._next_offset: dict[str, int] = {}
        self._counted_version = -2  # the log version the last count read up to
        self._last_step = 0.0
        self.malformed = 0  # transaction records that were not readable (skipped, logged)
        self.steps = 0
        # Rounds take turns: the fold thread's upkeep and a flush (an --available-now run's end, a job's own call)
        # may both move the cut, and each round reads on from where the last one stopped.
        self._round = threading.Lock()

    # --- what the sink takes -------------------------------------------------------------------------------
    def _takes(self, source: TransactionSource) -> Callable[[str], bool]:
        pattern = re.compile(self.topics_pattern) if self.topics_pattern else None

        def takes(table: str) -> bool:
            db, _, name = table.partition(".")
            return pattern is None or pattern.fullmatch(change_topic(source.topic_prefix, db, name)) is not None

        return takes

    # --- a round -------------------------------------------------------------------------------------------
    def step(self, spark: SparkSession, log_version: int, force: bool = False) -> None:
        """Read what is new and move the cut, if `every_s` passed since the last round (or `force`)."""
        with self._round:
            self._step(spark, log_version, force)

    def _step(self, spark: SparkSession, log_version: int, force: bool) -> None:
        now = time.monotonic()
        if not self.sources or (not force and now - self._last_step < self.every_s):
            return
        self._last_step = now
        cuts = self._load(spark)
        read = sum(self._read_records(s, cuts[s.source]) for s in self.sources)
        if log_version < 0 or (read == 0 and log_version == self._counted_version and not force):
            return
        applied, oldest = self._applied(spark, cuts, log_version)
        changed = False
        for s in self.sources:
            before = cuts[s.source]
            cuts[s.source] = self._advanced(s, before, applied, oldest, log_version)
            changed = changed or cuts[s.source] != before
        self._counted_version = log_version
        self.steps += 1
        if changed:
            write_cuts(spark, self.log_path, cuts)
            self._cuts = cuts

    def _load(self, spark: SparkSession) -> dict[str, SourceCut]:
        if self._cuts is None:
            stored = read_cuts(spark, self.log_path)
            self._cuts = {s.source: stored.get(s.source) or SourceCut(s.source, s.topic) for s in self.sources}
            for s in self.sources:
                self._next_offset[s.source] = self._cuts[s.source].offset
        return dict(self._cuts)

    def _read_records(self, s: TransactionSource, cut: SourceCut) -> int:
        pending = self._pending[s.source]
        if len(pending) >= MAX_PENDING:
            return 0
        records = read_from(self.bootstrap, s.topic, 0, self._next_offset[s.source], RECORDS_PER_ROUND)
        ends: list[Pending] = []
        for record in records:
            self._next_offset[s.source] = record.offset + 1
            end = self._record(s, record.offset, record.value)
            if end is not None:
                ends.append(Pending(end, record.offset))
        add_records(pending, ends, cut.seq)
        return len(records)

    def _record(self, s: TransactionSource, offset: int, value: bytes | None) -> TransactionEnd | None:
        """One record of the transaction topic: an END (a BEGIN, a tombstone: None). An unreadable record is
        logged and skipped: it cannot hold the cut back forever, and says which transaction it was not."""
        if value is None:
            return None
        end: TransactionEnd | None
        try:
            if value.startswith(b"{") and TRANSACTION_SCHEMA_ID.encode() in value[:64]:
                end = read_transaction_record(value)
            else:
                end = self._transcoder.transaction(s.source, value)
        except (MalformedEvent, ValueError) as exc:
            self.malformed += 1
            log.error("sink %s: transaction record at offset %d of %s is not readable (%s): skipped; the consistent "
                      "cut of %s goes on without it", self.sink, offset, s.topic, exc, s.source)  # fmt: skip
            return None
        if end is not None and end.source != s.source:
            return None  # another source's record in a shared topic
        return end

    def _applied(self, spark: SparkSession, cuts: dict[str, SourceCut], log_version: int) -> tuple[Applied, Oldest]:
        """Per source: distinct changes the log holds per ("db.table", position) past the cut, and the oldest log
        version holding each position."""
        applied: Applied = {s.source: {} for s in self.sources}
        oldest: Oldest = {s.source: {} for s in self.sources}
        start = min(max(c.from_version, 0) for c in cuts.values())
        if start > log_version:
            return applied, oldest
        for row in past_the_cut(spark, self.log_path, cuts, start, log_version).collect():
            source, seq = str(row["source_name"]), int(row["seq"])
            key = (f"{row['db']}.{row['table']}", seq)
            applied[source][key] = int(row["changes"])
            oldest[source][seq] = min(oldest[source].get(seq, 1 << 62), int(row["version"]))
        return applied, oldest

    def _advanced(self, s: TransactionSource, cut: SourceCut, applied: Applied, oldest: Oldest,
                  log_version: int) -> SourceCut:  # fmt: skip
        pending = self._pending[s.source]
        moved = advance(pending, applied[s.source], self._takes(s))
        self._pending[s.source] = moved.pending
        seq, txn_id, ts_ms = cut.seq, cut.id, cut.ts_ms
        if moved.cut is not None:
            seq, txn_id, ts_ms = moved.cut.end.seq, moved.cut.end.id, moved.cut.end.ts_ms
        # re-read after a restart: from the first record not passed (else after the last read)
        offset = min((p.offset for p in moved.pending.values()), default=self._next_offset[s.source])
        later = [v for q, v in oldest[s.source].items() if seq is None or q > seq]
        from_version = min(later, default=log_version + 1)
        if moved.problem and moved.problem != cut.problem:
            log.error("sink %s: the consistent cut of %s stays at %s: %s", self.sink, s.source, txn_id, moved.problem)
        waiting = {t: list(v) for t, v in moved.waiting_for.items()}
        if moved.cut is not None:
            log.info("sink %s: consistent cut of %s at %s (position %d); %d transaction record(s) waiting",
                     self.sink, s.source, txn_id, seq, len(moved.pending))  # fmt: skip
        return SourceCut(s.source, s.topic, seq, txn_id, ts_ms, offset, from_version, int(time.time() * 1000),
                         log_version, waiting, len(moved.pending), moved.problem)  # fmt: skip

    # --- what others ask -----------------------------------------------------------------------------------
    def oldest_needed_version(self) -> int | None:
        """The oldest log version a round still reads (VACUUM must keep its files), None when none."""
        if not self._cuts:
            return None
        return min(c.from_version for c in self._cuts.values())

    def status(self) -> dict[str, Any]:
        cuts = self._cuts or {}
        return {name: {**c.summary(), "malformed_records": self.malformed} for name, c in cuts.items()}


def past_the_cut(spark: SparkSession, log_path: str, cuts: dict[str, SourceCut], start: int, end: int) -> DataFrame:
    """Distinct changes per (source, table, position) in log versions start..end past each source's cut; snapshot
    reads (op r) are no transaction's. A change stored twice is one change (its identity: log.IDENTITY)."""
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", start).option("endingVersion", end).load(log_path)
    )  # fmt: skip
    seq = F.col("pos")[0]
    past = F.lit(False)
    for c in cuts.values():
        past = past | ((F.col("source_name") == c.source) & (seq > F.lit(-1 if c.seq is None else c.seq)))
    identity = F.struct(F.coalesce("event_key", F.lit(b"")), "region", "pos", F.coalesce("cluster_id", F.lit("")))
    rows = feed.where((F.col("_change_type") == "insert") & (F.col("connector") == "mysql") & (F.col("op") != "r"))
    return (
        rows.where(past).groupBy("source_name", "db", "table", seq.alias("seq"))
        .agg(F.count_distinct(identity).alias("changes"), F.min("_commit_version").alias("version"))
    )  # fmt: skip


__all__ = ["CUT_FILE", "CutTracker", "TransactionSource", "past_the_cut"]
