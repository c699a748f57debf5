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

from cdcflow.clients.kafka import (
    KafkaEndpoint,
    create_store_topic,
    create_topic,
    iter_to_end,
    partition_count,
    read_latest,
    topic_config,
)
from cdcflow.clients.kafka.producer import DeliveryCallback, ProducerSettings, SyncProducer
from cdcflow.clients.mysql import BinlogStream, MySqlEndpoint, StreamStart, query
from cdcflow.clients.registry import SchemaRegistry
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.errors import CdcflowError, ConfigError, RetryableError, ServiceUnavailable, TerminalError
from cdcflow.events import oversize
from cdcflow.events.debezium.envelope import DebeziumTable
from cdcflow.events.heartbeats import heartbeat_record
from cdcflow.events.json_codec import encode
from cdcflow.events.model import ChangeEvent
from cdcflow.events.topics import change_topic
from cdcflow.patterns import NameFilter
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import (
    PARTIAL_UPDATE_ROWS,
    TABLE_MAP,
    BinlogDecoder,
    BinlogEvent,
    EventHeader,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    UnsupportedEvent,
    XaPrepareEvent,
    XidEvent,
)
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.binlog.mysql_events import MySqlGtidEvent, TransactionPayloadEvent
from cdcflow.sources.mysql.changes import TxnContext, key_columns, row_changes, row_records, truncate_change
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn
from cdcflow.sources.mysql.ddl import Emptied, Refilled, row_effects
from cdcflow.sources.mysql.debezium_fields import field_from_information_schema
from cdcflow.sources.mysql.debezium_records import DebeziumOutput, DebeziumRecords
from cdcflow.sources.mysql.preflight import ServerInfo, preflight
from cdcflow.sources.mysql.selected_values import describe_table, table_columns
from cdcflow.sources.mysql.signals import LogSignal, SignalRefused, create_signal_table, parse_signal
from cdcflow.sources.mysql.snapshot import Snapshotter
from cdcflow.sources.mysql.transactions import QueryRole, TransactionState, history_behind, savepoint_name
from cdcflow.sources.mysql.txn_buffer import HeldRecord, RecordBuffer
from cdcflow.sources.mysql.xa import HoldingKey, check_complete

log = logging.getLogger(__name__)


