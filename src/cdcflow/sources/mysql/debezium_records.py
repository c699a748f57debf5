"""Rows events and snapshot reads as Debezium records (the `debezium` output format). Pure: no I/O.

The counterpart of changes.row_records for `mysql.output.format: debezium`: the same changes, with the
same keys chosen (changes.key_columns), written as Debezium's MySQL/MariaDB connector writes them. A
delete is followed by a tombstone (a record with the same key and no value) unless `tombstones` is off,
and an UPDATE that changes the key is a delete of the old key, its tombstone and a create of the new one,
as in Debezium. `transaction` is always filled: {id: the GTID, total_order, data_collection_order}.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from cdcflow.errors import TerminalError
from cdcflow.events.debezium.avro import AvroRecords, AvroTable, Register, avro_heartbeats, avro_transactions
from cdcflow.events.debezium.columns import Field
from cdcflow.events.debezium.envelope import (
    DebeziumTable,
    Row,
    begin_payload,
    end_payload,
    heartbeat,
    heartbeat_payload,
    source_block,
    transaction_begin,
    transaction_end,
)
from cdcflow.events.model import ChangeEvent
from cdcflow.events.transactions import TransactionEnd
from cdcflow.sources.mysql.binlog.columns import TableSchema
from cdcflow.sources.mysql.binlog.events import RowsEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.debezium_fields import field_from_information_schema, fields_from_binlog
from cdcflow.sources.mysql.txn_buffer import HeldRecord

# (Kafka key, value, identity); value None: a tombstone. identity: the row's key as changes.py writes it
# (`{"id":7}`, names sorted), which the snapshot compares with the keys of the rows it selected.
Record = tuple[bytes | None, bytes | None, bytes]


@dataclass(frozen=True)
class DebeziumOutput:
    server_name: str  # the source's name, Debezium's topic.prefix
    connector: str  # "mysql" | "mariadb"
    schemas: bool  # JsonConverter's schemas.enable
    tombstones: bool
    decimal_handling: str = "precise"  # Debezium's decimal.handling.mode
    serialization: str = "json"  # json | avro (Confluent's wire format, schemas in a registry)
    transaction_topic: str | None = None  # BEGIN/END records (Debezium's provide.transaction.metadata)
    identities: bool = True  # make each record's identity (only a running snapshot compares them)
    propagate_source_types: bool = True  # Debezium's datatype.propagate.source.type (debezium_fields)


class _Codec(Protocol):
    """Key and value bytes of one table: DebeziumTable (JSON) or AvroTable."""

    @property
    def key_names(self) -> tuple[str, ...]: ...

    def key_payload(self, image: Row) -> dict[str, Any]: ...
    def key(self, image: Row) -> bytes | None: ...
    def value(self, op: str, before: Row | None, after: Row | None, source: dict[str, Any],
              transaction: dict[str, Any] | None, now_us: int) -> bytes: ...  # fmt: skip


class DebeziumRecords:
    """Makes Debezium records; keeps one DebeziumTable per table schema seen."""

    def __init__(self, out: DebeziumOutput, register: Register | None = None) -> None:
        if out.serialization == "avro" and register is None:
            raise ValueError("Avro serialization needs a schema registry")
        self.out = out
        self._register = register
        self._avro: dict[tuple[str, int], tuple[DebeziumTable, AvroTable]] = {}
        self._transactions: AvroRecords | None = None
        self._heartbeats: AvroRecords | None = None
        self._by_schema: dict[int, tuple[TableSchema, DebeziumTable]] = {}
        self._by_name: dict[str, tuple[list[dict[str, object]], tuple[str, ...], DebeziumTable]] = {}

    def table(self, schema: TableSchema, key_cols: tuple[str, ...]) -> DebeziumTable:
        held = self._by_schema.get(id(schema))
        if held is not None and held[0] is schema:
            return held[1]
        described = schema.describe()
        named = self._by_name.get(schema.qualified)
        if named is not None and named[0] == described and named[1] == key_cols:
            table = named[2]
        else:
            table = self.table_of(
                schema.db,
                schema.table,
                fields_from_binlog(schema, self.out.decimal_handling, self.out.propagate_source_types),
                key_cols,
            )
            self._by_name[schema.qualified] = (described, key_cols, table)
        if len(self._by_schema) > 4096:
            self._by_schema.clear()
        self._by_schema[id(schema)] = (schema, table)
        return table

    def known(self, qualified: str) -> DebeziumTable | None:
        """The table as the newest TABLE_MAP described it, if one did."""
        named = self._by_name.get(qualified)
        return named[2] if named else None

    def table_of(self, db: str, table: str, fields: Sequence[Field], key_cols: tuple[str, ...]) -> DebeziumTable:
        return DebeziumTable(self.out.server_name, self.out.connector, db, table, tuple(fields), key_cols,
                             schemas=self.out.schemas, binary=self.out.serialization == "avro")  # fmt: skip

    def codec(self, topic: str, table: DebeziumTable) -> _Codec:
        """How records of `table` in `topic` are written: the table itself (JSON), or its Avro form, made (and
        its schemas registered) the first time a table shape is written to a topic."""
        if self._register is None:
            return table
        held = self._avro.get((topic, id(table)))
        if held is not None and held[0] is table:
            return held[1]
        avro = AvroTable(table, topic, self._register)
        if len(self._avro) > 4096:
            self._avro.clear()
        self._avro[(topic, id(table))] = (table, avro)
        return avro

    def transaction_record(self, txn_id: str, ts_ms: int, counts: Mapping[str, int] | None,
                           seq: int | None = None) -> Record:  # fmt: skip
        """A BEGIN (counts None) or END record of the transaction metadata topic (`seq`: its changes' position)."""
        payload = begin_payload(txn_id, ts_ms) if counts is None else end_payload(txn_id, ts_ms, counts, seq)
        if self._register is None:
            key, value = (transaction_begin(txn_id, ts_ms, self.out.schemas) if counts is None
                          else transaction_end(txn_id, ts_ms, counts, self.out.schemas, seq))  # fmt: skip
            return key, value, b""
        if self._transactions is None:
            assert self.out.transaction_topic is not None
            self._transactions = avro_transactions(self.out.transaction_topic, self._register)
        key, value = self._transactions.encode({"id": txn_id}, payload)
        return key, value, b""

    def heartbeat_record(self, topic: str, ts_ms: int, source_ts_ms: int | None) -> tuple[bytes, bytes]:
        """A heartbeat record: key {serverName}, value {ts_ms} as Debezium writes them, plus the time of the
        newest change read (cdcflow_source_ts_ms)."""
        if self._register is None:
            return heartbeat(self.out.server_name, ts_ms, source_ts_ms, self.out.schemas)
        if self._heartbeats is None:
            self._heartbeats = avro_heartbeats(topic, self._register)
        return self._heartbeats.encode({"serverName": self.out.server_name}, heartbeat_payload(ts_ms, source_ts_ms))

    def rows(self, ev: RowsEvent, txn: TxnContext, key_cols: tuple[str, ...], topic: str) -> list[Record]:
        """The records of one rows event, in order."""
        schema = ev.schema
        assert schema is not None, "filtered tables are not turned into changes"
        table = self.codec(topic, self.table(schema, key_cols))
        h = ev.header
        qualified = schema.qualified
        now_us = time.time_ns() // 1000
        out: list[Record] = []
        # a table without a key: records have no Kafka key, so no tombstones; the snapshot never reads it,
        # but every column stands for the row's identity as in changes.py
        tombstones = self.out.tombstones and bool(key_cols)
        identities = self.out.identities
        names = sorted(key_cols) if key_cols else sorted(c.name for c in schema.columns)
        if isinstance(table, AvroTable) and ev.rows:
            made = table.native_records(ev.rows, ev.kind, h.timestamp * 1000, h.server_id, txn.gtid, txn.file,
                                        h.start_pos, txn.seq, txn.event_index, txn.id, txn.order,
                                        txn.table_orders.get(qualified, 0), now_us, tombstones, identities)  # fmt: skip
            if made is not None:
                records, txn.order, txn.table_orders[qualified] = made
                if not identities:
                    return records
                dumps = orjson.dumps
                return [(key, value, dumps({n: image.get(n) for n in names})) for key, value, image in records]

        def record(op: str, before: Row | None, after: Row | None, index: int) -> None:
            txn.order += 1
            per_table = txn.table_orders[qualified] = txn.table_orders.get(qualified, 0) + 1
            source = source_block(self.out.connector, self.out.server_name, schema.db, schema.table,
                                  h.timestamp * 1000, "false", h.server_id, txn.gtid, txn.file, h.start_pos,
                                  index, (txn.seq, txn.event_index, index))  # fmt: skip
            transaction = {"id": txn.id, "total_order": txn.order, "data_collection_order": per_table}
            image = after if after is not None else before
            assert image is not None
            key = table.key(image)
            identity = orjson.dumps({n: image.get(n) for n in names}) if identities else b""
            out.append((key, table.value(op, before, after, source, transaction, now_us), identity))
            if op == "d" and tombstones:
                out.append((key, None, identity))

        for index, (before, after) in enumerate(ev.rows):
            if ev.kind == "insert":
                record("c", None, after, index)
            elif ev.kind == "delete":
                record("d", before, None, index)
            else:
                assert before is not None and after is not None
                if not key_cols or table.key_payload(before) == table.key_payload(after):
                    record("u", before, after, index)
                else:
                    record("d", before, None, index)
                    record("c", None, after, index)
        return out

    def truncate(self, described: DebeziumTable, topic: str, change: ChangeEvent) -> tuple[None, bytes]:
        """A TRUNCATE TABLE (`change`, op t) as Debezium writes it: no key, no images, the source block."""
        s = change.source
        source = source_block(self.out.connector, self.out.server_name, s.db, s.table, s.ts_ms, "false",
                              int(s.extra.get("server_id") or 0), s.extra.get("gtid"), str(s.extra.get("file", "")),
                              int(s.extra.get("position") or 0), 0, s.pos)  # fmt: skip
        table = self.codec(topic, described)
        return None, table.value("t", None, None, source, None, time.time_ns() // 1000)

    def reads(self, described: DebeziumTable, changes: Sequence[ChangeEvent], topic: str) -> list[Record]:
        """Snapshot reads (op r) released by a watermark."""
        table = self.codec(topic, described)
        now_us = time.time_ns() // 1000
        out: list[Record] = []
        for change in changes:
            s = change.source
            after = change.after or {}
            source = source_block(self.out.connector, self.out.server_name, s.db, s.table, s.ts_ms, "incremental",
                                  int(s.extra.get("server_id") or 0), s.extra.get("gtid"), str(s.extra.get("file", "")),
                                  int(s.extra.get("position") or 0), int(s.extra.get("row") or 0), s.pos)  # fmt: skip
            out.append((table.key(after), table.value("r", None, after, source, None, now_us), change.key))
        return out


# An SQL query on the source server (statement, arguments) -> rows: how a table the binlog has not described
# yet is read from information_schema.
SqlQuery = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


class DebeziumEncoder:
    """`mysql.output.format: debezium`: the records Debezium's connector writes (DebeziumRecords), plus the
    transaction topic's BEGIN and END records. A RecordEncoder (output.py). A record larger than its topic
    takes cannot be split in this format (Debezium consumers would not reassemble it): it stops the capture,
    naming it (docs/debezium.md)."""

    def __init__(self, records: DebeziumRecords, key_columns: Mapping[str, tuple[str, ...]], query: SqlQuery) -> None:
        self.records = records
        self.key_columns = key_columns
        self.query = query

    def rows(self, ev: RowsEvent, ctx: TxnContext, keys: tuple[str, ...], topic: str, limit: int) -> list[HeldRecord]:
        schema = ev.schema
        assert schema is not None
        table = schema.qualified
        out: list[HeldRecord] = []
        transactions = self.records.out.transaction_topic
        if transactions and ctx.order == 0:  # the transaction's first change: its BEGIN record first
            key, begin, _ = self.records.transaction_record(ctx.id, ev.header.timestamp * 1000, None)
            out.append(HeldRecord(transactions, key, begin))
        # A table without a primary key (nor message.key.columns) has records without a key, as in Debezium.
        keyed = bool(schema.primary_key) or table in self.key_columns
        for key, value, identity in self.records.rows(ev, ctx, keys if keyed else (), topic):
            if value is not None and len(value) > limit:
                raise TerminalError(
                    f"a change of {table} at {ctx.file}:{ev.header.start_pos} ({ctx.gtid}) is {len(value)} bytes, "
                    f"over the {limit} bytes topic {topic} takes; the debezium format cannot split it: raise the "
                    "topic's max.message.bytes and mysql.max_record_bytes, or use output.format: cdcflow"
                )  # fmt: skip
            out.append(HeldRecord(topic, key, value, table if value is not None else "", identity))
        return out

    def reads(self, db: str, table: str, changes: Sequence[ChangeEvent], topic: str, limit: int) -> list[HeldRecord]:
        described = self._described(db, table)
        return [HeldRecord(topic, key, value, "") for key, value, _identity in self.records.reads(described, changes,
                                                                                                  topic)]  # fmt: skip

    def truncate(self, change: ChangeEvent, topic: str) -> tuple[bytes | None, bytes]:
        return self.records.truncate(self._described(change.source.db, change.source.table), topic, change)

    def heartbeat(self, topic: str, now_ms: int, source_ts_ms: int | None,
                  checkpoint: Checkpoint | None) -> tuple[bytes | None, bytes]:  # fmt: skip
        return self.records.heartbeat_record(topic, now_ms, source_ts_ms)

    def transaction_end(self, end: TransactionEnd) -> HeldRecord | None:
        """The END record of a transaction that published changes (output.transaction_topic). Its counts are the
        changes published: rows a ROLLBACK TO SAVEPOINT undid are not in them, a truncate is (once per table)."""
        transactions = self.records.out.transaction_topic
        if not transactions:
            return None
        key, value, _ = self.records.transaction_record(end.id, end.ts_ms, end.counts, end.seq)
        return HeldRecord(transactions, key, value)

    def _described(self, db: str, table: str) -> DebeziumTable:
        """The table as the newest TABLE_MAP described it, else (snapshotted or emptied before any row event
        of its own) its columns from information_schema."""
        known = self.records.known(f"{db}.{table}")
        if known is not None:
            return known
        rows = self.query("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES', COLUMN_KEY = 'PRI' "
                          "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                          "ORDER BY ORDINAL_POSITION", (db, table))  # fmt: skip
        out = self.records.out
        fields = [field_from_information_schema(str(n), str(d), str(c), bool(null), out.decimal_handling,
                                                out.propagate_source_types) for n, d, c, null, _pk in rows]  # fmt: skip
        key_cols = self.query("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
                              "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
                              (db, table))  # fmt: skip
        return self.records.table_of(db, table, fields, tuple(str(k) for (k,) in key_cols))
