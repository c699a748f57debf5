"""What the MySQL capture sends to Kafka, and how each record counts against its transaction.

Every record of a source transaction is sent with that transaction's delivery callback, so the
acknowledgement frontier (checkpoint.py) moves past the transaction only once Kafka has all of it.
The publisher turns a rows event into records (through the output format's encoder, output.py, or
the snapshot's signal and watermark tables), cuts a change too large for its topic into parts and a
marker, and writes the schema history (a table's columns when they change, every DDL) and the op t
events of emptied tables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from cdcflow.clients.kafka import KafkaEndpoint, create_topic, partition_count, topic_config
from cdcflow.clients.kafka.producer import SyncProducer
from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import MySqlSourceConfig
from cdcflow.errors import ServiceUnavailable, TerminalError
from cdcflow.events import oversize
from cdcflow.events.model import ChangeEvent
from cdcflow.events.topics import change_topic
from cdcflow.events.transactions import TransactionEnd
from cdcflow.sources.mysql.binlog.events import PARTIAL_UPDATE_ROWS, EventHeader, QueryEvent, RowsEvent, TableMapEvent
from cdcflow.sources.mysql.changes import TxnContext, key_columns, truncate_change
from cdcflow.sources.mysql.checkpoint import AckFrontier, PendingTxn
from cdcflow.sources.mysql.holding import HeldRows
from cdcflow.sources.mysql.output import RecordEncoder
from cdcflow.sources.mysql.selected_values import describe_table
from cdcflow.sources.mysql.snapshot_driver import SnapshotDriver
from cdcflow.sources.mysql.stats import CaptureStats
from cdcflow.sources.mysql.txn_buffer import HeldRecord

log = logging.getLogger(__name__)


class Publisher:
    def __init__(self, cfg: MySqlSourceConfig, ep: MySqlEndpoint, bootstrap: KafkaEndpoint, producer: SyncProducer,
                 stats: CaptureStats, snapshots: SnapshotDriver) -> None:  # fmt: skip
        self.cfg = cfg
        self.ep = ep
        self.bootstrap = bootstrap
        self.producer = producer
        self.stats = stats
        self.snapshots = snapshots
        self.encoder: RecordEncoder | None = None  # set once the server is known (run)
        self._topics: dict[str, int] = {}  # topic -> largest encoded event it takes
        self._table_columns: dict[str, list[dict[str, object]]] = {}  # last schema published per table
        self._since_poll = 0
        # Change events published for the transaction being published, per "db.table": its transaction record.
        self.published: dict[str, int] = {}

    def send(self, topic: str, key: bytes | None, value: bytes | None, txn: PendingTxn, partition: int = -1) -> None:
        txn.outstanding += 1
        self.producer.send(topic, key, value, txn.on_delivery, partition)

    def sender(self, txn: PendingTxn) -> Callable[[str, bytes, bytes], None]:
        return lambda topic, key, value: self.send(topic, key, value, txn)

    def change(self, record: HeldRecord, txn: PendingTxn) -> None:
        """A change event going out (now, or released from a held group)."""
        self.snapshots.observe(record)
        self.send(record.topic, record.key, record.value, txn)
        if record.table:
            self.stats.events += 1
            self.published[record.table] = self.published.get(record.table, 0) + 1
        self._since_poll += 1
        if self._since_poll >= 2000:  # delivery callbacks run inside poll: keep the frontier moving
            self.producer.poll(0)
            self._since_poll = 0

    def store_checkpoint(self, frontier: AckFrontier, holding: HeldRows) -> None:
        """The newest checkpoint whose transactions, and every earlier one, Kafka acknowledged (if it moved).
        Checkpoint records need no acknowledgement (a lost one only means resuming from an earlier one), but
        what a checkpoint releases (XA-topic records) is deleted only once it is stored."""
        self.producer.poll(0)
        if frontier.failure is not None:
            raise ServiceUnavailable(f"Kafka did not acknowledge a record: {frontier.failure}")
        holding.delete_garbage()
        newest = frontier.advance()
        if newest is None:
            return
        released, frontier.released = frontier.released, []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is None and released:
                holding.garbage.extend(released)

        self.producer.send(self.cfg.offsets_topic, self.cfg.name.encode(), newest.to_bytes(), on_delivery)
        self.stats.checkpoint = newest
        self.stats.checkpoints += 1

    def heartbeat(self, frontier: AckFrontier) -> None:
        """A heartbeat record (output.heartbeat_topic), busy or idle. Not data: a lost one is only late news,
        so it is not part of any transaction's acknowledgements; a failure is logged.

        Its source time promises that every change up to it is in Kafka (the pipeline's lag counts on it): the
        newest change read when nothing read waits for an acknowledgement, else the acknowledged checkpoint's."""
        topic = self.cfg.output.heartbeat_topic
        assert topic is not None and self.encoder is not None
        cp = self.stats.checkpoint
        if frontier.open_transactions == 0:
            source_ts_ms = self.stats.last_source_ts_ms or None
        else:
            source_ts_ms = (cp.ts_ms or None) if cp else None
        key, value = self.encoder.heartbeat(topic, int(time.time() * 1000), source_ts_ms, cp)
        self.producer.send(topic, key, value, _log_heartbeat_failure)
        self.stats.heartbeats += 1

    def transaction_end(self, txn_id: str, seq: int, ts_ms: int, txn: PendingTxn) -> None:
        """The transaction record (output.transaction_topic) of the changes published since the last one, if any:
        they carry position `seq` (an XA transaction's are its prepare's, published at its XA COMMIT)."""
        assert self.encoder is not None
        counts, self.published = self.published, {}
        if not counts:
            return
        end = self.encoder.transaction_end(TransactionEnd(self.cfg.name, txn_id, seq, ts_ms, counts))
        if end is not None:
            self.send(end.topic, end.key, end.value, txn)
            self.stats.transaction_records += 1

    def forget_published(self) -> None:
        """A group ended without a transaction record (rolled back, or nothing of it published)."""
        self.published = {}

    def topic_for(self, db: str, table: str) -> str:
        return change_topic(self.cfg.topic_prefix, db, table)

    def ensure_topic(self, topic: str) -> int:
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

    def split(self, change: ChangeEvent, value: bytes, topic: str, limit: int, table: str) -> HeldRecord:
        """A change too large for its topic: parts in the oversize topic, and the marker that stands for it."""
        where = f"{table} key {change.key.decode(errors='replace')[:200]} at {list(change.source.pos)}"
        if self.cfg.oversize == "stop":
            raise TerminalError(f"the change of {where} is {len(value)} bytes, over the {limit} bytes topic {topic} "
                                "takes, and mysql.oversize is 'stop'")  # fmt: skip
        parts_topic = self.cfg.oversize_topic
        cut = oversize.cut(change, value, parts_topic, self.ensure_topic(parts_topic))
        # The parts are acknowledged before the marker is made: it says where they are. Parts of a change
        # read again after a restart are sent again; the earlier ones stay unreferenced.
        located = self.producer.send_located(parts_topic, cut.info["id"].encode(), cut.parts)
        self.stats.oversize += 1
        log.warning("the change of %s is %d bytes, over the %d bytes topic %s takes: published as a marker there "
                    "and %d parts in %s partition %d", where, len(value), limit, topic, len(cut.parts),
                    parts_topic, located[0][0])  # fmt: skip
        return HeldRecord(topic, change.key, oversize.marker(change, cut, limit, located), table)

    # -- rows ------------------------------------------------------------------------------------------

    def rows(self, ev: RowsEvent, ctx: TxnContext, txn: PendingTxn) -> list[HeldRecord]:
        """The change records of one rows event (snapshot reads, for a watermark that releases a chunk)."""
        schema = ev.schema
        assert schema is not None and self.encoder is not None
        if self.snapshots.is_signal(schema.qualified):
            self.snapshots.signals(ev)
            return []
        if self.snapshots.is_watermark(schema.qualified):
            records = []
            for chunk_table, reads in self.snapshots.watermarks(ev, ctx):
                db, table = chunk_table.split(".", 1)
                self.describe_from_server(db, table, ctx, txn, ev.header)
                topic = self.topic_for(db, table)
                records += self.encoder.reads(db, table, reads, topic, self.ensure_topic(topic))
            return records
        if ev.header.type == PARTIAL_UPDATE_ROWS:
            self.stats.partial_json_rows += len(ev.rows)
        topic = self.topic_for(schema.db, schema.table)
        keys = key_columns(schema, self.cfg.key_columns)
        return self.encoder.rows(ev, ctx, keys, topic, self.ensure_topic(topic))

    # -- the schema history ------------------------------------------------------------------------------

    def forget_tables(self, qualified: str | None = None) -> None:
        """Describe `qualified` (None: every table) again when it next appears: its description may have been
        lost (a restart purges unacknowledged records) or must precede rows read again."""
        if qualified is None:
            self._table_columns.clear()
        else:
            self._table_columns.pop(qualified, None)

    def describe(self, ev: TableMapEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        """Record a table's columns in the schema history whenever they differ from the last ones seen.
        (Not held with the group's rows: a table's description stays true if its rows are rolled back.)"""
        assert ev.schema is not None
        columns = ev.schema.describe()
        if self._table_columns.get(ev.schema.qualified) != columns:
            self._table_columns[ev.schema.qualified] = columns
            fields = {"db": ev.schema.db, "table": ev.schema.table, "columns": columns}
            self._history("table", fields, ctx, txn, ev.header, ctx.event_index)

    def describe_from_server(self, db: str, table: str, ctx: TxnContext, txn: PendingTxn, header: EventHeader) -> None:
        """A table the snapshot reads before any row event of its own described it (or again after a DDL): its
        columns from information_schema into the schema history, so sinks that build typed tables know them."""
        if f"{db}.{table}" in self._table_columns:
            return
        columns = describe_table(self.ep, db, table)
        if columns:
            self._table_columns[f"{db}.{table}"] = columns
            fields = {"db": db, "table": table, "columns": columns}
            self._history("table", fields, ctx, txn, header, ctx.event_index, {"from": "information_schema"})

    def ddl(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        self._history("ddl", {"db": ev.db, "ddl": ev.query}, ctx, txn, ev.header, 0)
        self.stats.ddl += 1
        log.info("DDL at %s:%d (%s): %s", ctx.file, ev.header.start_pos, ctx.gtid, ev.query[:200])

    def _history(self, kind: str, fields: Mapping[str, object], ctx: TxnContext, txn: PendingTxn, header: EventHeader,
                 event_index: int, more: dict[str, object] | None = None) -> None:  # fmt: skip
        record = {"kind": kind, "source": self.cfg.name, **fields, "gtid": ctx.gtid, "file": ctx.file,
                  "pos": [ctx.seq, event_index, 0], "ts_ms": header.timestamp * 1000, **(more or {})}  # fmt: skip
        self.send(self.cfg.schema_history_topic, self.cfg.name.encode(), orjson.dumps(record), txn)

    def truncate(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn, db: str, table: str, cause: str) -> None:
        """An op t event in the table's topic, in every partition, so a reader of any one partition sees it
        before the changes that follow it there."""
        assert self.encoder is not None
        topic = self.topic_for(db, table)
        self.ensure_topic(topic)
        change = truncate_change(db, table, cause, ev.query, ctx, self.cfg.name, ev.header)
        key, value = self.encoder.truncate(change, topic)
        partitions = partition_count(self.bootstrap, topic)  # (a failure resumes from the last checkpoint)
        for partition in range(partitions):
            self.send(topic, key, value, txn, partition)
        qualified = f"{db}.{table}"  # one change, whatever the partitions (each copy has the same position)
        self.published[qualified] = self.published.get(qualified, 0) + 1
        self.stats.truncates += 1
        log.info("%s of %s.%s at %s:%d (%s): every row gone; an op t event in %d partition(s) of %s", cause, db,
                 table, ctx.file, ev.header.start_pos, ctx.gtid, partitions, topic)  # fmt: skip


def _log_heartbeat_failure(err: object, _msg: object) -> None:
    if err is not None:
        log.warning("a heartbeat record was not acknowledged: %s", err)
