"""`cdcflow mysql run`: read the binlog as a replica, publish change events, checkpoint at acknowledged commits.

One thread does everything in order: read an event, decode it, queue its records on the producer,
and at each commit hand the transaction's checkpoint to the AckFrontier. The producer's delivery
callbacks run on this same thread (inside poll), so the bookkeeping needs no locks. Memory stays
bounded in large transactions because records stream out as they are decoded; the producer's queue
limit (max_inflight_mb) makes the reader wait for Kafka.

Failures: a dropped connection, a Kafka outage longer than the delivery timeout, or a failed
acknowledgement all end the current stream; the loop then resumes from the last checkpoint whose
transactions were completely acknowledged. What was sent after it is sent again (duplicates with
the same `pos`, harmless downstream); nothing is skipped.
"""

from __future__ import annotations

import base64
import copy
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdcflow.clients.kafka import create_store_topic, create_topic, read_latest
from cdcflow.clients.kafka.producer import ProducerSettings, SyncProducer
from cdcflow.clients.mysql import BinlogStream, MySqlEndpoint, StreamStart
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.errors import CdcflowError, RetryableError, ServiceUnavailable, TerminalError
from cdcflow.events.json_codec import encode
from cdcflow.events.topics import change_topic
from cdcflow.patterns import NameFilter
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import (
    TABLE_MAP,
    BinlogDecoder,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    UnsupportedEvent,
    XidEvent,
)
from cdcflow.sources.mysql.changes import TxnContext, key_columns, row_changes
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn
from cdcflow.sources.mysql.preflight import ServerInfo, preflight
from cdcflow.sources.mysql.snapshot import Snapshotter
from cdcflow.sources.mysql.transactions import QueryRole, TransactionState

log = logging.getLogger(__name__)


@dataclass
class CaptureStats:
    events: int = 0  # change events published
    transactions: int = 0
    ddl: int = 0
    dead_letters: int = 0
    restarts: int = 0
    snapshot_rows: int = 0
    checkpoints: int = 0
    last_source_ts_ms: int = 0
    checkpoint: Checkpoint | None = None
    started: float = field(default_factory=time.monotonic)


class TableFilter(NameFilter):
    """The capture's `include`/`exclude` "db.table" patterns, asked per (db, table)."""

    def __call__(self, db: str, table: str) -> bool:  # type: ignore[override]
        return super().__call__(f"{db}.{table}")


