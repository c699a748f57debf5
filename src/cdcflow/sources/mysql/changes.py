"""Decoded rows events -> change events in the cdcflow envelope. Pure: no I/O.

Key: the primary-key columns as compact JSON with sorted names (`{"id":7}`), so every change of a
row lands in one partition. Tables without a primary key use the columns named in the config
(`key_columns`), else every column of the row image (documented in docs/mysql.md: two rows that
are identical in every column are then one row downstream).

An UPDATE that changes the key becomes a delete of the old key and a create of the new one, both
carrying `pk_change: {old_key, new_key}`, because downstream each key is its own row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.sources.mysql.binlog.columns import TableSchema
from cdcflow.sources.mysql.binlog.events import Row, RowsEvent


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
