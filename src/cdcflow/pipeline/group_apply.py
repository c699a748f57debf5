"""The Spark side of sink groups (the bookkeeping is pipeline/groups.py): a group batch read and parsed once and
applied by each joined sink in turn, a failing sink falling behind, and each behind sink's catch-up in a thread
of its own, from bounded Kafka reads, until it joins the group's batches again."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdcflow.clients.kafka import KafkaEndpoint
from cdcflow.clients.kafka.client import partition_offsets
from cdcflow.pipeline import groups
from cdcflow.pipeline.apply import Applied, SinkBatches, checkpoint_query_id, first_line
from cdcflow.pipeline.envelope import dedupe, events_of, is_malformed
from cdcflow.pipeline.queries import Query, QuerySink

log = logging.getLogger(__name__)


class GroupApply:
    def __init__(self, batches: SinkBatches, kafka_options: dict[str, str]) -> None:
        self.batches = batches
        self.cfg = batches.cfg
        self.context = batches.context
        self.checkpoint_root = batches.checkpoint_root
        self.kafka_options = kafka_options
        self.spark: SparkSession | None = None  # set once the pipeline's session is up

    def _bounded_source(self, spark: SparkSession, chunk: groups.Chunk) -> DataFrame:
        """A catch-up chunk's Kafka records: a batch read from its start to its end offsets."""
        assign = {t: sorted(int(p) for p in ps) for t, ps in chunk.end.items()}
        start = {t: {p: chunk.start.get(t, {}).get(p, -2) for p in ps} for t, ps in chunk.end.items()}  # -2: first
        return (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.context.bootstrap_servers)
            .option("assign", json.dumps(assign))
            .option("startingOffsets", json.dumps(start))
            .option("endingOffsets", json.dumps(chunk.end))
            .options(**self.kafka_options)
            .load()
        )

    def apply(self, r: Query, df: DataFrame, batch_id: int) -> None:
        """One batch of a group's query: read and parsed once, then applied by each joined sink in turn. A sink
        whose part fails falls behind from the batch's start; the batch goes on for the others."""
        started = time.time()
        checkpoint = self.checkpoint_root / r.name
        query_id = checkpoint_query_id(checkpoint) or ""
        start = groups.batch_start(checkpoint, batch_id)
        joined = [m for m in r.members if self._joins(m, start, batch_id)]
        parsed = self.batches.prepared(df, False).persist()
        try:
            # One job for every sink's counts and the group's dead letters; it also fills the cache. Each malformed
            # record is dead-lettered once, for the sink that owns its topic (owned() of two sinks never overlap).
            counts = [c for i, m in enumerate(joined) for c in self.batches.counts(m.mine(), F.lit(False), f"_{i}")]
            dead_by = {m.name: F.count(F.when(is_malformed(F.col("problem")) & m.owned(), 1)) for m in r.members}
            row = parsed.agg(*counts, *(c.alias(f"dead:{n}") for n, c in dead_by.items())).first()
            dead = {n: int(row[f"dead:{n}"] or 0) if row else 0 for n in dead_by}
            if sum(dead.values()):
                owned = [m.owned() for m in r.members if dead[m.name]]
                any_owned = functools.reduce(lambda a, b: a | b, owned)
                self.batches.dead_letter(r.name, parsed, any_owned, batch_id, sum(dead.values()))
            for i, m in enumerate(joined):
                member_started = time.time()
                applied = Applied(
                    rows=int(row[f"rows_{i}"]) if row else 0, max_ts=row[f"max_ts_{i}"] if row else None,
                    heartbeat_ts=row[f"heartbeat_ts_{i}"] if row else None,
                    dead=dead[m.name],
                )  # fmt: skip
                try:
                    m.sink.query_id = query_id
                    if applied.rows:
                        events = parsed.where(m.mine())
                        if m.sink.wants_deduplicated_events:
                            events = dedupe(events)
                        m.sink.apply_batch(events_of(events), batch_id)
                    if row and row[f"oversize_{i}"]:
                        self.batches.oversize_pass(m, parsed.where(m.mine()), m.owned(), batch_id, applied)
                except Exception as exc:
                    self._fall_behind(m, start, f"its part of group batch {batch_id} failed: {first_line(exc)}")
                    log.exception("sink %s: its part of group %s's batch %d failed; it catches up on its own from "
                                  "the batch's start while the group goes on", m.name, r.group, batch_id)  # fmt: skip
                    continue
                m.failures = 0
                self.batches.note_applied(m, batch_id, member_started, applied, group=r.group)
            log.info("group %s: batch %d applied by %s in %d ms", r.group, batch_id,
                     ", ".join(m.name for m in joined) or "no sink", int((time.time() - started) * 1000))  # fmt: skip
        finally:
            parsed.unpersist()

    def _joins(self, m: QuerySink, start: groups.Positions, batch_id: int) -> bool:
        """Whether a sink takes part in a group batch that starts at `start`: joined, or behind and caught up to
        there (its catch-up idle). A sink past `start` (its offsets were reset forward) joins too: the batch gives
        it again what it holds, which its guards ignore."""
        assert m.ledger is not None
        with m.lock:
            if m.ledger.joined:
                return True
            if m.ledger.pending is not None or not groups.reached(m.ledger.position, start):
                return False
            m.ledger.joined = True
            m.ledger.reason = ""
            groups.save_ledger(self.checkpoint_root, m.name, m.ledger)
        log.info("sink %s: caught up; joins its group's batches again at batch %d", m.name, batch_id)
        return True

    def _fall_behind(self, m: QuerySink, position: groups.Positions, reason: str) -> None:
        assert m.ledger is not None
        with m.lock:
            m.ledger.fall_behind(position, reason)
            groups.save_ledger(self.checkpoint_root, m.name, m.ledger)
        self.batches.failed(m, reason)

    def _catch_up(self, r: Query, m: QuerySink) -> None:
        """A behind sink's catch-up (its own thread): chunks of at most maxOffsetsPerTrigger records from its
        position to the end of the group's newest committed batch, each written to its ledger before it is
        applied. Ends when it reaches that end (the sink then joins the next group batch) or on a failure."""
        assert m.ledger is not None and self.spark is not None
        checkpoint = self.checkpoint_root / r.name
        try:
            while True:
                committed = groups.newest_committed(checkpoint)
                with m.lock:
                    ledger = m.ledger
                    if ledger.joined or committed is None:
                        return
                    if ledger.pending is None:
                        if groups.reached(ledger.position, committed[1]):
                            return
                        first = self._first_offsets(ledger.position, committed[1])
                        end = groups.chunk_end(ledger.position, committed[1], first, self.cfg.max_offsets_per_trigger)
                        ledger.pending = groups.Chunk(ledger.next_chunk, ledger.position, end)
                        groups.save_ledger(self.checkpoint_root, m.name, ledger)
                    chunk = ledger.pending
                    query = ledger.catch_up_query(checkpoint_query_id(checkpoint) or "")
                started = time.time()
                m.sink.query_id = query
                records = self._bounded_source(self.spark, chunk)
                applied = self.batches.apply_one(m, records, chunk.id, F.lit(False), heartbeats_only=False)
                with m.lock:
                    ledger.position = chunk.end
                    ledger.next_chunk = chunk.id + 1
                    ledger.pending = None
                    groups.save_ledger(self.checkpoint_root, m.name, ledger)
                m.failures = 0
                m.last_error = None
                # its heartbeats count once a group batch that reaches Kafka's end has it joined
                self.batches.note_applied(m, chunk.id, started, applied, heartbeat_batch=-1, state="catching up",
                                          group=r.group)  # fmt: skip
        except Exception as exc:
            log.exception("sink %s: catching up with group %s failed", m.name, r.group)
            self.batches.failed(m, f"catching up failed: {first_line(exc)}")

    def _first_offsets(self, position: groups.Positions, target: groups.Positions) -> groups.Positions:
        """The first offsets of the target's partitions that `position` lacks (from Kafka)."""
        missing = {t: [int(p) for p in ps if p not in position.get(t, {})] for t, ps in target.items()}
        endpoint = KafkaEndpoint.of(self.context.bootstrap_servers, self.context.kafka_properties)
        return {
            t: {str(p): o for p, o in partition_offsets(endpoint, t, parts, "earliest").items()}
            for t, parts in missing.items() if parts
        }  # fmt: skip

    def supervise(self, r: Query, available_now: bool, max_failures: int) -> None:
        """Start the catch-up of each behind sink of a group that has something to catch up and no catch-up
        running (after its back-off when it failed)."""
        for m in r.members:
            if m.ledger is None or m.ledger.joined or m.gave_up:
                continue
            if m.catch_up is not None:
                if m.catch_up.is_alive():
                    continue
                m.catch_up = None
            if available_now and m.failures >= max_failures:
                m.gave_up = True
                log.error("sink %s: gave up catching up with group %s after %d failures", m.name, r.group, m.failures)
                continue
            if time.monotonic() < m.next_try or not self._behind_committed(r, m):
                continue
            m.catch_up = threading.Thread(target=self._catch_up, args=(r, m), name=f"cdcflow-catch-up-{m.name}",
                                          daemon=True)  # fmt: skip
            self.batches.record(m, state="catching up", group=r.group, reason=m.ledger.reason)
            m.catch_up.start()

    def _behind_committed(self, r: Query, m: QuerySink) -> bool:
        assert m.ledger is not None
        committed = groups.newest_committed(self.checkpoint_root / r.name)
        return committed is not None and (m.ledger.pending is not None or
                                          not groups.reached(m.ledger.position, committed[1]))  # fmt: skip

    def caught_up(self, r: Query) -> bool:
        """Every sink of the query applied what the query committed, or gave up (--available-now's end)."""
        return all(
            m.ledger is None or m.ledger.joined or m.gave_up
            or ((m.catch_up is None or not m.catch_up.is_alive()) and not self._behind_committed(r, m))
            for m in r.members
        )  # fmt: skip

    def open_ledgers(self, runners: list[Query]) -> None:
        """Each grouped sink's ledger: kept from the last run, or new: joined when the group has not applied a
        batch yet, else behind from where the sink stood before (its own old query's checkpoint, another
        group's ledger) or from its topics' start."""
        for r in runners:
            if r.group is None:
                for m in r.members:  # out of its group: a later return starts from where its own query stands
                    path = groups.ledger_path(self.checkpoint_root, m.name)
                    if path.exists():
                        log.info("sink %s: no longer in a group; its query is its own again", m.name)
                        path.unlink()
                continue
            committed = groups.newest_committed(self.checkpoint_root / r.name)
            for m in r.members:
                ledger = groups.load_ledger(self.checkpoint_root, m.name)
                if ledger is not None and ledger.group == r.group:
                    m.ledger = ledger
                    continue
                m.ledger = groups.Ledger(r.group)
                if committed is not None:
                    before = self._position_before(m.name, ledger)
                    m.ledger.fall_behind(before, f"added to group {r.group} after it started")
                    log.info("sink %s: new in group %s; catches up from %s first", m.name, r.group,
                             "its earlier position" if before else "its topics' start")  # fmt: skip
                groups.save_ledger(self.checkpoint_root, m.name, m.ledger)

    def _position_before(self, sink: str, ledger: groups.Ledger | None) -> groups.Positions:
        if ledger is not None:  # it was in another group
            if not ledger.joined:
                return ledger.position
            other = groups.newest_committed(groups.group_folder(self.checkpoint_root, ledger.group))
            return other[1] if other else {}
        own = self.checkpoint_root / sink
        if (own / "commits").is_dir():  # it had a query of its own
            committed = groups.newest_committed(own)
            return committed[1] if committed else {}
        return {}
