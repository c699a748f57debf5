"""How the MySQL capture writes its records: one encoder per output format, behind `RecordEncoder`.

`mysql.output.format: cdcflow` is CdcflowEncoder (changes.py), `debezium` is DebeziumEncoder
(debezium_records.py, JSON or Avro). The capture's publisher asks the encoder for records and never
asks which format it has. tests/unit/test_mysql_encoders.py holds every encoder to the same changes
(`changes.row_changes`) on generated rows events.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from cdcflow.clients.registry import SchemaRegistry
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.errors import ConfigError
from cdcflow.events.model import ChangeEvent
from cdcflow.events.transactions import TransactionEnd
from cdcflow.sources.mysql.binlog.events import RowsEvent
from cdcflow.sources.mysql.changes import CdcflowEncoder, SplitOversize, TxnContext
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.debezium_records import DebeziumEncoder, DebeziumOutput, DebeziumRecords, SqlQuery
from cdcflow.sources.mysql.txn_buffer import HeldRecord

log = logging.getLogger(__name__)


class RecordEncoder(Protocol):
    """The records of one output format. Each call numbers the changes it writes in `ctx` (order)."""

    def rows(self, ev: RowsEvent, ctx: TxnContext, keys: tuple[str, ...], topic: str, limit: int) -> list[HeldRecord]:
        """The records of one rows event for `topic`, whose records take at most `limit` bytes; `keys`: the
        columns that identify a row (changes.key_columns)."""
        ...

    def reads(self, db: str, table: str, changes: Sequence[ChangeEvent], topic: str, limit: int) -> list[HeldRecord]:
        """Snapshot reads (op r) a watermark released."""
        ...

    def truncate(self, change: ChangeEvent, topic: str) -> tuple[bytes | None, bytes]:
        """(key, value) of a table emptied by a DDL (op t)."""
        ...

    def heartbeat(self, topic: str, now_ms: int, source_ts_ms: int | None,
                  checkpoint: Checkpoint | None) -> tuple[bytes | None, bytes]:  # fmt: skip
        """(key, value) of a heartbeat record."""
        ...

    def transaction_end(self, end: TransactionEnd) -> HeldRecord | None:
        """The record saying what a committed transaction published (output.transaction_topic), None without one."""
        ...


def make_encoder(cfg: MySqlSourceConfig, kafka: KafkaConfig, mariadb: bool, split: SplitOversize,
                 query: SqlQuery) -> RecordEncoder:  # fmt: skip
    """The encoder `cfg.output` asks for. `split`: what becomes of a change too large for its topic (cdcflow
    format); `query`: SQL on the source (the debezium format describes tables no TABLE_MAP has yet)."""
    out = cfg.output
    if out.format != "debezium":
        return CdcflowEncoder(cfg.name, split, out.transaction_topic)
    connector = "mariadb" if mariadb else "mysql"
    register = None
    if out.serialization == "avro":
        if not kafka.schema_registry_url:
            raise ConfigError("mysql.output.serialization is avro: set kafka.schema_registry_url "
                              "(or run the local stack's registry: cdcflow stack up registry)")  # fmt: skip
        register = SchemaRegistry(kafka.schema_registry_url).register
    # Identities (each record's key as the snapshot compares it) only where a snapshot may run.
    may_snapshot = bool(cfg.snapshot.tables or cfg.snapshot.signal_table or cfg.snapshot.on_ddl)
    records = DebeziumRecords(
        DebeziumOutput(cfg.name, connector, out.schemas, out.tombstones, out.decimal_handling, out.serialization,
                       out.transaction_topic, identities=may_snapshot,
                       propagate_source_types=out.propagate_source_types),
        register,
    )  # fmt: skip
    log.info("output format: debezium, %s (%s connector's events%s%s)", out.serialization, connector,
             ", with Connect schemas" if out.schemas else "", ", tombstones after deletes"
             if out.tombstones else "")  # fmt: skip
    return DebeziumEncoder(records, cfg.key_columns, query)
