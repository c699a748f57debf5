"""One batch of Kafka records applied to one sink: parsed (and deduplicated when the sink asks), its malformed
records dead-lettered, the sink's apply, the oversize changes' second pass, then the sink's progress and metrics.
A batch of a sink's own query and a chunk of a grouped sink's catch-up go through here alike."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F

from cdcflow.config import PipelineConfig
from cdcflow.pipeline import metrics, oversize
from cdcflow.pipeline.batch_ranges import records_per_topic
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.dead_letters import write_dead_letters
from cdcflow.pipeline.debezium_input import transcoded
from cdcflow.pipeline.envelope import OVERSIZE, dedupe, events_of, heartbeat_ts, is_malformed, malformed_of, parse
from cdcflow.pipeline.kafka_source import in_few_tasks
from cdcflow.pipeline.progress import write_progress
from cdcflow.pipeline.queries import QuerySink

log = logging.getLogger(__name__)


@dataclass
class Applied:
    """What applying one batch to one sink did."""

    rows: int = 0
    dead: int = 0
    max_ts: int | None = None
    heartbeat_ts: int | None = None
    oversized: dict[str, Any] = field(default_factory=dict)


# How long the runner waits for a sink action's observed counts after the action returned. Spark
# delivers them with the action's end, so this only bounds a case that should not happen.
OBSERVED_WAIT_SECONDS = 30.0


def observed_metrics(observation: Observation, wait_s: float = OBSERVED_WAIT_SECONDS) -> dict[str, Any] | None:
    """The metrics of an Observation whose action has run, or None if Spark did not report them
    within `wait_s` (Observation.get itself would wait for ever)."""
    result: list[dict[str, Any]] = []
    reader = threading.Thread(target=lambda: result.append(observation.get), daemon=True)
    reader.start()
    reader.join(wait_s)
    return result[0] if result else None


def checkpoint_query_id(checkpoint: Path) -> str | None:
    """The query id Spark keeps in a checkpoint's `metadata` file (written before the first batch)."""
    try:
        return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


