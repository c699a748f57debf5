"""Decoded rows events -> change events in the cdcflow envelope. Pure: no I/O.

Key: the primary-key columns as compact JSON with sorted names (`{"id":7}`), so every change of a
row lands in one partition. Tables without a primary key use the columns named in the config
(`key_columns`), else every column of the row image (documented in docs/mysql.md: two rows that
are identical in every column are then one row downstream).

An UPDATE that changes the key becomes a delete of the old key and a create of the new one, both
carrying `pk_change: {old_key, new_key}`, because downstream each key is its own row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from cdcflow.events.heartbeats import heartbeat_record
from cdcflow.events.json_codec import SCHEMA_ID, encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.events.transactions import TransactionEnd, transaction_record
from cdcflow.sources.mysql.binlog.columns import TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, Row, RowsEvent
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.txn_buffer import HeldRecord


@dataclass
class TxnContext:
    """The event group a rows event belongs to, as the capture loop tracks it.

    Positions (`source.pos`) are [GTID sequence number, rows event within the group, row within the
    event]: the same on every server that holds the transaction (a replica after a failover numbers
    its binlog files differently, but not its GTIDs), and increasing in commit order within a GTID
    domain, which gtid_strict_mode keeps monotonic. docs/mysql.md "Positions" says what compares."""

    id: str  # MariaDB GTID "domain-server-seq"
    gtid: str | None
    file: str
    seq: int  # the GTID's sequence number
    event_index: int = 0  # rows events of the group so far (the capture counts them)
    order: int = 0  # events emitted so far in this transaction
    table_orders: dict[str, int] = field(default_factory=dict)  # the same per "db.table" (Debezium's format)


def key_columns(schema: TableSchema, configured: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    if schema.primary_key:
        return tuple(schema.columns[i].name for i in schema.primary_key)
    chosen = configured.get(schema.qualified)
    if chosen:
        return chosen
    return tuple(c.name for c in schema.columns)


def _key(row: Row, columns: tuple[str, ...]) -> dict[str, object]:
    return {name: row.get(name) for name in sorted(columns)}


def row_changes(ev: RowsEvent, txn: TxnContext, source_name: str, key_cols: tuple[str, ...]) -> list[ChangeEvent]:
    """One change event per row of `ev` (two for a key-changing update)."""
    schema = ev.schema
    assert schema is not None, "filtered tables are not turned into changes"
    out: list[ChangeEvent] = []
    h = ev.header
    for index, (before, after) in enumerate(ev.rows):
        source = SourceInfo(
            connector="mysql", name=source_name, db=schema.db, table=schema.table, ts_ms=h.timestamp * 1000,
            pos=(txn.seq, txn.event_index, index),
            extra={"gtid": txn.gtid, "server_id": h.server_id, "file": txn.file, "position": h.start_pos, "row": index},
        )  # fmt: skip
        if ev.kind == "insert":
            assert after is not None
            out.append(_event(Op.CREATE, _key(after, key_cols), source, None, after, txn))
        elif ev.kind == "delete":
            assert before is not None
            out.append(_event(Op.DELETE, _key(before, key_cols), source, before, None, txn))
        else:
            assert before is not None and after is not None
            old_key, new_key = _key(before, key_cols), _key(after, key_cols)
            if old_key == new_key:
                out.append(_event(Op.UPDATE, new_key, source, before, after, txn))
            else:
                link: dict[str, object] = {"old_key": old_key, "new_key": new_key}
                out.append(_event(Op.DELETE, old_key, source, before, None, txn, link))
                out.append(_event(Op.CREATE, new_key, source, None, after, txn, link))
    return out


def _event(
    op: Op, key: dict[str, object], source: SourceInfo, before: Row | None, after: Row | None, txn: TxnContext,
    pk_change: dict[str, object] | None = None,
) -> ChangeEvent:  # fmt: skip
    txn.order += 1
    return ChangeEvent(
        key=orjson.dumps(key), op=op, source=source, before=before, after=after,
        transaction={"id": txn.id, "order": txn.order}, pk_change=pk_change,
    )  # fmt: skip


def row_records(ev: RowsEvent, txn: TxnContext, source_name: str, key_cols: tuple[str, ...],
                max_bytes: int) -> list[tuple[bytes, bytes]] | None:  # fmt: skip
    """`encode(e)` and `e.key` for each `e` of `row_changes(...)`, without making the events: the capture's
    hot path (tests/unit/test_mysql_row_records.py holds the two equal). None, with `txn` untouched, when
    a record is larger than `max_bytes`: the caller then makes the events (to split that one)."""
    schema = ev.schema
    assert schema is not None, "filtered tables are not turned into changes"
    h = ev.header
    names = sorted(key_cols)
    ts_ms, now_ms, seq, event_index = h.timestamp * 1000, int(time.time() * 1000), txn.seq, txn.event_index
    db, table, gtid, server_id, file, position = schema.db, schema.table, txn.gtid, h.server_id, txn.file, h.start_pos
    txn_id, order = txn.id, txn.order
    kind = ev.kind
    dumps = orjson.dumps
    out: list[tuple[bytes, bytes]] = []

    def record(op: str, key: dict[str, object], before: Row | None, after: Row | None, index: int,
               link: dict[str, object] | None) -> None:  # fmt: skip
        nonlocal order
        order += 1
        doc = {
            "schema": SCHEMA_ID, "op": op, "key": key, "before": before, "after": after,
            "source": {"connector": "mysql", "name": source_name, "db": db, "table": table, "ts_ms": ts_ms,
                       "snapshot": False, "pos": [seq, event_index, index], "gtid": gtid, "server_id": server_id,
                       "file": file, "position": position, "row": index},
            "ts_ms": now_ms, "transaction": {"id": txn_id, "order": order},
        }  # fmt: skip
        if link is not None:
            doc["pk_change"] = link
        out.append((dumps(key), dumps(doc)))

    for index, (before, after) in enumerate(ev.rows):
        if kind == "insert":
            assert after is not None
            record("c", {n: after.get(n) for n in names}, None, after, index, None)
        elif kind == "delete":
            assert before is not None
            record("d", {n: before.get(n) for n in names}, before, None, index, None)
        else:
            assert before is not None and after is not None
            old_key, new_key = {n: before.get(n) for n in names}, {n: after.get(n) for n in names}
            if old_key == new_key:
                record("u", new_key, before, after, index, None)
            else:
                link: dict[str, object] = {"old_key": old_key, "new_key": new_key}
                record("d", old_key, before, None, index, link)
                record("c", new_key, None, after, index, link)
    if any(len(value) > max_bytes for _key, value in out):
        return None
    txn.order = order
    return out


def truncate_change(db: str, table: str, cause: str, ddl: str, txn: TxnContext, source_name: str,
                    header: EventHeader) -> ChangeEvent:  # fmt: skip
    """The op t event of a DDL that emptied a table (`cause`: truncate, drop, rename, refill, rekey, partition):
    its position [seq, 0, 0] is past every change of earlier groups and before every change of later ones (a DDL
    is a group of its own)."""
    source = SourceInfo(
        connector="mysql", name=source_name, db=db, table=table, ts_ms=header.timestamp * 1000,
        pos=(txn.seq, 0, 0),
        extra={"gtid": txn.gtid, "server_id": header.server_id, "file": txn.file, "position": header.start_pos,
               "row": 0},
    )  # fmt: skip
    return ChangeEvent(key=b"{}", op=Op.TRUNCATE, source=source, transaction={"id": txn.id, "order": 1},
                       truncate={"cause": cause, "ddl": ddl[:2000]})  # fmt: skip


# (change, its encoded bytes, topic, the topic's limit, "db.table" or ""): the record that stands for a change
# too large for its topic (the capture's publisher cuts it into parts and a marker, or stops).
SplitOversize = Callable[[ChangeEvent, bytes, str, int, str], HeldRecord]


class CdcflowEncoder:
    """`mysql.output.format: cdcflow`: the records of the cdcflow envelope (events/json_codec.py), one per
    change; a change larger than its topic takes goes to `split`; transaction records (events/transactions.py)
    to `transaction_topic`, if set. A RecordEncoder (output.py)."""

    def __init__(self, source_name: str, split: SplitOversize, transaction_topic: str | None = None) -> None:
        self.source_name = source_name
        self.split = split
        self.transaction_topic = transaction_topic

    def rows(self, ev: RowsEvent, ctx: TxnContext, keys: tuple[str, ...], topic: str, limit: int) -> list[HeldRecord]:
        assert ev.schema is not None
        table = ev.schema.qualified
        encoded = row_records(ev, ctx, self.source_name, keys, limit)
        if encoded is not None:
            return [HeldRecord(topic, key, value, table) for key, value in encoded]
        return [self._record(change, topic, limit, table) for change in row_changes(ev, ctx, self.source_name, keys)]

    def reads(self, db: str, table: str, changes: Sequence[ChangeEvent], topic: str, limit: int) -> list[HeldRecord]:
        return [self._record(change, topic, limit, "") for change in changes]

    def _record(self, change: ChangeEvent, topic: str, limit: int, table: str) -> HeldRecord:
        value = encode(change)
        if len(value) <= limit:
            return HeldRecord(topic, change.key, value, table)
        return self.split(change, value, topic, limit, table)

    def truncate(self, change: ChangeEvent, topic: str) -> tuple[bytes | None, bytes]:
        return None, encode(change)

    def heartbeat(self, topic: str, now_ms: int, source_ts_ms: int | None,
                  checkpoint: Checkpoint | None) -> tuple[bytes | None, bytes]:  # fmt: skip
        cp = checkpoint
        position = {"gtid_state": cp.gtid_state, "file": cp.file, "pos": cp.pos} if cp else {}
        return heartbeat_record("mysql", self.source_name, position, source_ts_ms, now_ms)

    def transaction_end(self, end: TransactionEnd) -> HeldRecord | None:
        if not self.transaction_topic:
            return None
        key, value = transaction_record(end)
        return HeldRecord(self.transaction_topic, key, value)
