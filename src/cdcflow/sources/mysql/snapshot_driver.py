"""The incremental snapshot as the binlog stream drives it: set up from the config or the checkpoint's
progress, asked for by signal rows and by DDLs that change rows without row events, stepped between
binlog events, and released at its watermarks (snapshot.py reads the chunks).

The progress dict is shared with the Snapshotter and rides in every checkpoint, so a restart from a
checkpoint resumes the snapshot where that checkpoint was.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import MySqlSourceConfig
from cdcflow.errors import CdcflowError
from cdcflow.events.model import ChangeEvent
from cdcflow.patterns import NameFilter
from cdcflow.sources.mysql.binlog.events import RowsEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.signals import LogSignal, SignalRefused, create_signal_table, parse_signal
from cdcflow.sources.mysql.snapshot import Snapshotter
from cdcflow.sources.mysql.stats import CaptureStats
from cdcflow.sources.mysql.txn_buffer import HeldRecord

log = logging.getLogger(__name__)


class TableFilter(NameFilter):
    """The capture's `include`/`exclude` "db.table" patterns, asked per (db, table)."""

    def __call__(self, db: str, table: str) -> bool:  # type: ignore[override]
        return super().__call__(f"{db}.{table}")


class SnapshotDriver:
    def __init__(self, cfg: MySqlSourceConfig, ep: MySqlEndpoint, stats: CaptureStats, table_filter: TableFilter,
                 on_forced: Callable[[], None]) -> None:  # fmt: skip
        self.cfg = cfg
        self.ep = ep
        self.stats = stats
        self.filter = table_filter
        self.on_forced = on_forced  # a snapshot set up for a DDL: the decoder must read the watermark table now
        self.snapshot: Snapshotter | None = None
        self.progress: dict[str, Any] = {}  # snapshot progress, carried in every checkpoint

    @property
    def configured(self) -> bool:
        """Configured tables to snapshot, or a signal table that may ask for some."""
        return bool(self.cfg.snapshot.tables or self.cfg.snapshot.signal_table)

    def captured(self) -> TableFilter:
        return TableFilter(self.cfg.include, self.cfg.exclude)

    def setup(self, checkpoint: Checkpoint | None, keep_progress: bool = False, forced: bool = False) -> None:
        snap_cfg = self.cfg.snapshot
        if not keep_progress:
            self.progress = copy.deepcopy(checkpoint.snapshot) if checkpoint else {}
        self.snapshot = None
        unfinished = any(not p.get("done") for p in self.progress.values())  # a re-read after a DDL, say
        if not (self.configured or unfinished or forced):
            return
        self.filter.always = frozenset({snap_cfg.watermark_table, *filter(None, [snap_cfg.signal_table])})
        if snap_cfg.signal_table:
            create_signal_table(self.ep, snap_cfg.signal_table)
        self.snapshot = Snapshotter(self.ep, self.cfg.name, snap_cfg.watermark_table, snap_cfg.chunk_size,
                                    self.progress, self.cfg.key_columns)  # fmt: skip

    def restart(self, start: Checkpoint) -> None:
        """A stream attempt from `start`: the snapshot's progress goes back with the stream position."""
        if self.snapshot is None:
            return
        self.snapshot.chunk = None
        self.progress.clear()
        self.progress.update(copy.deepcopy(start.snapshot))
        self.snapshot.prepare(self.cfg.snapshot.tables, self.captured())

    def step(self) -> None:
        if self.snapshot is not None:  # (a DDL may set one up while the stream runs)
            self.snapshot.step()  # the chunk's SQL runs in a worker thread

    def for_ddl(self) -> Snapshotter | None:
        """The snapshot, set up now if the config did not ask for one (mysql.snapshot.on_ddl); None when it
        cannot be (the watermark table cannot be created or written)."""
        if self.snapshot is not None:
            return self.snapshot
        if not self.cfg.snapshot.on_ddl:
            return None
        try:
            self.setup(None, keep_progress=True, forced=True)
            assert self.snapshot is not None
            self.snapshot.prepare(self.cfg.snapshot.tables, self.captured())
        except (CdcflowError, OSError) as exc:
            self.snapshot = None
            log.error("cannot set up the incremental snapshot to follow a DDL: %s", exc)
            return None
        self.on_forced()
        return self.snapshot

    def observe(self, record: HeldRecord) -> None:
        """A change going out: inside a chunk's window, its row is left to the binlog."""
        snapshot = self.snapshot
        if record.table and snapshot is not None and snapshot.chunk is not None and snapshot.chunk.in_window:
            snapshot.observe(record.table, record.identity if record.identity is not None else record.key or b"")

    def is_signal(self, qualified: str) -> bool:
        return self.snapshot is not None and qualified == self.cfg.snapshot.signal_table

    def is_watermark(self, qualified: str) -> bool:
        return self.snapshot is not None and self.snapshot.is_watermark_table(qualified)

    def signals(self, ev: RowsEvent) -> None:
        """Rows of the signal table (signals.py), handled where the binlog has them: the progress a signal
        starts rides in the checkpoint of its transaction, and a restart from before it reads it again."""
        for before, after in ev.rows:
            if before is None and after is not None:  # an insert; updates and deletes are not signals
                self._signal(after)

    def _signal(self, row: dict[str, Any]) -> None:
        assert self.snapshot is not None
        try:
            signal = parse_signal(row)
        except SignalRefused as exc:
            self.stats.signals_refused += 1
            log.warning("signal refused: %s", exc)
            return
        self.stats.signals += 1
        if isinstance(signal, LogSignal):
            log.info("signal %s: %s", signal.id, signal.message)
            return
        added = self.snapshot.request(signal.tables, self.captured(), signal.id)
        for table in added:
            self.stats.not_followed.pop(table, None)  # read again: its sinks are caught up once that ends
        if not added:
            log.warning("signal %s: no table to snapshot for %s (none matches, is captured and has a primary key, "
                        "or it is being snapshotted already)", signal.id, ", ".join(signal.tables))  # fmt: skip

    def watermarks(self, ev: RowsEvent, ctx: TxnContext) -> list[tuple[str, list[ChangeEvent]]]:
        """Rows of the watermark table: ("db.table", its reads) for each chunk a high watermark released."""
        assert self.snapshot is not None
        released = []
        for _before, after in ev.rows:
            chunk_table = self.snapshot.chunk.table if self.snapshot.chunk else ""
            reads = self.snapshot.on_watermark(after or {}, ctx, ev.header.start_pos, ev.header.timestamp * 1000)
            if reads:
                released.append((chunk_table, reads))
                self.stats.snapshot_rows += len(reads)
        return released
