"""Transaction records: what a source transaction published, per table, so a reader can tell when it has all of it.

A MySQL capture with `output.transaction_topic` writes one record per committed transaction that published
change events, after its last change: its GTID, the position its changes carry (`pos`, their first element),
its commit time, and how many change events it published per table ("db.table"). Snapshot reads (op r) are not
part of a source transaction and are not counted; a truncate counts once per table (it is sent to every
partition of the table's topic, each copy the same change). The cdcflow format's record is this module's; the
debezium format writes Debezium's BEGIN/END records instead, whose END carries the same facts
(events/debezium/envelope.py). The Delta sink's consistent cut reads either (pipeline/sinks/delta/cut/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdcflow.events.json_codec import MalformedEvent

TRANSACTION_SCHEMA_ID = "cdcflow.transaction/1"


@dataclass(frozen=True)
class TransactionEnd:
    """One committed source transaction as its changes reached Kafka."""

    source: str  # the capture's name (mysql.name)
    id: str  # the GTID (MariaDB d-s-n, MySQL uuid:n)
    seq: int  # the first element of its changes' positions (source.pos[0])
    ts_ms: int  # commit time at the source
    counts: Mapping[str, int] = field(default_factory=dict)  # change events published per "db.table"

    @property
    def event_count(self) -> int:
        return sum(self.counts.values())


def transaction_record(end: TransactionEnd) -> tuple[bytes, bytes]:
    """(key, value) of the cdcflow format's record, keyed by the source's name."""
    value = {
        "schema": TRANSACTION_SCHEMA_ID, "source": end.source, "id": end.id, "pos": [end.seq], "ts_ms": end.ts_ms,
        "event_count": end.event_count,
        "data_collections": [{"data_collection": name, "event_count": n} for name, n in end.counts.items()],
    }  # fmt: skip
    return end.source.encode(), orjson.dumps(value)


def read_transaction_record(value: bytes) -> TransactionEnd:
    """The inverse of `transaction_record`; MalformedEvent for anything else."""
    try:
        doc = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise MalformedEvent(f"a transaction record that is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != TRANSACTION_SCHEMA_ID:
        raise MalformedEvent(f"not a transaction record (schema {TRANSACTION_SCHEMA_ID!r} expected)")
    pos = doc.get("pos")
    if not (isinstance(pos, list) and pos and isinstance(pos[0], int)):
        raise MalformedEvent("a transaction record without an integer pos")
    source, txn_id, ts_ms = doc.get("source"), doc.get("id"), doc.get("ts_ms")
    if not isinstance(source, str) or not isinstance(txn_id, str) or not isinstance(ts_ms, int):
        raise MalformedEvent("a transaction record without source, id or ts_ms")
    return TransactionEnd(source, txn_id, pos[0], ts_ms, collection_counts(doc.get("data_collections")))


def collection_counts(collections: Any) -> dict[str, int]:
    """[{data_collection, event_count}, ...] (both formats' END) as {"db.table": count}."""
    if not isinstance(collections, list):
        raise MalformedEvent("a transaction record without data_collections")
    counts: dict[str, int] = {}
    for entry in collections:
        name = entry.get("data_collection") if isinstance(entry, dict) else None
        count = entry.get("event_count") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not isinstance(count, int) or count < 0:
            raise MalformedEvent(f"a transaction record with a malformed data collection: {entry!r}")
        counts[name] = counts.get(name, 0) + count
    return counts
