"""What a DDL did to rows without row events (ddl.py says which), followed at its place in the stream.

An emptied table (TRUNCATE, DROP, the old name of a RENAME) gets an op t event. A refilled table
(the new name of a RENAME swap) or one whose rows a DDL rewrote (a new default, a widened DECIMAL,
a new key) is read again by the incremental snapshot, with positions after the DDL; a refilled or
rekeyed one is emptied first. When the capture cannot read a table again, it says so loudly (log,
metric, the status page) with what to do.
"""

from __future__ import annotations

import logging

from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import MySqlSourceConfig
from cdcflow.sources.mysql.binlog.events import QueryEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import PendingTxn
from cdcflow.sources.mysql.ddl import Emptied, Refilled, row_effects
from cdcflow.sources.mysql.publisher import Publisher
from cdcflow.sources.mysql.selected_values import table_columns
from cdcflow.sources.mysql.snapshot_driver import SnapshotDriver, TableFilter
from cdcflow.sources.mysql.stats import CaptureStats

log = logging.getLogger(__name__)


class DdlFollower:
    def __init__(self, cfg: MySqlSourceConfig, ep: MySqlEndpoint, table_filter: TableFilter, publisher: Publisher,
                 snapshots: SnapshotDriver, stats: CaptureStats) -> None:  # fmt: skip
        self.cfg = cfg
        self.ep = ep
        self.filter = table_filter
        self.publisher = publisher
        self.snapshots = snapshots
        self.stats = stats

    def follow(self, ev: QueryEvent, ctx: TxnContext, txn: PendingTxn) -> None:
        for effect in row_effects(ev.query, ev.db):
            db, table = effect.table
            qualified = f"{db}.{table}"
            if not self.filter(db, table) or qualified in self.filter.always:
                continue
            if isinstance(effect, Emptied):
                self.publisher.truncate(ev, ctx, txn, db, table, effect.cause)
            elif isinstance(effect, Refilled):
                self.publisher.truncate(ev, ctx, txn, db, table, "refill")
                self._read_again(qualified, ctx, f"{'.'.join(effect.previous)} was renamed to it")
            else:
                if effect.empty_first:
                    self.publisher.truncate(ev, ctx, txn, db, table, effect.empty_first)
                self._read_again(qualified, ctx, effect.why)

    def _read_again(self, qualified: str, ctx: TxnContext, why: str) -> None:
        """Read a table again from its start with the incremental snapshot (positions after the DDL). Without
        a snapshot (no watermark table can be written) the sinks cannot follow: said loudly, with what to do."""
        snapshot = self.snapshots.for_ddl()
        if snapshot is None:
            self._not_followed(qualified, ctx, why, f"the table cannot be read again: let the capture write its "
                               f"watermark table ({self.cfg.snapshot.watermark_table}: CREATE, INSERT, UPDATE), or "
                               f"set mysql.snapshot.on_ddl, then snapshot it: cdcflow mysql signal snapshot "
                               f"{qualified}")  # fmt: skip
            return
        planned = snapshot.again(qualified, self.snapshots.captured(), f"ddl {ctx.gtid or ctx.id}")
        self.publisher.forget_tables(qualified)  # its shape is published again before the rows read again
        if not planned:
            db, _, table = qualified.partition(".")
            if table_columns(self.ep, db, table):  # (a table gone since is followed by its own op t)
                self._not_followed(qualified, ctx, why, "it has no primary key, so it cannot be read again in "
                                   "chunks: give it one, or name the columns that identify a row in "
                                   f"mysql.key_columns, then snapshot it: cdcflow mysql signal snapshot "
                                   f"{qualified}")  # fmt: skip
            return
        self.stats.not_followed.pop(qualified, None)  # caught up once the read ends
        self.stats.ddl_rereads += 1
        log.info("%s (%s): rows changed without row events (%s): reading the table again", qualified, ctx.gtid, why)

    def _not_followed(self, qualified: str, ctx: TxnContext, why: str, remedy: str) -> None:
        self.stats.ddl_not_followed += 1
        self.stats.not_followed[qualified] = f"{why} at {ctx.gtid or ctx.file}: {remedy}"
        log.error("%s (%s at %s): rows changed without row events (%s) and its sinks now differ from it: %s",
                  qualified, ctx.gtid, ctx.file, why, remedy)  # fmt: skip
