"""What the sources say of a table's shape, as the Delta sink needs it: a MySQL table's columns (from the
capture's schema-history topic, cached until a change does not fit them) and an HBase table's family TTLs
(from the source cluster)."""

from __future__ import annotations

import logging
from typing import Any

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.hbase.admin import family_ttl
from cdcflow.clients.kafka.client import KafkaEndpoint
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.errors import CdcflowError, ConfigError, TerminalError
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn, latest_table_record, mysql_columns

log = logging.getLogger(__name__)


class NoTableRecord(TerminalError):
    """The schema history has no record of a MySQL table a typed Delta table is to be built for."""


class SourceShapes:
    def __init__(self, sink: str, options: DeltaStateOptions, context: Endpoints) -> None:
        self.sink = sink
        self.options = options
        self.context = context
        self._mysql: dict[tuple[str, str, str], list[MySqlColumn]] = {}

    def history_topic(self) -> str:
        topic = self.options.schema_history_topic or self.context.mysql_schema_history_topic
        if not topic:
            raise ConfigError(
                f"sink {self.sink}: typed Delta tables for MySQL sources are built from the capture's schema "
                "history: set the sink's schema_history_topic (or mysql.schema_history_topic), or mysql_layout: json"
            )
        return str(topic)

    def mysql_columns(self, source: str, db: str, table: str, refresh: bool) -> list[MySqlColumn]:
        """The table's columns as its newest schema-history record has them (read again with `refresh`)."""
        cached = self._mysql.get((source, db, table))
        if cached is not None and not refresh:
            return cached
        kafka = KafkaEndpoint.of(self.context.bootstrap_servers, self.context.kafka_properties)
        record = latest_table_record(kafka, self.history_topic(), source, db, table)
        if record is None:
            raise NoTableRecord(
                f"sink {self.sink}: the schema history ({self.history_topic()}) has no record of {source}/{db}.{table}"
                " to build its typed Delta table from"
            )
        columns = mysql_columns(record["columns"])
        self._mysql[(source, db, table)] = columns
        return columns

    def shape_doc(self, source: str, db: str, table: str) -> list[dict[str, Any]]:
        """The table's columns as the fold record keeps them; none for a table the schema history has no record of
        (its changes so far are truncates: a table dropped or renamed away before a row event described it)."""
        try:
            return [vars(c) for c in self.mysql_columns(source, db, table, refresh=False)]
        except NoTableRecord:
            return []

    def refresh(self, source: str, db: str, table: str) -> None:
        try:
            self.mysql_columns(source, db, table, refresh=True)
        except NoTableRecord:
            pass

    def family_ttls(self, db: str, table: str) -> dict[str, int] | None:
        """The source HBase table's families that have a TTL (seconds); None when the source cannot be read now."""
        zk = self.context.zk_quorum
        if not zk or zk == "unused":
            return None
        name = table if db == "default" else f"{db}:{table}"
        try:
            client = NativeHBaseClient(str(zk), op_timeout_s=10.0)
            try:
                ttls = {fam: family_ttl(attrs) for fam, attrs in client.family_attributes(name).items()}
            finally:
                client.close()
        except (CdcflowError, OSError, ValueError) as exc:
            log.info("sink %s: the TTLs of HBase table %s cannot be read now (%s)", self.sink, name, exc)
            return None
        return {fam: ttl for fam, ttl in ttls.items() if ttl is not None}