class MySqlCapture:
    def __init__(
        self, cfg: MySqlSourceConfig, kafka: KafkaConfig, endpoint: MySqlEndpoint, bootstrap: str,
        producer_factory: Callable[[ProducerSettings], SyncProducer] = SyncProducer,
    ) -> None:  # fmt: skip
        self.cfg = cfg
        self.ep = endpoint
        self.bootstrap = bootstrap
        settings = ProducerSettings(
            bootstrap, kafka.compression, kafka.linger_ms, kafka.delivery_timeout_ms,
            extra={"queue.buffering.max.kbytes": str(cfg.max_inflight_mb * 1024), **kafka.properties},
        )  # fmt: skip
        self.producer = producer_factory(settings)
        self.stats = CaptureStats()
        self.filter = TableFilter(cfg.include, cfg.exclude)
        self._topics: set[str] = set()
        self._table_columns: dict[str, list[dict[str, object]]] = {}  # last schema published per table
        self.server: ServerInfo | None = None
        self.snapshot: Snapshotter | None = None
        self.progress: dict[str, Any] = {}  # snapshot progress, carried in every checkpoint
        self.streaming = threading.Event()  # set once the binlog stream is open (tests wait for it)

    # -- set-up ----------------------------------------------------------------------------------------

    def topic_for(self, db: str, table: str) -> str:
        return change_topic(self.cfg.topic_prefix, db, table)

    def _ensure_topic(self, topic: str) -> None:
        if topic not in self._topics:
            create_topic(self.bootstrap, topic, partitions=self.cfg.topic_partitions)
            self._topics.add(topic)

    def load_checkpoint(self) -> Checkpoint | None:
        raw = read_latest(self.bootstrap, self.cfg.offsets_topic, self.cfg.name.encode())
        return Checkpoint.from_bytes(raw) if raw else None

    def _initial_checkpoint(self, server: ServerInfo) -> Checkpoint:
        if self.cfg.start == "earliest":
            return Checkpoint(gtid_state="", file="", pos=4)
        return Checkpoint(gtid_state=server.gtid_binlog_pos, file="", pos=4)

    # -- the loop --------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> CaptureStats:
        self.server = preflight(self.ep, self.cfg.server_id)
        log.info("MySQL source %s: %s at %s:%s", self.cfg.name, self.server.version, self.ep.host, self.ep.port)
        for topic, compact in ((self.cfg.offsets_topic, True), (self.cfg.schema_history_topic, False)):
            create_store_topic(self.bootstrap, topic, compact=compact)
        checkpoint = self.load_checkpoint()
        self._setup_snapshot(checkpoint)
        if checkpoint is None:
            checkpoint = self._initial_checkpoint(self.server)
            log.info(
                "no checkpoint for %s: starting at %s", self.cfg.name, checkpoint.gtid_state or "the oldest binlog"
            )
        else:
            log.info(
                "resuming %s after GTID %s (%s:%d)",
                self.cfg.name,
                checkpoint.gtid_state,
                checkpoint.file,
                checkpoint.pos,
            )
        self.stats.checkpoint = checkpoint
        backoff = 0.5
        while not stop.is_set():
            try:
                self._stream(checkpoint, stop)
                backoff = 0.5
            except RetryableError as exc:
                self.stats.restarts += 1
                log.warning(
                    "capture interrupted (%s); resuming from the last acknowledged checkpoint in %.1f s", exc, backoff
                )
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            assert self.stats.checkpoint is not None
            checkpoint = self.stats.checkpoint
        return self.stats

    def _setup_snapshot(self, checkpoint: Checkpoint | None) -> None:
        snap_cfg = self.cfg.snapshot
        self.progress = copy.deepcopy(checkpoint.snapshot) if checkpoint else {}
        self.snapshot = None
        if not snap_cfg.tables:
            return
        self.filter.always = frozenset({snap_cfg.watermark_table})
        snapshot_ep = self.ep
        self.snapshot = Snapshotter(snapshot_ep, self.cfg.name, snap_cfg.watermark_table, snap_cfg.chunk_size,
                                    self.progress)  # fmt: skip

    def _stream(self, start: Checkpoint, stop: threading.Event) -> None:
        assert self.server is not None
        stream = BinlogStream(self.ep, self.cfg.server_id, heartbeat_s=self.cfg.heartbeat_s,
                              read_timeout_s=max(10.0, self.cfg.heartbeat_s * 5))  # fmt: skip
        self.producer.reset()  # anything unacknowledged from a previous attempt is re-sent from `start`
        if self.snapshot is not None:  # snapshot progress goes back with the stream position
            self.snapshot.chunk = None
            self.progress.clear()
            self.progress.update(copy.deepcopy(start.snapshot))
            self.snapshot.prepare(self.cfg.snapshot.tables, TableFilter(self.cfg.include, self.cfg.exclude))
        frontier = AckFrontier()
        if self.server.mariadb:
            stream.open(StreamStart(gtid_state=start.gtid_state or ""))
        else:
            stream.open(StreamStart(file=start.file, pos=start.pos))
        self.streaming.set()
        decoder = BinlogDecoder(collations=self.server.collations, table_filter=self.filter)
        decoder.checksum = stream.checksum
        position = TransactionState(start, frontier)
        last_flush = time.monotonic()
        since_poll = 0
        try:
            snapshot = self.snapshot
            while not stop.is_set():
                if snapshot is not None:
                    snapshot.step()  # the chunk's SQL runs in a worker thread
                raw = stream.read()
                try:
                    ev = decoder.decode(raw)
                except BinlogDecodeError as exc:
                    event_type = raw[4] if len(raw) > 4 else -1
                    if event_type == TABLE_MAP or (position.ctx is not None and _is_rows(event_type)):
                        self._dead_letter(raw, exc, position.file, position.ctx, position.txn, frontier)
                        continue
                    raise ServiceUnavailable(f"undecodable binlog event (type {event_type}): {exc}") from exc
                h = ev.header
                if isinstance(ev, RowsEvent):
                    if ev.schema is None or position.open is None:
                        continue
                    ctx, txn = position.open
                    self._publish_rows(ev, ctx, txn, frontier)
                    since_poll += len(ev.rows)
                    if since_poll >= 2000:
                        self.producer.poll(0)
                        since_poll = 0
                elif isinstance(ev, TableMapEvent):
                    if ev.schema is not None and position.open is not None:
                        self._maybe_publish_schema(ev, *position.open, frontier)
                elif isinstance(ev, GtidEvent):
                    position.begin(ev)
                elif isinstance(ev, (XidEvent, QueryEvent)):
                    opened = position.open
                    if opened is None:
                        continue
                    if isinstance(ev, QueryEvent):
                        role = position.query_role(ev.query)
                        if role is not QueryRole.END and role is not QueryRole.DDL:
                            continue
                        if role is QueryRole.DDL:
                            self._publish_ddl(ev, *opened, frontier)
                    position.commit(h, self.progress)
                    self.stats.transactions += 1
                    self.stats.last_source_ts_ms = h.timestamp * 1000
                elif isinstance(ev, HeartbeatEvent):  # sent only when there is nothing newer: caught up
                    self.stats.last_source_ts_ms = int(time.time() * 1000)
                elif isinstance(ev, RotateEvent):
                    position.rotate(ev.next_file)
                elif isinstance(ev, UnsupportedEvent):
                    raise TerminalError(f"binlog at {position.file}:{h.start_pos}: {ev.reason}")
                now = time.monotonic()
                if now - last_flush >= self.cfg.checkpoint_interval_ms / 1000:
                    self._checkpoint(frontier)
                    last_flush = now
        finally:
            stream.close()
            # Whatever was acknowledged up to here still counts: record it before leaving.
            self.producer.flush(min(30.0, self.cfg.heartbeat_s * 30))
            if frontier.failure is None:
                self._checkpoint(frontier)
                self.producer.flush(10.0)

    def _checkpoint(self, frontier: AckFrontier) -> None:
        self.producer.poll(0)
        if frontier.failure is not None:
            raise ServiceUnavailable(f"Kafka did not acknowledge a record: {frontier.failure}")
        newest = frontier.advance()
        if newest is None:
            return
        self.producer.send(self.cfg.offsets_topic, self.cfg.name.encode(), newest.to_bytes(), _ignore_ack)
        self.stats.checkpoint = newest
        self.stats.checkpoints += 1

    # -- publishing ------------------------------------------------------------------------------------

    def _send(self, topic: str, key: bytes | None, value: bytes, txn: PendingTxn, frontier: AckFrontier) -> None:
        txn.outstanding += 1
        self.producer.send(topic, key, value, txn.on_delivery)

    def _publish_rows(self, ev: RowsEvent, ctx: TxnContext, txn: PendingTxn, frontier: AckFrontier) -> None:
        schema = ev.schema
        assert schema is not None
        snapshot = self.snapshot
        if snapshot is not None and snapshot.is_watermark_table(schema.qualified):
            for _before, after in ev.rows:
                chunk_table = snapshot.chunk.table if snapshot.chunk else ""
                reads = snapshot.on_watermark(after or {}, ctx, ev.header.start_pos, ev.header.timestamp * 1000)
                if reads:
                    db, table = chunk_table.split(".", 1)
                    topic = self.topic_for(db, table)
                    self._ensure_topic(topic)
                    for change in reads:
                        self._send(topic, change.key, encode(change), txn, frontier)
                    self.stats.snapshot_rows += len(reads)
            return
        topic = self.topic_for(schema.db, schema.table)
        self._ensure_topic(topic)
        keys = key_columns(schema, self.cfg.key_columns)
        watching = snapshot is not None and snapshot.chunk is not None and snapshot.chunk.in_window
        for change in row_changes(ev, ctx, self.cfg.name, keys):
            if watching:
                snapshot.observe(schema.qualified, change.key)  # type: ignore[union-attr]
            self._send(topic, change.key, encode(change), txn, frontier)
            self.stats.events += 1

    def _maybe_publish_schema(self, ev: TableMapEvent, ctx: TxnContext, txn: PendingTxn, frontier: AckFrontier) -> None:
        """Record a table's columns in the schema history whenever they differ from the last ones seen."""
        assert ev.schema is not None
        columns = ev.schema.describe()
        name = ev.schema.qualified
        if self._table_columns.get(name) == columns:
            return
        self._table_columns[name] = columns
        record = {
            "kind": "table", "source": self.cfg.name, "db": ev.schema.db, "table": ev.schema.table,
            "columns": columns, "gtid": ctx.gtid, "file": ctx.file,
            "pos": [ctx.file_index, ev.header.start_pos, 0], "ts_ms": ev.header.timestamp * 1000,
        }  # fmt: skip
        self._send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn, frontier)

    def _publish_ddl(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn, frontier: AckFrontier) -> None:
        record = {
            "kind": "ddl", "source": self.cfg.name, "db": ev.db, "ddl": ev.query, "gtid": ctx.gtid, "file": ctx.file,
            "pos": [ctx.file_index, ev.header.start_pos, 0], "ts_ms": ev.header.timestamp * 1000,
        }  # fmt: skip
        self._send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn, frontier)
        self.stats.ddl += 1
        log.info("DDL at %s:%d (%s): %s", ctx.file, ev.header.start_pos, ctx.gtid, ev.query[:200])

    def _dead_letter(
        self, raw: bytes, exc: Exception, file: str, ctx: TxnContext | None, txn: PendingTxn | None,
        frontier: AckFrontier,
    ) -> None:  # fmt: skip
        """An event that cannot be decoded: its raw bytes and position go to the dead-letter topic."""
        record = {
            "source": self.cfg.name, "error": str(exc), "file": file,
            "gtid": ctx.gtid if ctx else None, "raw_event": base64.b64encode(raw).decode("ascii"),
            "end_pos": int.from_bytes(raw[13:17], "little") if len(raw) >= 17 else None,
        }  # fmt: skip
        log.error(
            "dead-lettering an undecodable binlog event at %s:%s (%s): %s", file, record["end_pos"], record["gtid"], exc
        )
        if txn is None:
            txn = frontier.begin()  # outside a transaction: its own unit (no checkpoint of its own)
        self._send(self.cfg.dead_letter_topic, self.cfg.name.encode(), orjson.dumps(record), txn, frontier)
        self.stats.dead_letters += 1


def _is_rows(event_type: int) -> bool:
    return event_type in (23, 24, 25, 30, 31, 32)


def _ignore_ack(_err: object, _msg: object) -> None:
    """Checkpoint records: a lost one only means resuming from an earlier one (duplicates, no loss)."""


def run_forever(capture: MySqlCapture, stop: threading.Event) -> CaptureStats:
    """Run until `stop`; log progress every 10 s."""

    def report() -> None:
        last = 0
        while not stop.wait(10.0):
            s = capture.stats
            rate = (s.events - last) / 10.0
            last = s.events
            lag = time.time() * 1000 - s.last_source_ts_ms if s.last_source_ts_ms else 0
            log.info(
                "mysql: %d events (%.0f/s), %d snapshot rows, %d transactions, %d DDL, %d dead letters, %d restarts, "
                "source lag %.1f s, checkpoint %s", s.events, rate, s.snapshot_rows, s.transactions, s.ddl,
                s.dead_letters, s.restarts, lag / 1000,
                s.checkpoint.gtid_state if s.checkpoint else None,
            )  # fmt: skip

    threading.Thread(target=report, name="mysql-progress", daemon=True).start()
    try:
        return capture.run(stop)
    except CdcflowError:
        raise
