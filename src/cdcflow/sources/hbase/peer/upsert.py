"""`hbase.output.format: upsert` (decision 0018): each row a call changes, read back from the source cluster
after the call's edits, published whole (or as a tombstone when it is gone), keyed by the row.

Why reading back is right: a region keeps its rows' edits in order and a serial peer receives them in that
order; each record holds the row as of its edit or later, so the last record of a row is the row as the
source holds it. An edit is in the WAL an instant before readers see it (the WAL sync comes before the
region's MVCC publishes it), so a read is checked against the call's last edit of each row (`reflects`) and
made again until it shows it. A read that still does not after `read_attempts` is published all the same,
counted and logged: that happens when a later edit changed the row again, and that edit's own call reads it
again. A put hidden by a delete marker with a later timestamp never shows in a plain read: a raw read of the
row tells whether such an edit is in, and the row read after it is published. A read that fails (a region
offline or moving, its server down) fails the call: HBase sends it again, nothing of it is acknowledged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.kafka.producer import AsyncProducer, OutRecord
from cdcflow.errors import CdcflowError, RetryableError
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.debezium.avro import Register
from cdcflow.events.upsert.rows import UpsertAvro, UpsertColumns, UpsertJson
from cdcflow.sources.hbase.changes import row_changes
from cdcflow.sources.hbase.peer import metrics
from cdcflow.sources.hbase.peer.handler import (
    CallStats,
    DecodedCall,
    OversizePolicy,
    OversizeRefused,
    ReplicationHandler,
    TopicLimits,
)
from cdcflow.sources.hbase.routing import Route, Router

log = logging.getLogger(__name__)


class ReadBackFailed(RetryableError):
    """The source cluster did not answer a read-back within hbase.output.read_timeout_s: the call fails."""


class RowReader(Protocol):
    """Reads rows of the source cluster (the HBase client)."""

    def get_rows(self, table: str, rows: Sequence[bytes]) -> dict[bytes, list[Cell]]: ...

    def raw_row(self, table: str, row: bytes) -> list[Cell]: ...


class ClientRowReader:
    """RowReader over cdcflow's HBase client: a multi-get, and a raw scan of one row for the rare check."""

    def __init__(self, client: HBaseClient) -> None:
        self.client = client

    def get_rows(self, table: str, rows: Sequence[bytes]) -> dict[bytes, list[Cell]]:
        return self.client.get_rows(table, rows)

    def raw_row(self, table: str, row: bytes) -> list[Cell]:
        found = self.client.scan_rows(table, start_row=row, stop_row=row + b"\x00", raw=True, max_versions=2**31 - 1)
        return next(iter(found), [])


def reflects(edit: Sequence[Cell], read: Sequence[Cell]) -> bool:
    """Whether `read` (the newest version of each column of a row) shows the row after `edit` (the cells of
    the row's last edit in a call): every put's column at that timestamp or newer, no version a delete
    removed. A later edit can make this false for good; the caller bounds its retries."""
    newest: dict[tuple[bytes, bytes], int] = {(c.family, c.qualifier): c.timestamp for c in read}
    for c in edit:
        if c.type is CellType.PUT:
            ts = newest.get((c.family, c.qualifier))
            if ts is None or ts < c.timestamp:
                return False
        elif c.type is CellType.DELETE_COLUMN:
            ts = newest.get((c.family, c.qualifier))
            if ts is not None and ts <= c.timestamp:
                return False
        elif c.type is CellType.DELETE:
            if newest.get((c.family, c.qualifier)) == c.timestamp:
                return False
        elif c.type in (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION):
            exact = c.type is CellType.DELETE_FAMILY_VERSION  # one timestamp, or every one up to it
            if any(f == c.family and (ts == c.timestamp if exact else ts <= c.timestamp)
                   for (f, _), ts in newest.items()):  # fmt: skip
                return False
    return True


def applied(edit: Sequence[Cell], raw: Sequence[Cell]) -> bool:
    """Whether every cell of `edit` is in `raw` (a raw read of the row: every version and delete marker it sees).
    A raw read shows an edit once it is visible even when a delete marker with a later timestamp hides its put,
    which a plain read never shows."""
    present = {(c.family, c.qualifier, c.timestamp, c.type) for c in raw}
    return all((c.family, c.qualifier, c.timestamp, c.type) in present for c in edit)


@dataclass
class _Table:
    route: Route
    last_edit: dict[bytes, tuple[Cell, ...]] = field(default_factory=dict)  # row → its last edit's kept cells


