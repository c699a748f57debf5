"""Runs the pipeline: one Structured Streaming query per sink.

Why one query per sink (docs/decisions/0002-pipeline-queries.md): each query has its own
Kafka offsets in its own checkpoint, so each sink has its own progress; a failing sink's query
stops and is restarted with back-off while the other queries keep applying; lag is per query.
The cost is that every sink reads the topics itself. Malformed records are dead-lettered by the
first sink (in config order) whose topics hold them, from the same parse as its events
(docs/decisions/0009-dead-letters-in-the-sink-queries.md).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from cdcflow.clients.kafka.java import java_client_options
from cdcflow.config import PipelineConfig
from cdcflow.errors import ConfigError
from cdcflow.pipeline import metrics, oversize
from cdcflow.pipeline.batch_ranges import records_per_topic
from cdcflow.pipeline.dead_letters import write_dead_letters
from cdcflow.pipeline.debezium_input import transcoded
from cdcflow.pipeline.envelope import OVERSIZE, dedupe, events_of, heartbeat_ts, is_malformed, malformed_of, parse
from cdcflow.pipeline.offsets import checkpoint_lock
from cdcflow.pipeline.progress import PROGRESS_FILE, write_progress
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.registry import make_sink

log = logging.getLogger(__name__)
# How often the supervisor looks at its queries: an --available-now run ends at most this long
# after its last query did.
POLL_SECONDS = 0.2
TOPICS_FILE = "cdcflow-topics"  # the subscribePattern a query's checkpoint was made with
# A batch's Kafka reads end at the topics' end, where the consumer's next fetch waits for new records
# up to fetch.max.wait.ms (500 by default) before the task that read the batch can finish: measured
# 0.76 s → 0.29 s per task for the last batch of a backlog, every batch of a stream that keeps up.
# The broker still answers at once when records are there, so reads of a backlog lose nothing.
FETCH_MAX_WAIT_MS = 10


@dataclass
class _Runner:
    name: str
    sink: Sink
    topics: str  # the query's subscribePattern
    # Patterns of the sinks before this one: their queries dead-letter malformed records of those
    # topics, so each malformed record is written once, by the first sink that reads it.
    earlier_topics: tuple[str, ...] = ()
    query: StreamingQuery | None = None
    failures: int = 0
    topic_restarts: int = 0
    next_start: float = 0.0
    done: bool = False
    last_error: str | None = None
    last_progress_batch: int = -1
    # (batch id, source time) of heartbeats read but not yet counted towards progress (Pipeline._vouched)
    heartbeats: list[tuple[int, int]] = field(default_factory=list)
    # What `cdcflow pipeline status` shows; written to <checkpoint>/cdcflow-progress.json.
    doc: dict[str, Any] = field(default_factory=dict)


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


def owned_topics(pattern: str, earlier: tuple[str, ...]) -> str:
    """A regex for the topics a query reads (`pattern`) that no earlier query reads: the topics
    whose malformed records it dead-letters. Whole-name matches, as Kafka's subscribePattern."""
    return "".join(f"(?!(?:{other})$)" for other in earlier) + f"(?:{pattern})"


def owns_topic(topic: Column, pattern: str, earlier: tuple[str, ...]) -> Column:
    return topic.rlike(f"^{owned_topics(pattern, earlier)}$")


def check_topic_patterns(cfg: PipelineConfig, checkpoint_root: Path, patterns: dict[str, str]) -> None:
    """Refuse to continue a checkpoint under another topic pattern, then record each query's pattern.

    Spark's Kafka source cannot: partitions that left the subscription read as lost data
    ("Some data may have been lost"), and the query fails on every start. Checkpoints from before
    cdcflow recorded patterns were all made with `pipeline.topics`."""
    changed = []
    for name, pattern in patterns.items():
        folder = checkpoint_root / name
        recorded = folder / TOPICS_FILE
        if recorded.exists():
            before: str | None = recorded.read_text()
        else:
            before = cfg.topics if (folder / "offsets").is_dir() else None
        if before is not None and before != pattern:
            changed.append(f"{name}: {before} → {pattern} (checkpoint {folder})")
    if changed:
        raise ConfigError(
            "the topic pattern of a query changed since its checkpoint was made, which Spark's Kafka source "
            "cannot continue: " + "; ".join(changed) + ". Restore the old pattern, or move the checkpoint folder "
            "away: the query then reads its topics from the start again, which cdcflow's sinks apply "
            "idempotently (the parquet debugging sink excepted)."
        )
    for name, pattern in patterns.items():
        (checkpoint_root / name).mkdir(parents=True, exist_ok=True)
        (checkpoint_root / name / TOPICS_FILE).write_text(pattern)