@dataclass
class CaptureStats:
    events: int = 0  # change events published
    transactions: int = 0
    ddl: int = 0
    truncates: int = 0  # tables emptied by a DDL (TRUNCATE, DROP, RENAME, a new key), published as op t events
    ddl_rereads: int = 0  # tables read again because a DDL changed their rows without row events
    ddl_not_followed: int = 0  # such DDLs the capture could not follow (no snapshot possible): the sinks differ
    # db.table -> why its sinks differ from it since (a DDL changed its rows and it could not be read again)
    not_followed: dict[str, str] = field(default_factory=dict)
    dead_letters: int = 0
    restarts: int = 0
    snapshot_rows: int = 0
    rolled_back_rows: int = 0  # rows MariaDB wrote that a ROLLBACK (TO SAVEPOINT) or XA ROLLBACK undid
    rolled_back_groups: int = 0  # event groups that ended in ROLLBACK
    xa_prepared: int = 0
    xa_committed: int = 0
    xa_rolled_back: int = 0
    xa_waiting: int = 0  # prepared XA transactions not completed yet
    xa_unknown: int = 0  # XA COMMIT/ROLLBACK of a transaction prepared before the capture's start
    oversize: int = 0  # changes too large for their topic, published as a marker and parts
    heartbeats: int = 0  # heartbeat records sent (output.heartbeat_topic)
    signals: int = 0  # signal rows acted on (snapshot.signal_table)
    signals_refused: int = 0  # signal rows that could not be acted on (logged with the reason)
    partial_json_rows: int = 0  # MySQL: rows of Update_rows_partial events (JSON diffs applied to the before image)
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
        self._topics: dict[str, int] = {}  # topic -> largest encoded event it takes
        self._table_columns: dict[str, list[dict[str, object]]] = {}  # last schema published per table
        self._group: RecordBuffer | None = None  # rows of the open group held until its end
        self._xa_held: dict[str, RecordBuffer] = {}  # xid -> rows of a prepared XA transaction
        self._xa_garbage: list[bytes] = []  # XA-topic keys to delete (a stored checkpoint is past them)
        self._since_poll = 0
        self.server: ServerInfo | None = None
        self.snapshot: Snapshotter | None = None
        self.progress: dict[str, Any] = {}  # snapshot progress, carried in every checkpoint
        self.streaming = threading.Event()  # set once the binlog stream is open (tests wait for it)
        self.stream_open = False  # whether it is open now (metrics)
        self.last_read = 0.0  # monotonic time of the last event read (heartbeats included): liveness
        self.debezium: DebeziumRecords | None = None  # output.format: debezium (set once the server is known)
        self._decoder: BinlogDecoder | None = None  # the open stream's

    # -- set-up ----------------------------------------------------------------------------------------

    def topic_for(self, db: str, table: str) -> str:
        return change_topic(self.cfg.topic_prefix, db, table)

    def _ensure_topic(self, topic: str) -> int:
        """Create `topic` if needed; the largest event it takes (its max.message.bytes, less room for the
        key and the record's framing, and at most max_record_bytes)."""
        limit = self._topics.get(topic)
        if limit is None:
            create_topic(self.bootstrap, topic, partitions=self.cfg.topic_partitions,
                         config={"max.message.bytes": str(self.cfg.max_record_bytes + 64 * 1024)})  # fmt: skip
            topic_max = int(topic_config(self.bootstrap, topic, "max.message.bytes") or self.cfg.max_record_bytes)
            limit = min(self.cfg.max_record_bytes, topic_max - 16 * 1024)
            self._topics[topic] = limit
        return limit

    def _change_records(self, change: ChangeEvent, topic: str, table: str) -> list[HeldRecord]:
        """A change event as the records that carry it: one, or (too large for its topic) parts and a marker."""
        value = encode(change)
        limit = self._ensure_topic(topic)
        if len(value) <= limit:
            return [HeldRecord(topic, change.key, value, table)]
        where = f"{table} key {change.key.decode(errors='replace')[:200]} at {list(change.source.pos)}"
        if self.cfg.oversize == "stop":
            raise TerminalError(f"the change of {where} is {len(value)} bytes, over the {limit} bytes topic {topic} "
                                "takes, and mysql.oversize is 'stop'")  # fmt: skip
        cut = oversize.cut(change, value, self.cfg.oversize_topic, self._ensure_topic(self.cfg.oversize_topic))
        # The parts are acknowledged before the marker is made: it says where they are. Parts of a change
        # read again after a restart are sent again; the earlier ones stay unreferenced.
        located = self.producer.send_located(self.cfg.oversize_topic, cut.info["id"].encode(), cut.parts)
        self.stats.oversize += 1
        log.warning("the change of %s is %d bytes, over the %d bytes topic %s takes: published as a marker there "
                    "and %d parts in %s partition %d", where, len(value), limit, topic, len(cut.parts),
                    self.cfg.oversize_topic, located[0][0])  # fmt: skip
        return [HeldRecord(topic, change.key, oversize.marker(change, cut, limit, located), table)]

    def load_checkpoint(self) -> Checkpoint | None:
        raw = read_latest(self.bootstrap, self.cfg.offsets_topic, self.cfg.name.encode())
        return Checkpoint.from_bytes(raw) if raw else None

    def _initial_checkpoint(self, server: ServerInfo) -> Checkpoint:
        if server.mysql:  # MySQL: the transactions to skip; `earliest` = those whose binlogs are gone
            state = server.gtid_purged if self.cfg.start == "earliest" else server.gtid_executed
            return Checkpoint(gtid_state=str(GtidSet.parse(state)), file="", pos=4, server_id=server.server_id)
        if self.cfg.start == "earliest":
            return Checkpoint(gtid_state="", file="", pos=4)
        return Checkpoint(gtid_state=server.gtid_binlog_pos, file="", pos=4)

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
        out = self.cfg.output
        if out.format == "debezium":
            connector = "mariadb" if self.server.mariadb else "mysql"
            register = None
            if out.serialization == "avro":
                if not self.kafka.schema_registry_url:
                    raise ConfigError("mysql.output.serialization is avro: set kafka.schema_registry_url "
                                      "(or run the local stack's registry: cdcflow stack up registry)")  # fmt: skip
                register = SchemaRegistry(self.kafka.schema_registry_url).register
            self.debezium = DebeziumRecords(
                DebeziumOutput(self.cfg.name, connector, out.schemas, out.tombstones, out.decimal_handling,
                               out.serialization, out.transaction_topic,
                               identities=self._may_snapshot or self.cfg.snapshot.on_ddl,
                               propagate_source_types=out.propagate_source_types),
                register,
            )  # fmt: skip
            log.info("output format: debezium, %s (%s connector's events%s%s)", out.serialization, connector,
                     ", with Connect schemas" if out.schemas else "", ", tombstones after deletes"
                     if out.tombstones else "")  # fmt: skip
        if out.transaction_topic:
            create_store_topic(self.bootstrap, out.transaction_topic, compact=False)
        if out.heartbeat_topic:  # compacted: the newest heartbeat per source is what counts
            create_store_topic(self.bootstrap, out.heartbeat_topic, compact=True)
        for topic, compact in ((self.cfg.offsets_topic, True), (self.cfg.schema_history_topic, False),
                               (self.cfg.xa_topic, True)):  # fmt: skip
            create_store_topic(self.bootstrap, topic, compact=compact)
        checkpoint = self.load_checkpoint()
        self._setup_snapshot(checkpoint)
        if checkpoint is None:
            checkpoint = self._initial_checkpoint(self.server)
            log.info(
                "no checkpoint for %s: starting at %s", self.cfg.name, checkpoint.gtid_state or "the oldest binlog"
            )
        else:
            self._check_history(checkpoint)
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
                # The server's address in the line: with several sources in one log, which one went away.
                log.warning(
                    "capture interrupted (%s:%s: %s); resuming from the last acknowledged checkpoint in %.1f s",
                    self.ep.host,
                    self.ep.port,
                    exc,
                    backoff,
                )
                stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            assert self.stats.checkpoint is not None
            checkpoint = self.stats.checkpoint
        return self.stats

    def _check_history(self, checkpoint: Checkpoint) -> None:
        """Refuse to resume on a binlog history other than the checkpoint's: positions would go backwards
        and every sink would ignore the changes that follow."""
        assert self.server is not None
        if self.server.mysql:
            problems = _mysql_history_problems(checkpoint.gtid_state or "", self.server)
        else:
            problems = history_behind(checkpoint.gtid_state or "", self.server.gtid_binlog_pos)
        if not problems and self.server.mariadb and checkpoint.file and checkpoint.server_id == self.server.server_id:
            # The same server: its binlog at the checkpoint's file/position must be where the checkpoint says.
            rows = query(self.ep, "SELECT BINLOG_GTID_POS(%s, %s)", (checkpoint.file, checkpoint.pos))
            there = rows[0][0] if rows else None
            if there is not None and there != "" and there != checkpoint.gtid_state:
                problems.append(f"{checkpoint.file}:{checkpoint.pos} is at GTID {there} on the server, "
                                f"not at the checkpoint's {checkpoint.gtid_state}")  # fmt: skip
        if problems:
            raise BinlogHistoryChanged(
                f"MySQL source {self.cfg.name}: the server's binlog history is not the one this capture's checkpoint "
                f"came from ({'; '.join(problems)}). Resuming would publish positions that go backwards. If the "
                f"history was reset on purpose, delete the checkpoint (key {self.cfg.name!r} in "
                f"{self.cfg.offsets_topic}) and start again, rebuilding the sinks."
            )

    @property
    def _may_snapshot(self) -> bool:
        """Configured tables to snapshot, or a signal table that may ask for some."""
        return bool(self.cfg.snapshot.tables or self.cfg.snapshot.signal_table)

    def _setup_snapshot(self, checkpoint: Checkpoint | None, keep_progress: bool = False, forced: bool = False) -> None:
        snap_cfg = self.cfg.snapshot
        if not keep_progress:
            self.progress = copy.deepcopy(checkpoint.snapshot) if checkpoint else {}
        self.snapshot = None
        unfinished = any(not p.get("done") for p in self.progress.values())  # a re-read after a DDL, say
        if not (self._may_snapshot or unfinished or forced):
            return
        self.filter.always = frozenset({snap_cfg.watermark_table, *filter(None, [snap_cfg.signal_table])})
        if snap_cfg.signal_table:
            create_signal_table(self.ep, snap_cfg.signal_table)
        snapshot_ep = self.ep
        self.snapshot = Snapshotter(snapshot_ep, self.cfg.name, snap_cfg.watermark_table, snap_cfg.chunk_size,
                                    self.progress, self.cfg.key_columns)  # fmt: skip

    def _stream(self, start: Checkpoint, stop: threading.Event) -> None:
        assert self.server is not None
        stream = BinlogStream(self.ep, self.cfg.server_id, heartbeat_s=self.cfg.heartbeat_s,
                              read_timeout_s=max(10.0, self.cfg.heartbeat_s * 5))  # fmt: skip
        self.producer.reset()  # anything unacknowledged from a previous attempt is re-sent from `start`
        # Schema records sent in the last attempt may have been purged unacknowledged: describe every
        # table again when it next appears.
        self._table_columns.clear()
        self._group = None
        self._load_xa(start)
        if self.snapshot is not None:  # snapshot progress goes back with the stream position
            self.snapshot.chunk = None
            self.progress.clear()
            self.progress.update(copy.deepcopy(start.snapshot))
            self.snapshot.prepare(self.cfg.snapshot.tables, TableFilter(self.cfg.include, self.cfg.exclude))
        frontier = AckFrontier()
        if self.server.mysql:
            stream.open(StreamStart(mysql_gtids=GtidSet.parse(start.gtid_state or "").encode()))
        else:
            stream.open(StreamStart(gtid_state=start.gtid_state or ""))
        self.streaming.set()
        self.stream_open = True
        decoder = BinlogDecoder(collations=self.server.collations, table_filter=self.filter)
        self._decoder = decoder
        decoder.checksum = stream.checksum
        position = TransactionState(start, frontier, mysql=self.server.mysql)
        last_flush = last_beat = time.monotonic()
        beat_every = self.cfg.output.heartbeat_interval_s if self.cfg.output.heartbeat_topic else None
        self._since_poll = 0
        try:
            while not stop.is_set():
                snapshot = self.snapshot  # (a DDL may set one up while the stream runs)
                if snapshot is not None:
                    snapshot.step()  # the chunk's SQL runs in a worker thread
                raw = stream.read()
                self.last_read = time.monotonic()
                try:
                    ev = decoder.decode(raw)
                except BinlogDecodeError as exc:
                    self._undecodable(raw, exc, decoder, position)
                    continue
                if isinstance(ev, TransactionPayloadEvent):
                    self._on_payload(ev, decoder, position)
                else:
                    self._on_event(ev, position)
                now = time.monotonic()
                if now - last_flush >= self.cfg.checkpoint_interval_ms / 1000:
                    self._checkpoint(frontier)
                    last_flush = now
                if beat_every is not None and now - last_beat >= beat_every:
                    self._heartbeat(frontier)
                    last_beat = now
        finally:
            self.stream_open = False
            stream.close()
            # Whatever was acknowledged up to here still counts: record it before leaving.
            self.producer.flush(min(30.0, self.cfg.heartbeat_s * 30))
            if frontier.failure is None:
                self._checkpoint(frontier)
                self.producer.flush(10.0)
            else:
                log.warning("Kafka did not acknowledge a record (%s): no checkpoint past it; what followed the last "
                            "checkpoint is sent again", frontier.failure)  # fmt: skip
            if self._group is not None:
                self._group.clear()
                self._group = None

    def _on_payload(self, payload: TransactionPayloadEvent, decoder: BinlogDecoder,
                    position: TransactionState) -> None:  # fmt: skip
        """MySQL's compressed transaction: its events, decompressed one at a time, as if they came one by one."""
        try:
            for raw in payload.events():
                try:
                    ev = decoder.decode(raw, inner=True)
                except BinlogDecodeError as exc:
                    self._undecodable(raw, exc, decoder, position)
                    continue
                self._on_event(ev, position)
        except BinlogDecodeError as exc:  # the payload itself (zstd frame, sizes) is broken
            raise UndecodableEvent(
                f"cannot decode the compressed transaction ending at {position.file}:"
                f"{payload.header.log_pos} (GTID {position.ctx.gtid if position.ctx else '?'}): "
                f"{exc}. Stopped; nothing after it was published or checkpointed."
            ) from None

    def _on_event(self, ev: BinlogEvent, position: TransactionState) -> None:
        h = ev.header
        if isinstance(ev, RowsEvent):
            if ev.schema is not None and position.ctx is not None:
                position.ctx.event_index += 1
                self._publish_rows(ev, position)
                self._since_poll += len(ev.rows)
                if self._since_poll >= 2000:
                    self.producer.poll(0)
                    self._since_poll = 0
        elif isinstance(ev, TableMapEvent):
            if ev.schema is not None and position.open is not None:
                self._maybe_publish_schema(ev, *position.open)
        elif isinstance(ev, GtidEvent | MySqlGtidEvent):
            if position.open is not None:
                raise TerminalError(f"binlog at {position.file}:{h.start_pos}: GTID {ev.gtid} starts a group "
                                    f"while {position.ctx.id if position.ctx else '?'} is still open")  # fmt: skip
            if isinstance(ev, GtidEvent):
                position.begin(ev)
            else:
                position.begin_mysql(ev)
            self._group = self._new_buffer() if position.holds_rows else None
        elif isinstance(ev, XidEvent):
            if position.open is not None:
                self._release_group(position)
                self._debezium_transaction_end(position, h)
                self._end_group(h, position)
        elif isinstance(ev, XaPrepareEvent):
            if position.open is not None:
                if ev.one_phase:  # XA COMMIT ... ONE PHASE: an ordinary commit
                    self._release_group(position)
                    self._debezium_transaction_end(position, h)
                else:
                    self._hold_prepared(ev.xid, position)
                self._end_group(h, position)
        elif isinstance(ev, QueryEvent):
            self._on_query(ev, position)
        elif isinstance(ev, HeartbeatEvent):  # sent only when there is nothing newer: caught up
            self.stats.last_source_ts_ms = int(time.time() * 1000)
        elif isinstance(ev, RotateEvent):
            position.rotate(ev.next_file)
        elif isinstance(ev, UnsupportedEvent):
            raise TerminalError(f"binlog at {position.file}:{h.start_pos}: {ev.reason}")

    def _on_query(self, ev: QueryEvent, position: TransactionState) -> None:
        role = position.query_role(ev.query)
        opened = position.open
        if role is QueryRole.OUTSIDE or role is QueryRole.STATEMENT or opened is None:
            return
        ctx, txn = opened
        if role is QueryRole.XA_START:  # MySQL: the rows of a prepared XA transaction wait for its completion
            if self._group is None:
                self._group = self._new_buffer()
            return
        if role is QueryRole.SAVEPOINT:
            if self._group is None:  # rows before a savepoint cannot be undone by ROLLBACK TO: hold from here
                self._group = self._new_buffer()
            position.savepoints[savepoint_name(ev.query)] = self._group.mark()
            return
        if role is QueryRole.ROLLBACK_TO:
            name = savepoint_name(ev.query)
            mark = position.savepoints.get(name)
            if mark is None or self._group is None:
                raise TerminalError(f"binlog at {position.file}:{ev.header.start_pos} ({ctx.gtid}): {ev.query!r} "
                                    "without its SAVEPOINT earlier in the group")  # fmt: skip
            dropped = self._group.truncate(mark)
            position.savepoints = {n: m for n, m in position.savepoints.items() if m <= mark}
            self.stats.rolled_back_rows += dropped
            log.debug("%s: ROLLBACK TO %s undid %d rows", ctx.gtid, name, dropped)
            return
        if role is QueryRole.COMMIT:
            self._release_group(position)
            self._debezium_transaction_end(position, ev.header)
        elif role is QueryRole.ROLLBACK:
            if position.streamed_rows:
                raise TerminalError(
                    f"binlog at {position.file}:{ev.header.start_pos} ({ctx.gtid}): a group MariaDB marked as "
                    f"transactional ends in ROLLBACK after {position.streamed_rows} of its rows were published"
                )
            self._discard_group(position)
        elif role is QueryRole.DDL:
            self._publish_ddl(ev, ctx, txn)
            self._follow_ddl(ev, ctx, txn)
        elif role in (QueryRole.XA_COMMIT, QueryRole.XA_ROLLBACK):
            self._complete_xa(position, commit=role is QueryRole.XA_COMMIT)
        self._end_group(ev.header, position)

    def _end_group(self, header: EventHeader, position: TransactionState) -> None:
        position.commit(header, self.progress)
        self.stats.transactions += 1
        self.stats.last_source_ts_ms = header.timestamp * 1000

    # -- rows held until their group ends ---------------------------------------------------------------

    def _new_buffer(self, memory_mb: float | None = None) -> RecordBuffer:
        budget = self.cfg.held_memory_mb if memory_mb is None else memory_mb
        return RecordBuffer(int(budget * 2**20), self.cfg.spill_dir)

    def _emit(self, record: HeldRecord, position: TransactionState | None, txn: PendingTxn) -> None:
        """A change event of the open group: out now, or held until the group's end says it happened."""
        if self._group is not None:
            self._group.append(record)
            return
        if position is not None:
            position.streamed_rows += 1
        self._send_change(record, txn)

    def _send_change(self, record: HeldRecord, txn: PendingTxn) -> None:
        snapshot = self.snapshot
        if record.table and snapshot is not None and snapshot.chunk is not None and snapshot.chunk.in_window:
            snapshot.observe(record.table, record.identity if record.identity is not None else record.key or b"")
        self._send(record.topic, record.key, record.value, txn)
        if record.table:
            self.stats.events += 1

    def _release_group(self, position: TransactionState) -> None:
        """The open group committed: its held rows go out."""
        group, self._group = self._group, None
        if group is None:
            return
        assert position.txn is not None
        for record in group:
            self._send_change(record, position.txn)
            self._since_poll += 1
            if self._since_poll >= 2000:
                self.producer.poll(0)
                self._since_poll = 0
        group.clear()

    def _discard_group(self, position: TransactionState) -> None:
        """The open group ended in ROLLBACK: MariaDB wrote rows that never happened."""
        group, self._group = self._group, None
        dropped = len(group) if group is not None else 0
        if group is not None:
            group.clear()
        self.stats.rolled_back_rows += dropped
        self.stats.rolled_back_groups += 1
        log.debug("%s ended in ROLLBACK: %d rows not published", position.ctx.gtid if position.ctx else "?", dropped)

    # -- XA ------------------------------------------------------------------------------------------------

    def _load_xa(self, start: Checkpoint) -> None:
        """The held rows of the XA transactions `start` lists as prepared, from the XA topic; anything else
        there (left by an earlier run) is deleted."""
        for held in self._xa_held.values():
            held.clear()
        self._xa_held = {}
        found: dict[tuple[str, str], dict[int, bytes]] = {}
        for rec in iter_to_end(self.bootstrap, self.cfg.xa_topic, timeout_s=120):
            key = HoldingKey.from_bytes(rec.key or b"")
            if key is None or key.source != self.cfg.name:
                continue
            rows = found.setdefault((key.xid, key.gtid), {})
            if rec.value is None:
                rows.pop(key.seq, None)
            else:
                rows[key.seq] = rec.value
        for (xid, gtid), rows in found.items():
            wanted = start.xa_prepared.get(xid)
            if wanted is None or wanted["gtid"] != gtid:
                for seq in rows:
                    self.producer.send(self.cfg.xa_topic, HoldingKey(self.cfg.name, xid, gtid, seq).to_bytes(), None,
                                       _ignore_ack)  # fmt: skip
        for xid, wanted in start.xa_prepared.items():
            values = check_complete(xid, wanted["gtid"], int(wanted["records"]), found.get((xid, wanted["gtid"]), {}))
            held = self._new_buffer(memory_mb=4)
            for value in values:
                held.append(HeldRecord.from_bytes(value))
            self._xa_held[xid] = held
        if self._xa_held:
            log.info("%d prepared XA transactions wait for XA COMMIT/ROLLBACK: %s", len(self._xa_held),
                     ", ".join(sorted(self._xa_held)))  # fmt: skip
        self.stats.xa_waiting = len(self._xa_held)

    def _hold_prepared(self, xid: str, position: TransactionState) -> None:
        """XA PREPARE: the group's rows wait under `xid`, in memory and in the XA topic."""
        assert position.ctx is not None and position.ctx.gtid is not None and position.txn is not None
        group, self._group = self._group, None
        held = group if group is not None else self._new_buffer(memory_mb=4)
        gtid = position.ctx.gtid
        for seq, record in enumerate(held):
            key = HoldingKey(self.cfg.name, xid, gtid, seq).to_bytes()
            self._send(self.cfg.xa_topic, key, record.to_bytes(), position.txn)
        old = self._xa_held.pop(xid, None)
        if old is not None:
            old.clear()
        self._xa_held[xid] = held
        position.xa_prepared_here(xid, len(held))
        self.stats.xa_prepared += 1
        self.stats.xa_waiting = len(self._xa_held)

    def _complete_xa(self, position: TransactionState, commit: bool) -> None:
        """XA COMMIT publishes the rows held for the group's XA id, XA ROLLBACK drops them; their XA-topic
        records are deleted once a stored checkpoint is past this group."""
        assert position.txn is not None and position.ctx is not None
        xid = position.xid or ""
        prepared = position.xa_completed_here(xid)
        held = self._xa_held.pop(xid, None)
        self.stats.xa_waiting = len(self._xa_held)
        if prepared is None or held is None:
            self.stats.xa_unknown += 1
            log.warning("%s: XA %s of %s, which was prepared before this capture's start position: its rows "
                        "were not captured", position.ctx.gtid, "COMMIT" if commit else "ROLLBACK", xid)  # fmt: skip
            return
        if commit:
            for record in held:
                self._send_change(record, position.txn)
            self.stats.xa_committed += 1
        else:
            self.stats.xa_rolled_back += 1
            self.stats.rolled_back_rows += len(held)
        position.txn.released.extend(
            HoldingKey(self.cfg.name, xid, prepared["gtid"], seq).to_bytes() for seq in range(len(held))
        )
        held.clear()

    # -- checkpoints ---------------------------------------------------------------------------------------

    def _checkpoint(self, frontier: AckFrontier) -> None:
        self.producer.poll(0)
        if frontier.failure is not None:
            raise ServiceUnavailable(f"Kafka did not acknowledge a record: {frontier.failure}")
        for key in self._xa_garbage:  # XA-topic records no stored checkpoint needs any more
            self.producer.send(self.cfg.xa_topic, key, None, _ignore_ack)
        self._xa_garbage = []
        newest = frontier.advance()
        if newest is None:
            return
        released, frontier.released = frontier.released, []
        self.producer.send(self.cfg.offsets_topic, self.cfg.name.encode(), newest.to_bytes(),
                           self._on_checkpoint_stored(released))  # fmt: skip
        self.stats.checkpoint = newest
        self.stats.checkpoints += 1

    def _on_checkpoint_stored(self, released: list[bytes]) -> DeliveryCallback:
        """Checkpoint records need no acknowledgement (a lost one only means resuming from an earlier one),
        but what a checkpoint releases waits until it is stored."""

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None and released:
                self._xa_garbage.extend(released)

        return on_delivery

    # -- publishing ------------------------------------------------------------------------------------

    def _send(self, topic: str, key: bytes | None, value: bytes | None, txn: PendingTxn, partition: int = -1) -> None:
        txn.outstanding += 1
        self.producer.send(topic, key, value, txn.on_delivery, partition)

    def _publish_rows(self, ev: RowsEvent, position: TransactionState) -> None:
        schema = ev.schema
        assert schema is not None and position.open is not None
        ctx, txn = position.open
        snapshot = self.snapshot
        if snapshot is not None and schema.qualified == self.cfg.snapshot.signal_table:
            for before, after in ev.rows:
                if before is None and after is not None:  # an insert; updates and deletes are not signals
                    self._on_signal(after, snapshot)
            return
        if snapshot is not None and snapshot.is_watermark_table(schema.qualified):
            for _before, after in ev.rows:
                chunk_table = snapshot.chunk.table if snapshot.chunk else ""
                reads = snapshot.on_watermark(after or {}, ctx, ev.header.start_pos, ev.header.timestamp * 1000)
                if reads:
                    db, table = chunk_table.split(".", 1)
                    self._publish_shape_if_unknown(db, table, ctx, txn, ev.header)
                    topic = self.topic_for(db, table)
                    if self.debezium is not None:
                        self._ensure_topic(topic)
                        dbz = self.debezium.known(chunk_table) or self._debezium_table_from_server(db, table)
                        for key, value, _identity in self.debezium.reads(dbz, reads, topic):
                            self._emit(HeldRecord(topic, key, value, ""), position, txn)
                    else:
                        for change in reads:
                            for record in self._change_records(change, topic, ""):
                                self._emit(record, position, txn)
                    self.stats.snapshot_rows += len(reads)
            return
        if ev.header.type == PARTIAL_UPDATE_ROWS:
            self.stats.partial_json_rows += len(ev.rows)
        topic = self.topic_for(schema.db, schema.table)
        keys = key_columns(schema, self.cfg.key_columns)
        table = schema.qualified
        if self.debezium is not None:
            # Debezium: a table without a primary key (nor message.key.columns) has records without a key
            keyed = bool(schema.primary_key) or table in self.cfg.key_columns
            self._publish_debezium_rows(ev, position, topic, keys if keyed else ())
            return
        encoded = row_records(ev, ctx, self.cfg.name, keys, self._ensure_topic(topic))
        if encoded is not None:
            for key, value in encoded:
                self._emit(HeldRecord(topic, key, value, table), position, txn)
            return
        for change in row_changes(ev, ctx, self.cfg.name, keys):  # a record too large: split as events
            for record in self._change_records(change, topic, table):
                self._emit(record, position, txn)

    def _publish_debezium_rows(self, ev: RowsEvent, position: TransactionState, topic: str,
                               keys: tuple[str, ...]) -> None:  # fmt: skip
        """output.format: debezium. A record larger than its topic takes cannot be split in this format
        (Debezium consumers would not reassemble it): the capture stops naming it (docs/debezium.md)."""
        assert self.debezium is not None and ev.schema is not None and position.open is not None
        ctx, txn = position.open
        limit = self._ensure_topic(topic)
        table = ev.schema.qualified
        out = self.cfg.output
        if out.transaction_topic and ctx.order == 0:
            begin_key, begin, _ = self.debezium.transaction_record(ctx.id, ev.header.timestamp * 1000, None)
            self._emit(HeldRecord(out.transaction_topic, begin_key, begin), position, txn)
        for key, value, identity in self.debezium.rows(ev, ctx, keys, topic):
            if value is not None and len(value) > limit:
                raise TerminalError(
                    f"a change of {table} at {ctx.file}:{ev.header.start_pos} ({ctx.gtid}) is {len(value)} bytes, "
                    f"over the {limit} bytes topic {topic} takes; the debezium format cannot split it: raise the "
                    "topic's max.message.bytes and mysql.max_record_bytes, or use output.format: cdcflow"
                )  # fmt: skip
            self._emit(HeldRecord(topic, key, value, table if value is not None else "", identity), position, txn)

    def _on_signal(self, row: dict[str, Any], snapshot: Snapshotter) -> None:
        """A row of the signal table (signals.py). Handled where the binlog has it: the progress it starts rides
        in the checkpoint of its transaction, and a restart from before it reads it again."""
        try:
            signal = parse_signal(row)
        except SignalRefused as exc:
            self.stats.signals_refused += 1
            log.warning("signal refused: %s", exc)
            return
        self.stats.signals += 1
        if isinstance(signal, LogSignal):
            log.info("signal %s: %s", signal.id, signal.message)
            return
        added = snapshot.request(signal.tables, TableFilter(self.cfg.include, self.cfg.exclude), signal.id)
        for table in added:
            self.not_followed_cleared(table)
        if not added:
            log.warning("signal %s: no table to snapshot for %s (none matches, is captured and has a primary key, "
                        "or it is being snapshotted already)", signal.id, ", ".join(signal.tables))  # fmt: skip

    def _heartbeat(self, frontier: AckFrontier) -> None:
        """A heartbeat record (output.heartbeat_topic), busy or idle. Not data: a lost one is only late news,
        so it is not part of any transaction's acknowledgements; a failure is logged.

        Its source time promises that every change up to it is in Kafka (the pipeline's lag counts on it): the
        newest change read when nothing read waits for an acknowledgement, else the acknowledged checkpoint's."""
        topic = self.cfg.output.heartbeat_topic
        assert topic is not None
        now_ms = int(time.time() * 1000)
        cp = self.stats.checkpoint
        if frontier.open_transactions == 0:
            source_ts_ms = self.stats.last_source_ts_ms or None
        else:
            source_ts_ms = (cp.ts_ms or None) if cp else None
        if self.debezium is not None:
            key, value = self.debezium.heartbeat_record(topic, now_ms, source_ts_ms)
        else:
            position = {"gtid_state": cp.gtid_state, "file": cp.file, "pos": cp.pos} if cp else {}
            key, value = heartbeat_record("mysql", self.cfg.name, position, source_ts_ms, now_ms)
        self.producer.send(topic, key, value, _log_heartbeat_failure)
        self.stats.heartbeats += 1

    def _debezium_transaction_end(self, position: TransactionState, commit: EventHeader) -> None:
        """The END record of a committed group that published rows (output.transaction_topic)."""
        out = self.cfg.output
        if not out.transaction_topic or position.open is None:
            return
        ctx, txn = position.open
        if ctx.order == 0:
            return
        assert self.debezium is not None
        key, value, _ = self.debezium.transaction_record(ctx.id, commit.timestamp * 1000, ctx.table_orders)
        self._send(out.transaction_topic, key, value, txn)

    def _debezium_table_from_server(self, db: str, table: str) -> DebeziumTable:
        """A snapshotted table no TABLE_MAP has described yet: its columns from information_schema."""
        assert self.debezium is not None
        rows = query(self.ep, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES', COLUMN_KEY = 'PRI' "
                     "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                     "ORDER BY ORDINAL_POSITION", (db, table))  # fmt: skip
        handling = self.debezium.out.decimal_handling
        propagate = self.debezium.out.propagate_source_types
        fields = [field_from_information_schema(str(n), str(d), str(c), bool(null), handling, propagate)
                  for n, d, c, null, _pk in rows]  # fmt: skip
        key_cols = query(
            self.ep,
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        return self.debezium.table_of(db, table, fields, tuple(str(k) for (k,) in key_cols))

    def _maybe_publish_schema(self, ev: TableMapEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        """Record a table's columns in the schema history whenever they differ from the last ones seen.
        (Not held with the group's rows: a table's description stays true if its rows are rolled back.)"""
        assert ev.schema is not None
        columns = ev.schema.describe()
        name = ev.schema.qualified
        if self._table_columns.get(name) == columns:
            return
        self._table_columns[name] = columns
        record = {
            "kind": "table", "source": self.cfg.name, "db": ev.schema.db, "table": ev.schema.table,
            "columns": columns, "gtid": ctx.gtid, "file": ctx.file,
            "pos": [ctx.seq, ctx.event_index, 0], "ts_ms": ev.header.timestamp * 1000,
        }  # fmt: skip
        self._send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn)

    def _publish_shape_if_unknown(self, db: str, table: str, ctx: TxnContext, txn: PendingTxn,
                                  header: EventHeader) -> None:  # fmt: skip
        """A table the snapshot reads before any row event of its own described it (or again after a DDL): its
        columns from information_schema into the schema history, so sinks that build typed tables know them."""
        name = f"{db}.{table}"
        if name in self._table_columns:
            return
        columns = describe_table(self.ep, db, table)
        if not columns:
            return
        self._table_columns[name] = columns
        record = {
            "kind": "table", "source": self.cfg.name, "db": db, "table": table, "columns": columns,
            "gtid": ctx.gtid, "file": ctx.file, "pos": [ctx.seq, ctx.event_index, 0],
            "ts_ms": header.timestamp * 1000, "from": "information_schema",
        }  # fmt: skip
        self._send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn)

    def _publish_ddl(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        record = {
            "kind": "ddl", "source": self.cfg.name, "db": ev.db, "ddl": ev.query, "gtid": ctx.gtid, "file": ctx.file,
            "pos": [ctx.seq, 0, 0], "ts_ms": ev.header.timestamp * 1000,
        }  # fmt: skip
        self._send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn)
        self.stats.ddl += 1
        log.info("DDL at %s:%d (%s): %s", ctx.file, ev.header.start_pos, ctx.gtid, ev.query[:200])

    def _follow_ddl(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        """What a DDL did to rows without row events (ddl.py), followed at its place in the stream: an emptied
        table gets an op t event; a refilled or rewritten table is read again (the incremental snapshot, after
        the DDL), a refilled or rekeyed one emptied first."""
        for effect in row_effects(ev.query, ev.db):
            db, table = effect.table
            qualified = f"{db}.{table}"
            if not self.filter(db, table) or qualified in self.filter.always:
                continue
            if isinstance(effect, Emptied):
                self._publish_truncate(ev, ctx, txn, db, table, effect.cause)
            elif isinstance(effect, Refilled):
                self._publish_truncate(ev, ctx, txn, db, table, "refill")
                self._read_again(qualified, ctx, f"{'.'.join(effect.previous)} was renamed to it")
            else:
                if effect.empty_first:
                    self._publish_truncate(ev, ctx, txn, db, table, effect.empty_first)
                self._read_again(qualified, ctx, effect.why)

    def _publish_truncate(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn, db: str, table: str,
                          cause: str) -> None:  # fmt: skip
        """An op t event in the table's topic, in every partition, so a reader of any one partition sees it
        before the changes that follow it there."""
        topic = self.topic_for(db, table)
        self._ensure_topic(topic)
        change = truncate_change(db, table, cause, ev.query, ctx, self.cfg.name, ev.header)
        if self.debezium is not None:
            qualified = f"{db}.{table}"
            described = self.debezium.known(qualified) or self._debezium_table_from_server(db, table)
            key, value = self.debezium.truncate(described, topic, change)
        else:
            key, value = None, encode(change)
        partitions = partition_count(self.bootstrap, topic)  # (a failure resumes from the last checkpoint)
        for partition in range(partitions):
            self._send(topic, key, value, txn, partition)
        self.stats.truncates += 1
        log.info("%s of %s.%s at %s:%d (%s): every row gone; an op t event in %d partition(s) of %s", cause, db,
                 table, ctx.file, ev.header.start_pos, ctx.gtid, partitions, topic)  # fmt: skip

    def _read_again(self, qualified: str, ctx: TxnContext, why: str) -> None:
        """Read a table again from its start with the incremental snapshot (positions after the DDL), so the
        sinks get the rows the DDL changed. Without a snapshot (no watermark table can be written) the sinks
        cannot follow: said loudly, with what to do."""
        snapshot = self._snapshot_for_ddl()
        if snapshot is None:
            self._not_followed(
                qualified,
                ctx,
                why,
                f"the table cannot be read again: let the capture write its "
                f"watermark table ({self.cfg.snapshot.watermark_table}: CREATE, INSERT, UPDATE), or set "
                f"mysql.snapshot.on_ddl, then snapshot it: cdcflow mysql signal snapshot {qualified}",
            )
            return
        captured = TableFilter(self.cfg.include, self.cfg.exclude)
        planned = snapshot.again(qualified, captured, f"ddl {ctx.gtid or ctx.id}")
        self._table_columns.pop(qualified, None)  # its shape is published again before the rows read again
        if not planned:
            db, _, table = qualified.partition(".")
            if table_columns(self.ep, db, table):  # (a table gone since is followed by its own op t)
                self._not_followed(
                    qualified,
                    ctx,
                    why,
                    "it has no primary key, so it cannot be read again in "
                    f"chunks: give it one, or name the columns that identify a row in "
                    f"mysql.key_columns, then snapshot it: cdcflow mysql signal snapshot {qualified}",
                )
            return
        self.not_followed_cleared(qualified)
        self.stats.ddl_rereads += 1
        log.info("%s (%s): rows changed without row events (%s): reading the table again", qualified, ctx.gtid, why)

    def _not_followed(self, qualified: str, ctx: TxnContext, why: str, remedy: str) -> None:
        """A DDL changed rows the capture cannot read again: said loudly (log, metric, the status page)."""
        self.stats.ddl_not_followed += 1
        self.stats.not_followed[qualified] = f"{why} at {ctx.gtid or ctx.file}: {remedy}"
        log.error("%s (%s at %s): rows changed without row events (%s) and its sinks now differ from it: %s",
                  qualified, ctx.gtid, ctx.file, why, remedy)  # fmt: skip

    def not_followed_cleared(self, qualified: str) -> None:  # (public: the snapshot signal clears it too)
        """The table is read again (a later DDL, or a snapshot signal): its sinks are caught up once that ends."""
        self.stats.not_followed.pop(qualified, None)

    def _snapshot_for_ddl(self) -> Snapshotter | None:
        """The snapshot, set up now if the config did not ask for one (mysql.snapshot.on_ddl); None when it
        cannot be (the watermark table cannot be created or written)."""
        if self.snapshot is not None:
            return self.snapshot
        if not self.cfg.snapshot.on_ddl:
            return None
        try:
            self._setup_snapshot(None, keep_progress=True, forced=True)
            assert self.snapshot is not None
            self.snapshot.prepare(self.cfg.snapshot.tables, TableFilter(self.cfg.include, self.cfg.exclude))
        except (CdcflowError, OSError) as exc:
            self.snapshot = None
            log.error("cannot set up the incremental snapshot to follow a DDL: %s", exc)
            return None
        if self._decoder is not None:
            self._decoder.forget_tables()  # the watermark table's events are read from now on
        return self.snapshot

    # -- events the decoder cannot read --------------------------------------------------------------------

    def _undecodable(self, raw: bytes, exc: BinlogDecodeError, decoder: BinlogDecoder,
                     position: TransactionState) -> None:  # fmt: skip
        """`on_undecodable: stop` (default) ends the capture with an error naming where; `dead_letter` sends
        the raw bytes and position to the dead-letter topic and goes on without them."""
        event_type = raw[4] if len(raw) > 4 else -1
        end_pos = int.from_bytes(raw[13:17], "little") if len(raw) >= 17 else None
        table = decoder.table_of(raw) if len(raw) > 4 else None
        gtid = position.ctx.gtid if position.ctx else None
        where = (f"binlog event type {event_type}{f' of table {table}' if table else ''} ending at "
                 f"{position.file}:{end_pos} (GTID {gtid or 'none open'})")  # fmt: skip
        opened = position.open
        can_skip = opened is not None and (event_type == TABLE_MAP or _is_rows(event_type))
        if self.cfg.on_undecodable == "stop" or not can_skip:
            policy = ("mysql.on_undecodable is 'stop'" if self.cfg.on_undecodable == "stop"
                      else "only rows and TABLE_MAP events can be dead-lettered")  # fmt: skip
            raise UndecodableEvent(f"cannot decode the {where}: {exc}. Stopped: {policy}; nothing after this "
                                   "event was published or checkpointed.")  # fmt: skip
        assert opened is not None
        ctx, txn = opened
        record = {
            "source": self.cfg.name, "error": str(exc), "file": position.file, "table": table,
            "gtid": ctx.gtid, "raw_event": base64.b64encode(raw).decode("ascii"), "end_pos": end_pos,
        }  # fmt: skip
        log.error("dead-lettering the undecodable %s: %s", where, exc)
        self._send(self.cfg.dead_letter_topic, self.cfg.name.encode(), orjson.dumps(record), txn)
        self.stats.dead_letters += 1


def _mysql_history_problems(checkpoint_state: str, server: ServerInfo) -> list[str]:
    """MySQL: the server must hold every transaction the checkpoint passed (else its history is another one),
    and still have the binlogs of every transaction the checkpoint did not pass (else they are lost)."""
    ours, executed = GtidSet.parse(checkpoint_state), GtidSet.parse(server.gtid_executed)
    purged = GtidSet.parse(server.gtid_purged)
    problems = []
    if not ours.issubset(executed):
        problems.append(f"the checkpoint passed {ours}, the server has executed only {executed}")
    if not purged.issubset(ours):
        problems.append(f"the server purged the binlogs of {purged}, some of which the capture never read "
                        f"(it passed {ours})")  # fmt: skip
    return problems


class BinlogHistoryChanged(TerminalError):
    """The server's binlog is not the history the checkpoint was taken from."""


class UndecodableEvent(TerminalError):
    """A binlog event the decoder cannot read, under `on_undecodable: stop`."""


def _is_rows(event_type: int) -> bool:
    return event_type in (23, 24, 25, 30, 31, 32, 39)


def _log_heartbeat_failure(err: object, _msg: object) -> None:
    if err is not None:
        log.warning("a heartbeat record was not acknowledged: %s", err)


def _ignore_ack(_err: object, _msg: object) -> None:
    """Checkpoint records: a lost one only means resuming from an earlier one (duplicates, no loss)."""


def summary(s: CaptureStats) -> str:
    return (
        f"{s.events} events, {s.snapshot_rows} snapshot rows, {s.transactions} groups, {s.ddl} DDL "
        f"({s.truncates} tables emptied, {s.ddl_rereads} read again, {s.ddl_not_followed} not followed), "
        f"{s.rolled_back_rows} rows rolled back "
        f"({s.rolled_back_groups} groups ended in ROLLBACK), "
        f"XA {s.xa_prepared} prepared/{s.xa_committed} committed/{s.xa_rolled_back} rolled back/{s.xa_waiting} "
        f"waiting, {s.oversize} oversize, {s.dead_letters} dead letters, {s.restarts} restarts"
    )


def run_forever(capture: MySqlCapture, stop: threading.Event) -> CaptureStats:
    """Run until `stop`; log progress every 10 s and a summary at the end."""

    def report() -> None:
        last = 0
        while not stop.wait(10.0):
            s = capture.stats
            rate = (s.events - last) / 10.0
            last = s.events
            lag = time.time() * 1000 - s.last_source_ts_ms if s.last_source_ts_ms else 0
            log.info("mysql: %s; %.0f events/s, source lag %.1f s, checkpoint %s", summary(s), rate, lag / 1000,
                     s.checkpoint.gtid_state if s.checkpoint else None)  # fmt: skip

    threading.Thread(target=report, name="mysql-progress", daemon=True).start()
    try:
        stats = capture.run(stop)
    except CdcflowError as exc:
        log.error("mysql capture stopped after %s: %s", summary(capture.stats), exc)
        raise
    log.info("mysql capture stopped: %s; checkpoint %s", summary(stats),
             stats.checkpoint.gtid_state if stats.checkpoint else None)  # fmt: skip
    return stats
