"""Signals to a running MySQL capture through a table (Debezium's source signaling channel).

A row inserted into `mysql.snapshot.signal_table` reaches the capture through the binlog like any change, at its
place in the stream: no other connection to watch, and a signal read again after a crash (the checkpoint was
before it) is simply handled again. Layout and types as Debezium's (`id`, `type`, `data` JSON):

    INSERT INTO cdcflow.signals VALUES ('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["shop.orders"]}')

`execute-snapshot` snapshots the tables its `data-collections` name (cdcflow's "db.table" patterns, fnmatch;
plain names are what Debezium's regular expressions take too) from their start; `log` writes its
`data.message` to the capture's log. Anything else is logged and counted, never fatal: a signal is a
request, not data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from cdcflow.clients.mysql import MySqlEndpoint, connect, execute

EXECUTE_SNAPSHOT = "execute-snapshot"
LOG = "log"


@dataclass(frozen=True)
class SnapshotSignal:
    id: str
    tables: tuple[str, ...]  # "db.table" patterns


@dataclass(frozen=True)
class LogSignal:
    id: str
    message: str


class SignalRefused(ValueError):
    """A signal row the capture cannot act on; the message says why."""


def parse_signal(row: dict[str, Any]) -> SnapshotSignal | LogSignal:
    """A signal table row (as the capture decodes it) as a signal; SignalRefused says what is wrong with it."""
    signal_id, kind, data = row.get("id"), row.get("type"), row.get("data")
    if not isinstance(signal_id, str) or not signal_id:
        raise SignalRefused("a signal without an id")
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    try:
        doc = orjson.loads(data) if isinstance(data, str) and data.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise SignalRefused(f"signal {signal_id}: data is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SignalRefused(f"signal {signal_id}: data is not a JSON object")
    if kind == LOG:
        return LogSignal(signal_id, str(doc.get("message", "")))
    if kind != EXECUTE_SNAPSHOT:
        raise SignalRefused(f"signal {signal_id}: type {kind!r} is not one of {EXECUTE_SNAPSHOT}, {LOG}")
    tables = doc.get("data-collections")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, str) and "." in t for t in tables):
        raise SignalRefused(f'signal {signal_id}: data needs "data-collections", a list of "db.table" names')
    snapshot_type = str(doc.get("type", "incremental")).lower()
    if snapshot_type != "incremental":
        raise SignalRefused(f"signal {signal_id}: snapshot type {snapshot_type!r}; cdcflow's snapshots are incremental")
    if doc.get("additional-conditions"):
        raise SignalRefused(f"signal {signal_id}: additional-conditions are not supported (whole tables only)")
    return SnapshotSignal(signal_id, tuple(tables))


def create_signal_table(ep: MySqlEndpoint, table: str) -> None:
    db, name = table.split(".", 1)
    execute(ep, f"CREATE DATABASE IF NOT EXISTS `{db}`",
            f"CREATE TABLE IF NOT EXISTS `{db}`.`{name}` (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
            "data TEXT NULL)")  # fmt: skip


def send_snapshot_signal(ep: MySqlEndpoint, table: str, signal_id: str, tables: tuple[str, ...]) -> None:
    """Insert an execute-snapshot signal (what `cdcflow mysql signal snapshot` does)."""
    db, name = table.split(".", 1)
    data = orjson.dumps({"data-collections": list(tables), "type": "incremental"}).decode()
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO `{db}`.`{name}` (id, type, data) VALUES (%s, %s, %s)",
                        (signal_id, EXECUTE_SNAPSHOT, data))  # fmt: skip
    finally:
        conn.close()