LIVE_AFTER_S = 120.0  # the supervising loop runs every POLL_SECONDS; this long without a round: stuck


class Pipeline:
    def __init__(self, cfg: PipelineConfig, context: dict[str, Any], checkpoint_root: Path) -> None:
        self.cfg = cfg
        self.context = {**context, "dead_letter_topic": cfg.dead_letter_topic, "checkpoint_root": str(checkpoint_root)}
        self.checkpoint_root = checkpoint_root
        self.sinks: list[Sink] = [make_sink(s, self.context) for s in cfg.sinks]
        # kafka.properties (SASL, TLS) as Spark's Kafka options: the pipeline connects like the captures.
        self.kafka_options = {
            f"kafka.{k}": v for k, v in java_client_options(context.get("kafka_properties") or {}).items()
        }
        self.spark: SparkSession | None = None
        self._progress_lock = threading.Lock()
        self.last_tick = 0.0  # monotonic time of the supervising loop's last round: liveness
        self.waiting: list[str] | None = None  # sinks without a running query (None: not started): readiness

    def _source(self, spark: SparkSession, topics: str) -> DataFrame:
        return (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.context["bootstrap_servers"])
            .option("subscribePattern", topics)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(self.cfg.max_offsets_per_trigger))
            .option("kafka.metadata.max.age.ms", "5000")
            .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
            .options(**self.kafka_options)
            .load()
        )

    def _record(self, r: _Runner, **fields: Any) -> None:
        """Update a query's progress document (from the query's thread or the supervisor)."""
        with self._progress_lock:
            r.doc.update(fields, sink=r.name, updated_at_ms=int(time.time() * 1000))
            write_progress(self.checkpoint_root / r.name, r.doc)

    def _sink_fn(self, r: _Runner) -> Any:
        sink = r.sink
        debezium_topics = self.context.get("debezium_topics")

        def apply(df: DataFrame, batch_id: int) -> None:
            started = time.time()
            if sink.query_id is None:
                sink.query_id = checkpoint_query_id(self.checkpoint_root / r.name)
            owned = owns_topic(F.col("topic"), r.topics, r.earlier_topics)
            counts = (
                F.count(F.when(F.col("problem").isNull(), 1)).alias("rows"),
                F.count(F.when(is_malformed(F.col("problem")) & owned, 1)).alias("dead"),
                F.max(F.when(F.col("problem").isNull(), F.col("source.ts_ms"))).alias("max_ts"),
                heartbeat_ts().alias("heartbeat_ts"),
                F.count(F.when(F.col("problem") == F.lit(OVERSIZE), 1)).alias("oversize"),
            )

            def dead_letter(batch: DataFrame, dead: int) -> None:
                write_dead_letters(malformed_of(batch).where(owned), F.col("raw"), F.col("problem"), batch_id,
                                   self.context, sink.name)  # fmt: skip
                log.warning("sink %s: batch %d: %d malformed record(s) went to the dead-letter topic %s",
                            sink.name, batch_id, dead, self.context["dead_letter_topic"])  # fmt: skip

            def prepared(raw: DataFrame) -> DataFrame:
                if debezium_topics:  # debezium-format topics become cdcflow events first
                    raw = transcoded(raw, debezium_topics, self.context.get("schema_registry_url"),
                                     tuple(self.context.get("debezium_heartbeat_topics") or ()))  # fmt: skip
                parsed = parse(raw)
                return dedupe(parsed) if sink.wants_deduplicated_events else parsed

            stats: Any
            if self._heartbeats_only(df):
                # Heartbeats only: counted as progress, the sink left alone (nothing to apply). A record in a
                # heartbeat topic that is an event after all takes the usual path below.
                stats = prepared(df).agg(*counts).first()
                dead = int(stats["dead"] or 0) if stats else 0
                if dead:
                    dead_letter(prepared(df), dead)
                if stats and stats["rows"]:
                    log.warning("sink %s: batch %d: %d change event(s) in a heartbeat topic; applying them",
                                sink.name, batch_id, stats["rows"])  # fmt: skip
                    sink.apply_batch(events_of(prepared(df)), batch_id)
            elif sink.reads_events_once:
                # One job: the counts ride along the sink's own action. The rare batch with
                # malformed records is parsed a second time for its dead letters, after the sink.
                observed = Observation(f"cdcflow-{sink.name}-{batch_id}-{time.monotonic_ns()}")
                sink.apply_batch(events_of(prepared(df).observe(observed, *counts)), batch_id)
                stats = observed_metrics(observed)
                if stats is None:  # not reported (never seen): count with a job of their own
                    log.warning("sink %s: batch %d: the observed counts did not arrive; counting again",
                                sink.name, batch_id)  # fmt: skip
                    stats = prepared(df).agg(*counts).first()
                dead = int(stats["dead"] or 0) if stats else 0
                if dead:
                    dead_letter(prepared(df), dead)
            else:
                # Parsed and deduplicated once, kept for the sink's jobs and the dead letters.
                batch = prepared(df).persist()
                try:
                    stats = batch.agg(*counts).first()
                    dead = int(stats["dead"]) if stats else 0
                    if dead:
                        dead_letter(batch, dead)
                    sink.apply_batch(events_of(batch), batch_id)
                finally:
                    batch.unpersist()
            rows = int(stats["rows"]) if stats else 0
            max_ts = stats["max_ts"] if stats else None
            oversized: dict[str, Any] = {}
            if stats and stats["oversize"]:
                # The batch's oversize markers: a second pass of the sink with their whole changes.
                applied, dead_markers, unapplied = self._apply_oversize(r, prepared(df), owned, batch_id)
                rows += applied
                dead += dead_markers
                tables = dict(r.doc.get("unapplied") or {})
                for table, n in unapplied.items():
                    tables[table] = int(tables.get(table, 0)) + n
                oversized = {"oversize_applied": int(r.doc.get("oversize_applied", 0)) + applied,
                             "unapplied": tables}  # fmt: skip
            if stats and stats["heartbeat_ts"]:
                # Two entries at most: the earlier ones merged under their newest batch (counted no sooner
                # than that one would be), and this batch's.
                if r.heartbeats:
                    r.heartbeats = [(max(b for b, _ in r.heartbeats), max(ts for _, ts in r.heartbeats))]
                r.heartbeats.append((batch_id, int(stats["heartbeat_ts"])))
            now_ms = int(time.time() * 1000)
            lag_ms = now_ms - max_ts if max_ts else None
            self._record(
                r, state="applying", error=None, batch_id=batch_id, rows=rows, applied_at_ms=now_ms,
                duration_ms=int((time.time() - started) * 1000),
                last_source_ts_ms=_newest(max_ts, r.doc.get("last_source_ts_ms")), lag_ms=lag_ms,
                heartbeats_pending=r.heartbeats,
                total_rows=int(r.doc.get("total_rows", 0)) + rows,
                dead_letters=int(r.doc.get("dead_letters", 0)) + dead, **oversized, **sink.status(),
            )  # fmt: skip
            metrics.ROWS.labels(r.name).inc(rows)
            metrics.DEAD_LETTERS.labels(r.name).inc(dead)
            metrics.FAILING.labels(r.name).set(0)
            metrics.LAST_BATCH_TIME.labels(r.name).set(now_ms / 1000)
            if lag_ms is not None:
                metrics.LAG_SECONDS.labels(r.name).set(lag_ms / 1000)
            if max_ts:
                metrics.LAST_SOURCE_TIME.labels(r.name).set(max_ts / 1000)
            log.info("sink %s: batch %d applied %d rows in %d ms, lag %s ms", sink.name, batch_id, rows,
                     r.doc["duration_ms"], lag_ms)  # fmt: skip

        return apply

    def _apply_oversize(
        self, r: _Runner, parsed: DataFrame, owned: Column, batch_id: int
    ) -> tuple[int, int, dict[str, int]]:
        """Put the batch's oversize markers back together and have the sink apply them: (changes applied,
        markers this sink dead-lettered, db.table -> changes that stay unapplied)."""
        spark = parsed.sparkSession
        started = time.perf_counter()
        whole, unapplied = oversize.put_together(oversize.markers(parsed, owned), self.context)
        if whole:
            events = parse(oversize.as_kafka_rows(spark, whole))
            if r.sink.wants_deduplicated_events:
                events = dedupe(events)
            r.sink.apply_reassembled(events_of(events), batch_id)
            metrics.OVERSIZE_APPLIED.labels(r.name).inc(len(whole))
        tables: dict[str, int] = {}
        for u in unapplied:
            log.error("sink %s: batch %d: %s (marker at %s partition %d offset %d%s)", r.name, batch_id, u.reason,
                      u.topic, u.partition, u.offset, ", dead-lettered" if u.owned else "")  # fmt: skip
            tables[u.table] = tables.get(u.table, 0) + 1
            metrics.UNAPPLIED.labels(r.name, u.table).inc()
        owned_letters = oversize.dead_letter_rows(spark, unapplied)
        dead = sum(1 for u in unapplied if u.owned)
        if dead:
            write_dead_letters(owned_letters, F.col("raw"), F.col("problem"), batch_id, self.context, r.name)
        log.info("sink %s: batch %d: %d oversize change(s) put together and applied, %d not, in %.2f s", r.name,
                 batch_id, len(whole), len(unapplied), time.perf_counter() - started)  # fmt: skip
        return len(whole), dead, tables

    def _heartbeats_only(self, batch: DataFrame) -> bool:
        """Whether a batch holds records of the sources' heartbeat topics only (or none at all)."""
        beats = self.context.get("heartbeat_topics")
        if not beats:
            return False
        counts = records_per_topic(batch)
        return counts is not None and all(topic in beats or n == 0 for topic, n in counts.items())

    def _query_progress(self, r: _Runner) -> None:
        """Fold Spark's StreamingQueryProgress of the last batch into the sink's progress."""
        q = r.query
        p = q.lastProgress if q is not None else None
        if not p or p.get("batchId", -1) == r.last_progress_batch:
            return
        r.last_progress_batch = p["batchId"]
        behind = [
            int(float(v)) for s in p.get("sources", []) for k, v in (s.get("metrics") or {}).items()
            if k == "maxOffsetsBehindLatest"
        ]  # fmt: skip
        fields: dict[str, Any] = {
            "spark_batch_id": p["batchId"], "input_rows": p.get("numInputRows"),
            "input_rows_per_second": round(p.get("inputRowsPerSecond") or 0.0, 1),
            "processed_rows_per_second": round(p.get("processedRowsPerSecond") or 0.0, 1),
            "batch_duration_ms": (p.get("durationMs") or {}).get("triggerExecution"),
            "offsets_behind": max(behind) if behind else None,
        }  # fmt: skip
        if fields["offsets_behind"] == 0:
            fields |= self._vouched(r, p["batchId"])
        self._record(r, **fields)
        metrics.ROWS_PER_SECOND.labels(r.name).set(fields["processed_rows_per_second"])
        if fields["batch_duration_ms"] is not None:
            metrics.BATCH_SECONDS.labels(r.name).set(fields["batch_duration_ms"] / 1000)
        if fields["offsets_behind"] is not None:
            metrics.OFFSETS_BEHIND.labels(r.name).set(fields["offsets_behind"])

    def _vouched(self, r: _Runner, batch_id: int) -> dict[str, Any]:
        """Heartbeats (events/heartbeats.py) count towards a sink's progress once it applied every change written
        before them. Batch `batch_id` read up to Kafka's end (nothing behind) as it was after the earlier
        batches ran, so it holds every change written before a heartbeat those batches saw. Not the
        heartbeats of this batch: its end offsets were not read at one instant across partitions."""
        seen = [ts for b, ts in r.heartbeats if b < batch_id]
        if not seen:
            return {}
        r.heartbeats = [(b, ts) for b, ts in r.heartbeats if b >= batch_id]
        newest = _newest(max(seen), r.doc.get("last_source_ts_ms"))
        assert newest is not None
        lag_ms = max(0, int(time.time() * 1000) - newest)
        metrics.LAG_SECONDS.labels(r.name).set(lag_ms / 1000)
        metrics.LAST_SOURCE_TIME.labels(r.name).set(newest / 1000)
        return {"last_source_ts_ms": newest, "lag_ms": lag_ms, "heartbeats_pending": r.heartbeats}

    def _start(self, runner: _Runner, available_now: bool) -> None:
        assert self.spark is not None
        metrics.FAILING.labels(runner.name)  # the series exists (0) before the first batch or failure
        batch_fn = self._sink_fn(runner)
        writer = (
            self._source(self.spark, runner.topics)
            .writeStream.queryName(runner.name)
            .foreachBatch(batch_fn)
            .option("checkpointLocation", str(self.checkpoint_root / runner.name))
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime=f"{self.cfg.trigger_seconds} seconds")
        )
        runner.query = writer.start()
        log.info("started query %s", runner.name)

    def run(
        self,
        available_now: bool = False,
        stop: threading.Event | None = None,
        max_failures: int = 5,
    ) -> dict[str, str]:
        """Run until `stop` (or, with `available_now`, until every query caught up or gave up).

        Returns each query's final state: "done", or "failed: <error>".
        """
        with checkpoint_lock(self.checkpoint_root, "cdcflow pipeline run"):  # one pipeline per checkpoint root
            return self._run(available_now, stop or threading.Event(), max_failures)

    def _run(self, available_now: bool, stop: threading.Event, max_failures: int) -> dict[str, str]:
        patterns = {c.name: c.topics or self.cfg.topics for c in self.cfg.sinks}
        runners = [
            _Runner(s.name, s, patterns[s.name], tuple(patterns[e.name] for e in self.sinks[:i]))
            for i, s in enumerate(self.sinks)
        ]
        check_topic_patterns(self.cfg, self.checkpoint_root, {r.name: r.topics for r in runners})
        jars = sorted({j for s in self.sinks for j in s.jars()})
        self.spark = build_session("cdcflow-pipeline", self.cfg.master, sink_jars=jars, conf=self.cfg.spark_conf)
        self.spark.sparkContext.setLogLevel("WARN")
        if stop.is_set():  # stopped while Spark started (seconds under load): start nothing
            log.info("stopped before the queries started")
            return {r.name: "done" for r in runners}
        for sink in self.sinks:
            try:
                sink.open(self.spark)
            except Exception as exc:  # the sink's first batch tries again
                log.warning("sink %s: picking up earlier work failed: %s", sink.name, _first_line(exc))
        for r in runners:  # carry totals (and heartbeats not yet counted) across restarts of the pipeline
            path = self.checkpoint_root / r.name / PROGRESS_FILE
            if path.exists():
                r.doc = json.loads(path.read_text())
                # seen before this start: every later batch that reaches Kafka's end vouches for them
                r.heartbeats = [(-1, int(ts)) for _, ts in r.doc.get("heartbeats_pending") or []]
        for r in runners:
            self._start(r, available_now)
        try:
            while not stop.is_set() and not all(r.done for r in runners):
                for r in runners:
                    self._supervise(r, available_now, max_failures)
                self.waiting = [r.name for r in runners if r.query is None and not r.done]
                self.last_tick = time.monotonic()
                stop.wait(POLL_SECONDS)
            if available_now and not stop.is_set():
                self._flush(runners)
        finally:
            for r in runners:
                if r.query is not None and r.query.isActive:
                    r.query.stop()
            for sink in self.sinks:
                try:
                    sink.close()
                except Exception:
                    log.exception("sink %s: close failed", sink.name)
        return {r.name: "done" if r.last_error is None else f"failed: {r.last_error}" for r in runners}

    def ready_problem(self) -> str | None:
        if self.waiting is None:
            return "starting Spark and the sinks' queries"
        return f"no running query for sink(s) {', '.join(self.waiting)} (failed, waiting to retry)" if self.waiting \
            else None  # fmt: skip

    def live_problem(self) -> str | None:
        quiet = time.monotonic() - self.last_tick
        if self.last_tick and quiet > LIVE_AFTER_S:
            return f"the pipeline's supervising loop has not run for {quiet:.0f} s"
        return None

    def _flush(self, runners: list[_Runner]) -> None:
        """An --available-now run's last step: each sink that applied everything finishes what it
        deferred (the Delta sinks fold their pending changes), so the run leaves its tables current."""
        for r in runners:
            if r.last_error is not None:
                continue
            started = time.time()
            try:
                assert self.spark is not None
                r.sink.flush(self.spark)
            except Exception as exc:
                r.last_error = _first_line(exc)
                log.error("sink %s: finishing the run failed: %s", r.name, r.last_error)
                self._record(r, state="failing", error=r.last_error)
                continue
            self._record(r, **r.sink.status())
            log.info("sink %s: finished the run in %.1f s", r.name, time.time() - started)

    def _supervise(self, r: _Runner, available_now: bool, max_failures: int) -> None:
        if r.done:
            return
        q = r.query
        if q is not None:
            self._query_progress(r)
        if q is not None and q.isActive:
            return
        if q is not None:
            self._query_progress(r)  # its last batch may have ended between the two looks above
            exc = q.exception()
            r.query = None
            if exc is None:
                r.done = available_now  # a continuous query only stops when asked
                r.last_error = None
                return
            if available_now and _topics_changed(exc) and r.topic_restarts < MAX_TOPIC_RESTARTS:
                # Spark's own advice for this error ("restart your query"): the new start pre-fetches
                # the current topic set. Not a failure: nothing was applied from the failed plan.
                r.topic_restarts += 1
                log.info("query %s: Kafka topics appeared while it ran with --available-now; restarting it with the "
                         "new topic set (%d)", r.name, r.topic_restarts)  # fmt: skip
                metrics.TOPIC_RESTARTS.labels(r.name).inc()
                r.next_start = time.monotonic()
                return
            r.failures += 1
            r.last_error = _first_line(exc)
            backoff = min(self.cfg.retry_backoff_max_s, 2.0**r.failures)
            log.error("query %s failed (%d): %s; retrying in %.0f s", r.name, r.failures, r.last_error, backoff)
            metrics.FAILURES.labels(r.name).inc()
            metrics.FAILING.labels(r.name).set(1)
            self._record(r, state="failing", error=r.last_error, failures=r.failures,
                         retry_at_ms=int((time.time() + backoff) * 1000))  # fmt: skip
            if available_now and r.failures >= max_failures:
                r.done = True
                return
            r.next_start = time.monotonic() + backoff
            return
        if time.monotonic() >= r.next_start:
            self._start(r, available_now)


