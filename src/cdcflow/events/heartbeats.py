"""Heartbeat records of the cdcflow format: a source says where it is and how recent its newest change is,
also while nothing changes (`output.heartbeat_topic`). Keyed by the source's name, so a compacted topic keeps
the latest one per source. The debezium format writes Debezium's own heartbeat instead
(events/debezium/envelope.py)."""

from __future__ import annotations

from typing import Any

import orjson

HEARTBEAT_SCHEMA_ID = "cdcflow.heartbeat/1"


def heartbeat_record(connector: str, name: str, position: dict[str, Any], source_ts_ms: int | None,
                     now_ms: int) -> tuple[bytes, bytes]:  # fmt: skip
    """(key, value): `position` is the source's acknowledged position (MySQL: gtid_state, file, pos);
    `source_ts_ms` the time of the newest change it read (null before the first)."""
    source = {"connector": connector, "name": name, "ts_ms": source_ts_ms, **position}
    value = {"schema": HEARTBEAT_SCHEMA_ID, "source": source, "ts_ms": now_ms}
    return name.encode(), orjson.dumps(value)