class SinkBatches:
    """Applies batches to sinks and keeps each sink's progress document and metrics."""

    def __init__(self, cfg: PipelineConfig, context: Endpoints, checkpoint_root: Path) -> None:
        self.cfg = cfg
        self.context = context
        self.checkpoint_root = checkpoint_root
        self._progress_lock = threading.Lock()

    def record(self, m: QuerySink, **fields: Any) -> None:
        """Update a sink's progress document (from a query's thread, a catch-up or the supervisor)."""
        with self._progress_lock:
            m.doc.update(fields, sink=m.name, updated_at_ms=int(time.time() * 1000))
            write_progress(self.checkpoint_root / m.name, m.doc)

    def prepared(self, raw: DataFrame, dedupe_it: bool) -> DataFrame:
        raw = in_few_tasks(raw)
        debezium_topics = self.context.debezium_topics
        if debezium_topics:  # debezium-format topics become cdcflow events first
            raw = transcoded(raw, debezium_topics, self.context.schema_registry_url,
                             tuple(self.context.debezium_heartbeat_topics or ()))  # fmt: skip
        parsed = parse(raw)
        return dedupe(parsed) if dedupe_it else parsed

    @staticmethod
    def counts(events: Column, dead: Column, suffix: str = "") -> list[Column]:
        """A batch's counts for one sink: `events` marks its records, `dead` the malformed ones it dead-letters."""
        valid = F.col("problem").isNull() & events
        return [
            F.count(F.when(valid, 1)).alias(f"rows{suffix}"),
            F.count(F.when(is_malformed(F.col("problem")) & dead, 1)).alias(f"dead{suffix}"),
            F.max(F.when(valid, F.col("source.ts_ms"))).alias(f"max_ts{suffix}"),
            heartbeat_ts(events).alias(f"heartbeat_ts{suffix}"),
            F.count(F.when((F.col("problem") == F.lit(OVERSIZE)) & events, 1)).alias(f"oversize{suffix}"),
        ]

    def dead_letter(self, name: str, parsed: DataFrame, owned: Column, batch_id: int, dead: int) -> None:
        write_dead_letters(malformed_of(parsed).where(owned), F.col("raw"), F.col("problem"), batch_id, self.context,
                           name)  # fmt: skip
        log.warning("sink %s: batch %d: %d malformed record(s) went to the dead-letter topic %s", name, batch_id, dead,
                    self.context.dead_letter_topic)  # fmt: skip

    def apply_one(self, m: QuerySink, raw: DataFrame, batch_id: int, owned: Column, heartbeats_only: bool) -> Applied:
        """Apply a batch of Kafka records to one sink: a batch of its own query, or a chunk of its catch-up.
        `owned`: the malformed records it dead-letters."""
        sink = m.sink
        counts = self.counts(F.lit(True), owned)

        def prepared() -> DataFrame:
            return self.prepared(raw, sink.wants_deduplicated_events)

        stats: Any
        if heartbeats_only:
            # Heartbeats only: counted as progress, the sink left alone (nothing to apply). A record in a
            # heartbeat topic that is an event after all takes the usual path below.
            stats = prepared().agg(*counts).first()
            dead = int(stats["dead"] or 0) if stats else 0
            if dead:
                self.dead_letter(sink.name, prepared(), owned, batch_id, dead)
            if stats and stats["rows"]:
                log.warning("sink %s: batch %d: %d change event(s) in a heartbeat topic; applying them",
                            sink.name, batch_id, stats["rows"])  # fmt: skip
                sink.apply_batch(events_of(prepared()), batch_id)
        elif sink.reads_events_once:
            # One job: the counts ride along the sink's own action. The rare batch with
            # malformed records is parsed a second time for its dead letters, after the sink.
            observed = Observation(f"cdcflow-{sink.name}-{batch_id}-{time.monotonic_ns()}")
            sink.apply_batch(events_of(prepared().observe(observed, *counts)), batch_id)
            stats = observed_metrics(observed)
            if stats is None:  # not reported (never seen): count with a job of their own
                log.warning("sink %s: batch %d: the observed counts did not arrive; counting again",
                            sink.name, batch_id)  # fmt: skip
                stats = prepared().agg(*counts).first()
            dead = int(stats["dead"] or 0) if stats else 0
            if dead:
                self.dead_letter(sink.name, prepared(), owned, batch_id, dead)
        else:
            # Parsed and deduplicated once, kept for the sink's jobs and the dead letters.
            batch = prepared().persist()
            try:
                stats = batch.agg(*counts).first()
                dead = int(stats["dead"]) if stats else 0
                if dead:
                    self.dead_letter(sink.name, batch, owned, batch_id, dead)
                sink.apply_batch(events_of(batch), batch_id)
            finally:
                batch.unpersist()
        applied = Applied(rows=int(stats["rows"]) if stats else 0, dead=dead,
                          max_ts=stats["max_ts"] if stats else None,
                          heartbeat_ts=stats["heartbeat_ts"] if stats else None)  # fmt: skip
        if stats and stats["oversize"]:
            self.oversize_pass(m, prepared(), m.owned(), batch_id, applied)
        return applied

    def oversize_pass(self, m: QuerySink, parsed: DataFrame, owned: Column, batch_id: int, applied: Applied) -> None:
        """The batch's oversize markers: a second pass of the sink with their whole changes."""
        done, dead_markers, unapplied = self.apply_oversize(m, parsed, owned, batch_id)
        applied.rows += done
        applied.dead += dead_markers
        tables = dict(m.doc.get("unapplied") or {})
        for table, n in unapplied.items():
            tables[table] = int(tables.get(table, 0)) + n
        applied.oversized = {"oversize_applied": int(m.doc.get("oversize_applied", 0)) + done, "unapplied": tables}

    def note_applied(
        self,
        m: QuerySink,
        batch_id: int,
        started: float,
        applied: Applied,
        heartbeat_batch: int | None = None,
        state: str = "applying",
        **more: Any,
    ) -> None:
        """A sink applied a batch (or a chunk of its catch-up): its progress, metrics and log line. Heartbeats are
        noted under `heartbeat_batch` (default: the batch's id; -1: vouched by the next batch to reach the end)."""
        if applied.heartbeat_ts:
            # Two entries at most: the earlier ones merged under their newest batch (counted no sooner
            # than that one would be), and this batch's.
            if m.heartbeats:
                m.heartbeats = [(max(b for b, _ in m.heartbeats), max(ts for _, ts in m.heartbeats))]
            m.heartbeats.append((batch_id if heartbeat_batch is None else heartbeat_batch, int(applied.heartbeat_ts)))
        now_ms = int(time.time() * 1000)
        lag_ms = now_ms - applied.max_ts if applied.max_ts else None
        self.record(
            m, state=state, error=None, batch_id=batch_id, rows=applied.rows, applied_at_ms=now_ms,
            duration_ms=int((time.time() - started) * 1000),
            last_source_ts_ms=newest(applied.max_ts, m.doc.get("last_source_ts_ms")), lag_ms=lag_ms,
            heartbeats_pending=m.heartbeats,
            total_rows=int(m.doc.get("total_rows", 0)) + applied.rows,
            dead_letters=int(m.doc.get("dead_letters", 0)) + applied.dead, **applied.oversized, **m.sink.status(),
            **more,
        )  # fmt: skip
        metrics.ROWS.labels(m.name).inc(applied.rows)
        metrics.DEAD_LETTERS.labels(m.name).inc(applied.dead)
        metrics.FAILING.labels(m.name).set(0)
        metrics.LAST_BATCH_TIME.labels(m.name).set(now_ms / 1000)
        if lag_ms is not None:
            metrics.LAG_SECONDS.labels(m.name).set(lag_ms / 1000)
        if applied.max_ts:
            metrics.LAST_SOURCE_TIME.labels(m.name).set(applied.max_ts / 1000)
        log.info("sink %s: batch %d applied %d rows in %d ms, lag %s ms", m.name, batch_id, applied.rows,
                 m.doc["duration_ms"], lag_ms)  # fmt: skip

    def failed(self, m: QuerySink, reason: str) -> None:
        """A grouped sink's part of a batch or its catch-up failed: retried after a back-off (the group goes on)."""
        m.failures += 1
        m.last_error = reason
        backoff = min(self.cfg.retry_backoff_max_s, 2.0**m.failures)
        m.next_try = time.monotonic() + backoff
        metrics.FAILURES.labels(m.name).inc()
        metrics.FAILING.labels(m.name).set(1)
        self.record(m, state="failing", error=reason, failures=m.failures,
                    retry_at_ms=int((time.time() + backoff) * 1000))  # fmt: skip

    def apply_oversize(
        self, m: QuerySink, parsed: DataFrame, owned: Column, batch_id: int
    ) -> tuple[int, int, dict[str, int]]:
        """Put the batch's oversize markers back together and have the sink apply them: (changes applied,
        markers this sink dead-lettered, db.table -> changes that stay unapplied)."""
        spark = parsed.sparkSession
        started = time.perf_counter()
        whole, unapplied = oversize.put_together(oversize.markers(parsed, owned), self.context)
        if whole:
            events = parse(oversize.as_kafka_rows(spark, whole))
            if m.sink.wants_deduplicated_events:
                events = dedupe(events)
            m.sink.apply_reassembled(events_of(events), batch_id)
            metrics.OVERSIZE_APPLIED.labels(m.name).inc(len(whole))
        tables: dict[str, int] = {}
        for u in unapplied:
            log.error("sink %s: batch %d: %s (marker at %s partition %d offset %d%s)", m.name, batch_id, u.reason,
                      u.topic, u.partition, u.offset, ", dead-lettered" if u.owned else "")  # fmt: skip
            tables[u.table] = tables.get(u.table, 0) + 1
            metrics.UNAPPLIED.labels(m.name, u.table).inc()
        owned_letters = oversize.dead_letter_rows(spark, unapplied)
        dead = sum(1 for u in unapplied if u.owned)
        if dead:
            write_dead_letters(owned_letters, F.col("raw"), F.col("problem"), batch_id, self.context, m.name)
        log.info("sink %s: batch %d: %d oversize change(s) put together and applied, %d not, in %.2f s", m.name,
                 batch_id, len(whole), len(unapplied), time.perf_counter() - started)  # fmt: skip
        return len(whole), dead, tables

    def heartbeats_only(self, batch: DataFrame) -> bool:
        """Whether a batch holds records of the sources' heartbeat topics only (or none at all)."""
        beats = self.context.heartbeat_topics
        if not beats:
            return False
        counts = records_per_topic(batch)
        return counts is not None and all(topic in beats or n == 0 for topic, n in counts.items())

    def vouched(self, m: QuerySink, batch_id: int) -> dict[str, Any]:
        """Heartbeats (events/heartbeats.py) count towards a sink's progress once it applied every change written
        before them. Batch `batch_id` read up to Kafka's end (nothing behind) as it was after the earlier
        batches ran, so it holds every change written before a heartbeat those batches saw. Not the
        heartbeats of this batch: its end offsets were not read at one instant across partitions."""
        seen = [ts for b, ts in m.heartbeats if b < batch_id]
        if not seen:
            return {}
        m.heartbeats = [(b, ts) for b, ts in m.heartbeats if b >= batch_id]
        vouched = newest(max(seen), m.doc.get("last_source_ts_ms"))
        assert vouched is not None
        lag_ms = max(0, int(time.time() * 1000) - vouched)
        metrics.LAG_SECONDS.labels(m.name).set(lag_ms / 1000)
        metrics.LAST_SOURCE_TIME.labels(m.name).set(vouched / 1000)
        return {"last_source_ts_ms": vouched, "lag_ms": lag_ms, "heartbeats_pending": m.heartbeats}


def newest(*times: int | None) -> int | None:
    known = [t for t in times if t]
    return max(known) if known else None


# "x.YError: text"; Py4J puts a Java exception on a line of its own as ": java.x.YException: text".
_ERROR_LINE = re.compile(r"^\s*(?::\s*)?([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def first_line(exc: BaseException) -> str:
    """The useful line of a query failure: the sink's own error (e.g. "cdcflow.errors.
    HBaseTerminalError: TableNotFoundException: ...") rather than Py4J's and Spark's wrappers."""
    text = str(exc).strip()
    errors = [f"{m.group(1)}: {m.group(2)}".strip() for line in text.splitlines() if (m := _ERROR_LINE.match(line))]
    ours = [e for e in errors if e.startswith("cdcflow.")]
    theirs = [e for e in errors if not e.startswith(("py4j.", "org.apache.spark.", "pyspark."))]
    best = (ours or theirs or errors or text.splitlines() or [type(exc).__name__])[0]
    return best[:500]