# Spark's Kafka source with Trigger.AvailableNow, when topics or partitions appear between its
# pre-fetch of the end offsets and a batch (error classes in spark-sql-kafka's kafka-error-conditions.json).
_TOPIC_SET_CHANGED = (
    "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_END_OFFSET_AND_PREFETCHED",
    "should provide the same topic partitions in pre-fetched offset",
)
MAX_TOPIC_RESTARTS = 20


def _newest(*times: int | None) -> int | None:
    known = [t for t in times if t]
    return max(known) if known else None


def _topics_changed(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _TOPIC_SET_CHANGED)


# "x.YError: text"; Py4J puts a Java exception on a line of its own as ": java.x.YException: text".
_ERROR_LINE = re.compile(r"^\s*(?::\s*)?([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$")


def _first_line(exc: BaseException) -> str:
    """The useful line of a query failure: the sink's own error (e.g. "cdcflow.errors.
    HBaseTerminalError: TableNotFoundException: ...") rather than Py4J's and Spark's wrappers."""
    text = str(exc).strip()
    errors = [f"{m.group(1)}: {m.group(2)}".strip() for line in text.splitlines() if (m := _ERROR_LINE.match(line))]
    ours = [e for e in errors if e.startswith("cdcflow.")]
    theirs = [e for e in errors if not e.startswith(("py4j.", "org.apache.spark.", "pyspark."))]
    best = (ours or theirs or errors or text.splitlines() or [type(exc).__name__])[0]
    return best[:500]