class UpsertHandler(ReplicationHandler):
    """The peer's call handler for the upsert form: decode, read the changed rows back, encode whole rows."""

    def __init__(
        self,
        producer: AsyncProducer,
        router: Router,
        source_name: str,
        skip_edits_before_ms: int | None = None,
        *,
        topics: TopicLimits,
        reader: RowReader,
        register: Register | None = None,
        read_attempts: int = 20,
        oversize: OversizePolicy | None = None,
    ) -> None:
        super().__init__(producer, router, source_name, skip_edits_before_ms, topics=topics,
                         oversize=oversize or OversizePolicy(), native=False)  # fmt: skip
        self.reader = reader
        self.register = register  # None: JSON values
        self.read_attempts = read_attempts
        self._codecs: dict[tuple[str, Route], UpsertJson | UpsertAvro] = {}
        self.rows_read = 0
        self.reads_again = 0
        self.unconfirmed = 0
        self.raw_checks = 0  # rows a raw read showed an edit a plain read hides

    def _codec(self, route: Route) -> UpsertJson | UpsertAvro:
        """A route's codec, made (its Avro schema registered) the first time one of its rows is written."""
        codec = self._codecs.get((route.topic, route))
        if codec is None:
            cols = UpsertColumns.of(dict(route.fields), route.hints)
            codec = UpsertJson(cols) if self.register is None else UpsertAvro(cols, route.topic, self.register)
            self._codecs[(route.topic, route)] = codec
        return codec

    def to_records(self, param: bytes, cell_block: bytes, stats: CallStats) -> DecodedCall:
        """Decode the call, read back each row it changed (blocking: the server runs this in a thread)."""
        self.python_calls += 1
        tables: dict[str, _Table] = {}
        for entry, route in self.routed_entries(param, cell_block, stats):
            held = tables.setdefault(entry.table, _Table(route))
            for event in row_changes(entry, self.source_name):
                cells: tuple[Cell, ...] = event.cells or ()
                kept = cells if route.keeps_everything else tuple(c for c in cells if route.keep(c))
                if kept:
                    held.last_edit[event.key] = kept
                    stats.cells += len(kept)
        out = DecodedCall([])
        for table, held in tables.items():
            rows = self._read(table, held.last_edit)
            codec = self._codec(held.route)
            for row in held.last_edit:
                read = [c for c in rows.get(row, ()) if held.route.keeps_everything or held.route.keep(c)]
                value = codec.value(row, read) if read else None
                stats.rows += 1
                stats.bytes += len(value or b"")
                if value is not None and len(value) > self.topics.limit(held.route.topic):
                    raise OversizeRefused(
                        f"row {row[:100]!r} of {table} is {len(value)} bytes, over the "
                        f"{self.topics.limit(held.route.topic)} bytes topic {held.route.topic} takes: the upsert "
                        "form cannot split a row; raise hbase.max_record_bytes (and the topic's max.message.bytes)"
                    )
                out.records.append(OutRecord(held.route.topic, row, value))
        return out

    def _get(self, table: str, rows: list[bytes], found: dict[bytes, list[Cell]]) -> None:
        try:
            got = self.reader.get_rows(table, rows)
        except CdcflowError as exc:
            raise ReadBackFailed(
                f"reading rows back from the source cluster failed ({len(rows)} row(s) of {table}; HBase sends "
                f"the call again): {exc}"
            ) from exc
        self.rows_read += len(rows)
        metrics.ROWS_READ_BACK.inc(len(rows))
        for row in rows:
            found[row] = got.get(row, [])

    def _raw(self, table: str, row: bytes) -> list[Cell]:
        try:
            return self.reader.raw_row(table, row)
        except CdcflowError as exc:
            raise ReadBackFailed(
                f"reading rows back from the source cluster failed (a raw read of {row[:100]!r} of {table}; HBase "
                f"sends the call again): {exc}"
            ) from exc

    def _read(self, table: str, last_edit: Mapping[bytes, tuple[Cell, ...]]) -> dict[bytes, list[Cell]]:
        """The rows as the source shows them once it shows each row's last edit (or after `read_attempts`)."""
        pending = list(last_edit)
        found: dict[bytes, list[Cell]] = {}
        delay = 0.01
        for attempt in range(self.read_attempts):
            self._get(table, pending, found)
            pending = [row for row in pending if not reflects(last_edit[row], found[row])]
            if not pending:
                return found
            # A put that a later-stamped delete marker hides never shows in a plain read: a raw read shows
            # whether the edit is in; if it is, the row read after that raw read is as of the edit or later.
            hidden = [row for row in pending if applied(last_edit[row], self._raw(table, row))]
            if hidden:
                self.raw_checks += len(hidden)
                self._get(table, hidden, found)
                shown = set(hidden)
                pending = [row for row in pending if row not in shown]
                if not pending:
                    return found
            if attempt + 1 < self.read_attempts:
                self.reads_again += len(pending)
                metrics.ROWS_READ_AGAIN.inc(len(pending))
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        self.unconfirmed += len(pending)
        metrics.ROWS_UNCONFIRMED.inc(len(pending))
        log.warning("%s: %d row(s) read %d times did not show their last edit (a later edit changed them; its "
                    "call reads them again), published as read; first: %r", table, len(pending),
                    self.read_attempts, pending[0][:100])  # fmt: skip
        return found
