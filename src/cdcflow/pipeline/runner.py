"""Runs the pipeline: one Structured Streaming query per sink, or one per group of sinks.

Why one query per sink (docs/decisions/0002-pipeline-queries.md): each query has its own
Kafka offsets in its own checkpoint, so each sink has its own progress; a failing sink's query
stops and is restarted with back-off while the other queries keep applying; lag is per query.
The cost is that every sink reads the topics itself. Sinks given the same `group` share one query
instead: each batch is read and parsed once and handed to each of them; a sink whose part fails
falls behind and catches up on its own while the others go on (pipeline/groups.py,
docs/decisions/0022-sink-groups.md). Malformed records are dead-lettered by the first sink (in config
order) whose topics hold them, from the same parse as its events
(docs/decisions/0009-dead-letters-in-the-sink-queries.md).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdcflow.config import PipelineConfig
from cdcflow.errors import ConfigError
from cdcflow.pipeline import groups, metrics
from cdcflow.pipeline.apply import SinkBatches, checkpoint_query_id, first_line
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.group_apply import GroupApply
from cdcflow.pipeline.kafka_source import FETCH_MAX_WAIT_MS, kafka_options, read_records
from cdcflow.pipeline.offsets import checkpoint_lock
from cdcflow.pipeline.progress import PROGRESS_FILE
from cdcflow.pipeline.queries import Query, QuerySink, owned_topics
from cdcflow.pipeline.session import build_session, check_session
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.registry import make_sink

__all__ = ["FETCH_MAX_WAIT_MS", "Pipeline", "check_topic_patterns", "checkpoint_query_id", "group_pattern",
           "owned_topics"]  # fmt: skip
_first_line = first_line

log = logging.getLogger(__name__)
# How often the supervisor looks at its queries: an --available-now run ends at most this long
# after its last query did.
POLL_SECONDS = 0.2
TOPICS_FILE = "cdcflow-topics"  # the subscribePattern a query's checkpoint was made with


def group_pattern(patterns: list[str]) -> str:
    """The subscribePattern of a group's query: every topic one of its sinks reads (each distinct pattern
    once, in a stable order, so the same sinks always give the same pattern)."""
    distinct = sorted(set(patterns))
    return distinct[0] if len(distinct) == 1 else "|".join(f"(?:{p})" for p in distinct)


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
    def __init__(
        self,
        cfg: PipelineConfig,
        context: Endpoints | Mapping[str, Any],
        checkpoint_root: Path,
        spark: SparkSession | None = None,
    ) -> None:
        self.cfg = cfg
        self.context = Endpoints.of(context).with_pipeline(cfg.dead_letter_topic, str(checkpoint_root))
        self.checkpoint_root = checkpoint_root
        self.sinks: list[Sink] = [make_sink(s, self.context) for s in cfg.sinks]
        # kafka.properties (SASL, TLS) as Spark's Kafka options: the pipeline connects like the captures.
        self.kafka_options = kafka_options(self.context)
        # The session the queries run in: the caller's (a user's job), else one the pipeline builds when it runs.
        self.spark: SparkSession | None = spark
        self.given_session = spark is not None
        self.batches = SinkBatches(cfg, self.context, checkpoint_root)
        self.groups = GroupApply(self.batches, self.kafka_options)
        self.last_tick = 0.0  # monotonic time of the supervising loop's last round: liveness
        self.waiting: list[str] | None = None  # sinks without a running query (None: not started): readiness

    def _source(self, spark: SparkSession, topics: str) -> DataFrame:
        return read_records(spark, self.context, topics, self.cfg.max_offsets_per_trigger)

    def _batch_fn(self, r: Query) -> Any:
        if r.group is None:
            m = r.members[0]

            def apply(df: DataFrame, batch_id: int) -> None:
                started = time.time()
                if m.sink.query_id is None:
                    m.sink.query_id = checkpoint_query_id(self.checkpoint_root / r.name)
                applied = self.batches.apply_one(m, df, batch_id, m.owned(), self.batches.heartbeats_only(df))
                self.batches.note_applied(m, batch_id, started, applied)

            return apply
        return lambda df, batch_id: self.groups.apply(r, df, batch_id)

    def _query_progress(self, r: Query) -> None:
        """Fold Spark's StreamingQueryProgress of the last batch into the progress of the query's sinks (a
        group's sinks that are behind keep their own)."""
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
        for m in r.members:
            if m.ledger is not None and not m.ledger.joined:
                continue
            own = dict(fields)
            if own["offsets_behind"] == 0:
                own |= self.batches.vouched(m, p["batchId"])
            self.batches.record(m, **own)
            metrics.ROWS_PER_SECOND.labels(m.name).set(own["processed_rows_per_second"])
            if own["batch_duration_ms"] is not None:
                metrics.BATCH_SECONDS.labels(m.name).set(own["batch_duration_ms"] / 1000)
            if own["offsets_behind"] is not None:
                metrics.OFFSETS_BEHIND.labels(m.name).set(own["offsets_behind"])

    def _start(self, runner: Query, available_now: bool) -> None:
        assert self.spark is not None
        for m in runner.members:
            metrics.FAILING.labels(m.name)  # the series exists (0) before the first batch or failure
        writer = (
            self._source(self.spark, runner.topics)
            .writeStream.queryName(runner.name)
            .foreachBatch(self._batch_fn(runner))
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

        Returns each sink's final state: "done", or "failed: <error>".
        """
        with checkpoint_lock(self.checkpoint_root, "cdcflow pipeline run"):  # one pipeline per checkpoint root
            return self._run(available_now, stop or threading.Event(), max_failures)

    def _runners(self) -> list[Query]:
        """The queries: one per sink without a group, one per group (at its first sink's place in the config)."""
        patterns = {c.name: c.topics or self.cfg.topics for c in self.cfg.sinks}
        members = [
            QuerySink(c.name, sink, patterns[c.name], tuple(patterns[e.name] for e in self.cfg.sinks[:i]))
            for i, (c, sink) in enumerate(zip(self.cfg.sinks, self.sinks, strict=True))
        ]
        runners: list[Query] = []
        grouped: dict[str, Query] = {}
        for c, m in zip(self.cfg.sinks, members, strict=True):
            if c.group is None:
                runners.append(Query(m.name, [m], m.topics))
            elif c.group in grouped:
                grouped[c.group].members.append(m)
            else:
                grouped[c.group] = Query(groups.group_folder(Path(), c.group).name, [m], "", group=c.group)
                runners.append(grouped[c.group])
        for r in grouped.values():
            r.topics = group_pattern([m.topics for m in r.members])
        return runners

    def _run(self, available_now: bool, stop: threading.Event, max_failures: int) -> dict[str, str]:
        runners = self._runners()
        members = [m for r in runners for m in r.members]
        check_topic_patterns(self.cfg, self.checkpoint_root, {r.name: r.topics for r in runners})
        self.groups.open_ledgers(runners)
        jars = sorted({j for s in self.sinks for j in s.jars()})
        if self.spark is not None:  # the caller's: it must already have what the sinks need
            check_session(self.spark, jars)
        else:
            self.spark = build_session("cdcflow-pipeline", self.cfg.master, sink_jars=jars, conf=self.cfg.spark_conf)
            self.spark.sparkContext.setLogLevel("WARN")
        self.groups.spark = self.spark
        if stop.is_set():  # stopped while Spark started (seconds under load): start nothing
            log.info("stopped before the queries started")
            return {m.name: "done" for m in members}
        for sink in self.sinks:
            try:
                sink.open(self.spark)
            except Exception as exc:  # the sink's first batch tries again
                log.warning("sink %s: picking up earlier work failed: %s", sink.name, first_line(exc))
        for m in members:  # carry totals (and heartbeats not yet counted) across restarts of the pipeline
            path = self.checkpoint_root / m.name / PROGRESS_FILE
            if path.exists():
                m.doc = json.loads(path.read_text())
                # seen before this start: every later batch that reaches Kafka's end vouches for them
                m.heartbeats = [(-1, int(ts)) for _, ts in m.doc.get("heartbeats_pending") or []]
        for r in runners:
            self._start(r, available_now)
        try:
            while not stop.is_set() and not all(r.done and self.groups.caught_up(r) for r in runners):
                for r in runners:
                    self._supervise(r, available_now, max_failures)
                    if r.group is not None:
                        self.groups.supervise(r, available_now, max_failures)
                self.waiting = [m.name for r in runners for m in r.members
                                if (r.query is None and not r.done) or m.last_error is not None]  # fmt: skip
                self.last_tick = time.monotonic()
                stop.wait(POLL_SECONDS)
            if available_now and not stop.is_set():
                self._flush(runners)
        finally:
            for r in runners:
                if r.query is not None and r.query.isActive:
                    r.query.stop()
            for m in members:
                if m.catch_up is not None:
                    m.catch_up.join()
            for sink in self.sinks:
                try:
                    sink.close()
                except Exception:
                    log.exception("sink %s: close failed", sink.name)
        return {m.name: _outcome(r, m) for r in runners for m in r.members}

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

    def _flush(self, runners: list[Query]) -> None:
        """An --available-now run's last step: each sink that applied everything finishes what it
        deferred (the Delta sinks fold their pending changes), so the run leaves its tables current."""
        for r in runners:
            if r.last_error is not None:
                continue
            for m in r.members:
                if m.gave_up:
                    continue
                started = time.time()
                try:
                    assert self.spark is not None
                    m.sink.flush(self.spark)
                except Exception as exc:
                    error = first_line(exc)
                    if r.group is None:
                        r.last_error = error
                    else:
                        m.last_error, m.gave_up = error, True
                    log.error("sink %s: finishing the run failed: %s", m.name, error)
                    self.batches.record(m, state="failing", error=error)
                    continue
                self.batches.record(m, **m.sink.status())
                log.info("sink %s: finished the run in %.1f s", m.name, time.time() - started)

    def _supervise(self, r: Query, available_now: bool, max_failures: int) -> None:
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
            r.last_error = first_line(exc)
            backoff = min(self.cfg.retry_backoff_max_s, 2.0**r.failures)
            log.error("query %s failed (%d): %s; retrying in %.0f s", r.name, r.failures, r.last_error, backoff)
            for m in r.members:
                metrics.FAILURES.labels(m.name).inc()
                metrics.FAILING.labels(m.name).set(1)
                self.batches.record(m, state="failing", error=r.last_error, failures=r.failures,
                                    retry_at_ms=int((time.time() + backoff) * 1000))  # fmt: skip
            if available_now and r.failures >= max_failures:
                r.done = True
                return
            r.next_start = time.monotonic() + backoff
            return
        if time.monotonic() >= r.next_start:
            self._start(r, available_now)


def _outcome(r: Query, m: QuerySink) -> str:
    error = r.last_error or m.last_error
    return "done" if error is None else f"failed: {error}"


# Spark's Kafka source with Trigger.AvailableNow, when topics or partitions appear between its
# pre-fetch of the end offsets and a batch (error classes in spark-sql-kafka's kafka-error-conditions.json).
_TOPIC_SET_CHANGED = (
    "MISMATCHED_TOPIC_PARTITIONS_BETWEEN_END_OFFSET_AND_PREFETCHED",
    "should provide the same topic partitions in pre-fetched offset",
)
MAX_TOPIC_RESTARTS = 20


def _topics_changed(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _TOPIC_SET_CHANGED)
