"""MySQL tables as the capture's schema-history topic describes them, for the sinks that build
typed tables from it (Phoenix, Delta). Parsing is pure; `latest_table_record` reads Kafka."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from cdcflow.clients.kafka.client import KafkaEndpoint, iter_to_end
from cdcflow.errors import ConfigError

_SQL_TYPE = re.compile(r"^(?P<base>[A-Z]+)(?:\((?P<args>[\d,]+)\))?(?P<unsigned> UNSIGNED)?$")
# MySQL zero and partial-zero dates ('0000-00-00', '2024-00-10', '2024-05-00 12:00:00'): no
# DATE/TIMESTAMP value of Phoenix, Spark or Delta exists for them; sinks write NULL (documented).
ZERO_DATE_PATTERN = r"^(0000-\d\d-\d\d|\d{4}-00-\d\d|\d{4}-\d\d-00)"


@dataclass(frozen=True)
class MySqlColumn:
    """One column of a MySQL table, as the schema history records it."""

    name: str
    sql_type: str  # "DECIMAL(10,2)", "INT UNSIGNED", "DATETIME(6)", ...
    nullable: bool
    key_order: int | None  # position in the primary key


def parse_sql_type(sql_type: str) -> tuple[str, list[int], bool]:
    """("DECIMAL", [10, 2], False) for "decimal(10,2)"; ConfigError for what is not a type."""
    m = _SQL_TYPE.match(sql_type.strip().upper())
    if not m:
        raise ConfigError(f"unknown MySQL column type {sql_type!r}")
    args = [int(a) for a in m.group("args").split(",")] if m.group("args") else []
    return m.group("base"), args, bool(m.group("unsigned"))


def mysql_columns(history_columns: Sequence[Mapping[str, Any]]) -> list[MySqlColumn]:
    """Columns of a schema-history `kind: table` record."""
    out = []
    for c in history_columns:
        sql_type = c.get("sql_type") or c.get("type")
        out.append(MySqlColumn(str(c["name"]), str(sql_type), bool(c.get("nullable", True)), c.get("key_order")))
    if all(c.get("key_order") is None for c in history_columns) and any(c.get("key") for c in history_columns):
        # records written before key_order existed: key columns in column order
        order = iter(range(len(out)))
        out = [
            MySqlColumn(c.name, c.sql_type, c.nullable, next(order) if h.get("key") else None)
            for c, h in zip(out, history_columns, strict=True)
        ]
    return out


def latest_table_record(kafka: KafkaEndpoint, topic: str, source: str, db: str, table: str) -> dict[str, Any] | None:
    """The newest `kind: table` record of `source`'s db.table in the schema-history topic."""
    latest = None
    for rec in iter_to_end(kafka, topic):
        try:
            doc = orjson.loads(rec.value or b"")
        except orjson.JSONDecodeError:
            continue
        if (isinstance(doc, dict) and doc.get("kind") == "table" and doc.get("db") == db
                and doc.get("table") == table and doc.get("source", source) == source):  # fmt: skip
            latest = doc
    return latest
