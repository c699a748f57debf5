"""`cdcflow mysql run`: read the binlog as a replica, publish change events, checkpoint at acknowledged commits.

This is the I/O loop. One thread does everything in order: read an event, decode it, feed it to the capture's core
(core.py), which decides what the event means, and carry out the actions it returns: publish or hold rows
(publisher.py), release or discard a group's held rows, keep a prepared XA transaction's rows (xa.py), follow a DDL
(ddl_follow.py), hand a group's checkpoint to the acknowledgement frontier. The producer's delivery callbacks run on
this same thread (inside poll), so the bookkeeping needs no locks. Memory stays bounded in large transactions:
records stream out as they are decoded, and the producer's queue limit (max_inflight_mb) holds the reader back.

Failures: a dropped connection, a Kafka outage longer than the delivery timeout, or a failed acknowledgement all end
the current stream; the loop then resumes from the last checkpoint whose transactions were completely acknowledged.
What was sent after it is sent again (duplicates with the same `pos`, harmless downstream); nothing is skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from cdcflow.clients.kafka import KafkaEndpoint, create_store_topic
from cdcflow.clients.kafka.producer import ProducerSettings, SyncProducer
from cdcflow.clients.mysql import BinlogStream, MySqlEndpoint, StreamStart, query
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.errors import RetryableError
from cdcflow.sources.mysql import core
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import BinlogDecoder
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.binlog.mysql_events import TransactionPayloadEvent
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn
from cdcflow.sources.mysql.ddl_follow import DdlFollower
from cdcflow.sources.mysql.holding import HeldRows
from cdcflow.sources.mysql.output import make_encoder
from cdcflow.sources.mysql.preflight import ServerInfo, preflight
from cdcflow.sources.mysql.publisher import Publisher
from cdcflow.sources.mysql.resume import check_history, initial_checkpoint, load_checkpoint
from cdcflow.sources.mysql.snapshot import Snapshotter
from cdcflow.sources.mysql.snapshot_driver import SnapshotDriver, TableFilter
from cdcflow.sources.mysql.stats import CaptureStats
from cdcflow.sources.mysql.txn_buffer import RecordBuffer
from cdcflow.sources.mysql.undecodable import UndecodableEvent, dead_letter

log = logging.getLogger(__name__)


class MySqlCapture:
    def __init__(
        self, cfg: MySqlSourceConfig, kafka: KafkaConfig, endpoint: MySqlEndpoint, bootstrap: str,
        producer_factory: Callable[[ProducerSettings], SyncProducer] = SyncProducer,
    ) -> None:  # fmt: skip
        self.cfg = cfg
        self.kafka = kafka
        self.ep = endpoint
        # Every Kafka client of the capture (admin, readers of its own topics) gets kafka.properties too.
        self.bootstrap = KafkaEndpoint.of(bootstrap, kafka.properties)
        settings = ProducerSettings(
            bootstrap, kafka.compression, kafka.linger_ms, kafka.delivery_timeout_ms,
            max_message_bytes=max(16 * 2**20, cfg.max_record_bytes + 2**20),
            batch_bytes=min(1_000_000, cfg.max_record_bytes),
            extra={"queue.buffering.max.kbytes": str(cfg.max_inflight_mb * 1024), **kafka.properties},
        )  # fmt: skip
        self.producer = producer_factory(settings)
        self.stats = CaptureStats()
        self.filter = TableFilter(cfg.include, cfg.exclude)
        self.snapshots = SnapshotDriver(cfg, endpoint, self.stats, self.filter, self._decode_watermarks)
        self.publisher = Publisher(cfg, endpoint, self.bootstrap, self.producer, self.stats, self.snapshots)
        self.ddl = DdlFollower(cfg, endpoint, self.filter, self.publisher, self.snapshots, self.stats)
        self.held = HeldRows(cfg.name, cfg.xa_topic, self.bootstrap, self.producer, cfg.held_memory_mb, cfg.spill_dir)
        self.server: ServerInfo | None = None
        self.streaming = threading.Event()  # set once the binlog stream is open (tests wait for it)
        self.stream_open = False  # whether it is open now (metrics)
        self.last_read = 0.0  # monotonic time of the last event read (heartbeats included): liveness
        self._decoder: BinlogDecoder | None = None  # the open stream's
        self._core: core.CaptureCore | None = None  # the open stream's

    @property
    def snapshot(self) -> Snapshotter | None:
        return self.snapshots.snapshot

    @property
    def progress(self) -> dict[str, Any]:
        return self.snapshots.progress

    # -- probes (served on the metrics port: /livez, /readyz) -------------------------------------------

    def ready_problem(self) -> str | None:
        if not self.stream_open:
            return f"the binlog stream is not open (connecting or resuming; {self.stats.restarts} restarts so far)"
        brokers = getattr(self.producer, "brokers", None)
        return brokers.problem() if brokers is not None else None

    def live_problem(self) -> str | None:
        """Stuck: the stream is open but nothing came for many heartbeat periods (the server sends one
        each `heartbeat_s` when idle, and a read times out well before this)."""
        limit = max(60.0, self.cfg.heartbeat_s * 30)
        quiet = time.monotonic() - self.last_read
        if self.stream_open and self.last_read and quiet > limit:
            return f"no binlog event or heartbeat for {quiet:.0f} s"
        return None

    # -- the loop --------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> CaptureStats:
        self.server = preflight(self.ep, self.cfg.server_id)
        log.info("MySQL source %s: %s at %s:%s", self.cfg.name, self.server.version, self.ep.host, self.ep.port)
        self.publisher.encoder = make_encoder(self.cfg, self.kafka, self.server.mariadb, self.publisher.split,
                                              lambda sql, args: query(self.ep, sql, args))  # fmt: skip
        out = self.cfg.output
        for topic, compact in ((self.cfg.offsets_topic, True), (self.cfg.schema_history_topic, False),
                               (self.cfg.xa_topic, True), (out.transaction_topic, False),
                               (out.heartbeat_topic, True)):  # fmt: skip
            if topic:  # (heartbeats compacted: the newest per source is what counts)
                create_store_topic(self.bootstrap, topic, compact=compact)
        checkpoint = load_checkpoint(self.bootstrap, self.cfg)
        self.snapshots.setup(checkpoint)
        if checkpoint is None:
            checkpoint = initial_checkpoint(self.cfg, self.server)
            log.info("no checkpoint for %s: starting at %s", self.cfg.name,
                     checkpoint.gtid_state or "the oldest binlog")  # fmt: skip
        else:
            check_history(self.cfg, self.ep, self.server, checkpoint)
            log.info("resuming %s after GTID %s (%s:%d)", self.cfg.name, checkpoint.gtid_state, checkpoint.file,
                     checkpoint.pos)  # fmt: skip
        self.stats.checkpoint = checkpoint
        backoff = 0.5
        while not stop.is_set():
            try:
                self._stream(checkpoint, stop)
                backoff = 0.5
            except RetryableError as exc:
                self.stats.restarts += 1
                # The server's address in the line: with several sources in one log, which one went away.
                log.warning("capture interrupted (%s:%s: %s); resuming from the last acknowledged checkpoint in "
                            "%.1f s", self.ep.host, self.ep.port, exc, backoff)  # fmt: skip
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            assert self.stats.checkpoint is not None
            checkpoint = self.stats.checkpoint
        return self.stats

    def _stream(self, start: Checkpoint, stop: threading.Event) -> None:
        assert self.server is not None
        stream = BinlogStream(self.ep, self.cfg.server_id, heartbeat_s=self.cfg.heartbeat_s,
                              read_timeout_s=max(10.0, self.cfg.heartbeat_s * 5))  # fmt: skip
        self.producer.reset()  # anything unacknowledged from a previous attempt is re-sent from `start`
        # Schema records sent in the last attempt may have been purged unacknowledged: describe again.
        self.publisher.forget_tables()
        self.held.load(start)
        self.stats.xa_waiting = self.held.waiting
        self.snapshots.restart(start)
        frontier = AckFrontier()
        self._core = core.CaptureCore(start, frontier, mysql=self.server.mysql)
        if self.server.mysql:
            stream.open(StreamStart(mysql_gtids=GtidSet.parse(start.gtid_state or "").encode()))
        else:
            stream.open(StreamStart(gtid_state=start.gtid_state or ""))
        self.streaming.set()
        self.stream_open = True
        decoder = self._decoder = BinlogDecoder(collations=self.server.collations, table_filter=self.filter)
        decoder.checksum = stream.checksum
        last_flush = last_beat = time.monotonic()
        beat_every = self.cfg.output.heartbeat_interval_s if self.cfg.output.heartbeat_topic else None
        try:
            while not stop.is_set():
                self.snapshots.step()
                self._read(stream.read(), decoder)
                now = time.monotonic()
                if now - last_flush >= self.cfg.checkpoint_interval_ms / 1000:
                    self.publisher.store_checkpoint(frontier, self.held)
                    last_flush = now
                if beat_every is not None and now - last_beat >= beat_every:
                    self.publisher.heartbeat(frontier)
                    last_beat = now
        finally:
            self.stream_open = False
            stream.close()
            # Whatever was acknowledged up to here still counts: record it before leaving.
            self.producer.flush(min(30.0, self.cfg.heartbeat_s * 30))
            if frontier.failure is None:
                self.publisher.store_checkpoint(frontier, self.held)
                self.producer.flush(10.0)
            else:
                log.warning("Kafka did not acknowledge a record (%s): no checkpoint past it; what followed the last "
                            "checkpoint is sent again", frontier.failure)  # fmt: skip
            self.held.drop_group()

    def _read(self, raw: bytes, decoder: BinlogDecoder, inner: bool = False) -> None:
        """One raw event: decoded, fed to the core, its actions carried out (MySQL's compressed transactions:
        each inner event in turn, as if they came one by one)."""
        self.last_read = time.monotonic()
        try:
            ev = decoder.decode(raw, inner=inner)
        except BinlogDecodeError as exc:
            self._undecodable(raw, exc, decoder)
            return
        if not isinstance(ev, TransactionPayloadEvent):
            for action in self._core_now().feed(ev):
                self._carry_out(action)
            return
        try:
            for inner_raw in ev.events():
                self._read(inner_raw, decoder, inner=True)
        except BinlogDecodeError as exc:  # the payload itself (zstd frame, sizes) is broken
            p = self._core_now().position
            raise UndecodableEvent(f"cannot decode the compressed transaction ending at {p.file}:{ev.header.log_pos} "
                                   f"(GTID {p.ctx.gtid if p.ctx else '?'}): {exc}. Stopped; nothing after it was "
                                   "published or checkpointed.") from None  # fmt: skip

    def _core_now(self) -> core.CaptureCore:
        assert self._core is not None
        return self._core

    def _carry_out(self, action: core.Action) -> None:
        """One decision of the core, in the order the core gave them."""
        p = self._core_now().position
        if isinstance(action, core.EndGroup):
            self.publisher.forget_published()
            self._core_now().end_group(action.header, self.snapshots.progress)
            self.stats.transactions += 1
            self.stats.last_source_ts_ms = action.header.timestamp * 1000
            return
        if isinstance(action, core.CaughtUp):
            self.stats.last_source_ts_ms = int(time.time() * 1000)
            return
        assert p.ctx is not None and p.txn is not None
        ctx, txn = p.ctx, p.txn
        if isinstance(action, core.PublishRows):
            records = self.publisher.rows(action.event, ctx, txn)
            if action.held:
                self.held.hold(records)
            else:
                for record in records:
                    self.publisher.change(record, txn)
        elif isinstance(action, core.DescribeTable):
            self.publisher.describe(action.event, ctx, txn)
        elif isinstance(action, core.UndoHeld):
            self.stats.rolled_back_rows += self.held.undo(action.kept)
        elif isinstance(action, core.ReleaseGroup):
            self._publish(self.held.take_group(), txn)
            self.publisher.transaction_end(ctx.id, ctx.seq, action.commit.timestamp * 1000, txn)
        elif isinstance(action, core.DiscardGroup):
            self.stats.rolled_back_rows += self.held.drop_group()
            self.stats.rolled_back_groups += 1
        elif isinstance(action, core.PrepareXa):
            assert ctx.gtid is not None
            held = self.held.prepare(action.xid, ctx.gtid, self.publisher.sender(txn))
            self._core_now().prepared(action.xid, held)
            # (counted when it holds rows: XA transactions of tables the capture does not read are not its own)
            self.stats.xa_prepared += 1 if held else 0
        elif isinstance(action, core.CompleteXa):
            rows, keys = self.held.complete(action.xid, action.prepared)
            if rows is None:
                self.stats.xa_unknown += 1
                what = "COMMIT" if action.commit else "ROLLBACK"
                log.warning("%s: XA %s of %s, which was prepared before this capture's start position: its rows "
                            "were not captured", ctx.gtid, what, action.xid)  # fmt: skip
            elif action.commit:
                self.stats.xa_committed += 1 if len(rows) else 0
                self._publish(rows, txn)
                prepared, at_ms = action.prepared or {}, action.at.timestamp * 1000 if action.at else 0
                if isinstance(prepared.get("seq"), int):  # (prepared by a version that did not record it: none)
                    self.publisher.transaction_end(str(prepared["gtid"]), prepared["seq"], at_ms, txn)
            else:
                self.stats.xa_rolled_back += 1 if len(rows) else 0
                self.stats.rolled_back_rows += len(rows)
                rows.clear()
            txn.released.extend(keys)  # their XA-topic records go once a stored checkpoint is past this group
        elif isinstance(action, core.PublishDdl):
            self.publisher.ddl(action.event, ctx, txn)
            self.ddl.follow(action.event, ctx, txn)
            # (a DDL that emptied tables published their op t events: a transaction of its own)
            self.publisher.transaction_end(ctx.id, ctx.seq, action.event.header.timestamp * 1000, txn)
        self.stats.xa_waiting = self.held.waiting

    def _publish(self, rows: RecordBuffer | None, txn: PendingTxn) -> None:
        """Held rows that happened: out, then forgotten."""
        if rows is not None:
            for record in rows:
                self.publisher.change(record, txn)
            rows.clear()

    def _undecodable(self, raw: bytes, exc: BinlogDecodeError, decoder: BinlogDecoder) -> None:
        """`on_undecodable: stop` (default) ends the capture with an error naming where; `dead_letter` sends
        the raw bytes and position to the dead-letter topic and goes on without them."""
        position = self._core_now().position
        table = decoder.table_of(raw) if len(raw) > 4 else None
        record = dead_letter(raw, exc, table, position, self.cfg.name, self.cfg.on_undecodable)
        assert position.txn is not None
        log.error("dead-lettering an undecodable event of %s at %s: %s", table, position.file, exc)
        self.publisher.send(self.cfg.dead_letter_topic, self.cfg.name.encode(), record, position.txn)
        self.stats.dead_letters += 1

    def _decode_watermarks(self) -> None:
        """A snapshot was set up to follow a DDL: the decoder reads the watermark table's events from now on."""
        if self._decoder is not None:
            self._decoder.forget_tables()
