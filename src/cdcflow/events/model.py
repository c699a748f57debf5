"""One change event per row change, shaped like a Debezium envelope."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from cdcflow.events.cells import Cell

SCHEMA_VERSION = 1


class Op(enum.StrEnum):
    CREATE = "c"
    UPDATE = "u"  # for HBase: an upsert; HBase cannot tell a create from an update
    DELETE = "d"
    READ = "r"  # snapshot read
    TRUNCATE = "t"  # every row of the table is gone (MySQL TRUNCATE TABLE); key {}, no images


@dataclass(frozen=True)
class SourceInfo:
    connector: str  # "hbase" | "mysql"
    name: str  # the source's configured name
    db: str  # HBase namespace / MySQL database
    table: str
    ts_ms: int  # time of the change at the source (WAL write time / binlog event time)
    # Compared lexicographically as integers, strictly increasing per row in commit order.
    pos: tuple[int, ...]
    snapshot: bool = False
    # Connector-specific position details: HBase region + cluster_id; MySQL file, gtid, server_id.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChangeEvent:
    key: bytes  # Kafka key: the row identity (HBase row key bytes; MySQL primary key JSON)
    op: Op
    source: SourceInfo
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    cells: tuple[Cell, ...] | None = None  # HBase only: every cell of the mutation, exactly
    # MySQL only: {"id": GTID or file:pos, "order": 1-based index of this event in its transaction}
    transaction: dict[str, Any] | None = None
    # MySQL only, on both halves of a primary-key change: {"old_key": {...}, "new_key": {...}}
    pk_change: dict[str, Any] | None = None
    # Set on the stand-in for a change too large for its topic (events/oversize.py)
    oversize: dict[str, Any] | None = None
    # MySQL op t only: {"cause": truncate | drop | rename | refill | rekey | partition, "ddl": ...}
    truncate: dict[str, Any] | None = None
