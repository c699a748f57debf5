"""The capture's transaction state machine: where the binlog stream stands, one event at a time.

Pure (no I/O), in the manner of h11's `_state.py`: everything that moves the stream's position
(GTID state, current file, the open transaction and whether it is a standalone DDL, the commit
that releases a checkpoint to the ack frontier) changes here and nowhere else. The capture loop
reads, decodes, feeds the decoded event here, and publishes what it is told to.
"""

from __future__ import annotations

import copy
import enum
from typing import Any

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import EventHeader, GtidEvent, file_index
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn

# Query events that end a transaction group.
TXN_END_QUERIES = ("COMMIT", "ROLLBACK", "XA COMMIT", "XA ROLLBACK")


class QueryRole(enum.Enum):
    """What a Query event means for the open transaction."""

    OUTSIDE = "outside"  # no transaction open: nothing to do
    STATEMENT = "statement"  # BEGIN or a statement inside the transaction (e.g. SAVEPOINT): nothing to do
    DDL = "ddl"  # a standalone statement (DDL): publish it, then it commits
    END = "end"  # ends the transaction: commit


def parse_gtid_state(text: str) -> dict[int, str]:
    """MariaDB's gtid_binlog_pos text ("0-1-100,1-2-30") → {domain: GTID}."""
    state = {}
    for gtid in filter(None, (g.strip() for g in text.split(","))):
        parts = gtid.split("-")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise TerminalError(f"bad MariaDB GTID {gtid!r} in checkpoint")
        state[int(parts[0])] = gtid
    return state


def format_gtid_state(state: dict[int, str]) -> str:
    return ",".join(state[d] for d in sorted(state))


class TransactionState:
    """The stream position and the open transaction, from a start checkpoint on."""

    def __init__(self, start: Checkpoint, frontier: AckFrontier) -> None:
        self.frontier = frontier
        self.gtid_state = parse_gtid_state(start.gtid_state or "")
        self.file = start.file
        self.file_index = file_index(start.file) if start.file else 0
        self.txn: PendingTxn | None = None
        self.ctx: TxnContext | None = None
        self._standalone = False
        self._gtid = (0, "")
        self.committed = 0

    @property
    def open(self) -> tuple[TxnContext, PendingTxn] | None:
        """The open transaction (its context for events, its pending acknowledgements), if any."""
        if self.ctx is None or self.txn is None:
            return None
        return self.ctx, self.txn

    def rotate(self, next_file: str) -> None:
        self.file, self.file_index = next_file, file_index(next_file)

    def begin(self, ev: GtidEvent) -> TxnContext:
        self.txn = self.frontier.begin()
        self.ctx = TxnContext(id=ev.gtid, gtid=ev.gtid, file=self.file, file_index=self.file_index)
        self._standalone = ev.standalone
        self._gtid = (ev.domain_id, ev.gtid)
        return self.ctx

    def query_role(self, query: str) -> QueryRole:
        if self.open is None:
            return QueryRole.OUTSIDE
        stmt = query.strip().upper()
        if stmt == "BEGIN":
            return QueryRole.STATEMENT
        if self._standalone:
            return QueryRole.DDL
        if stmt.startswith(TXN_END_QUERIES):
            return QueryRole.END
        return QueryRole.STATEMENT

    def commit(self, header: EventHeader, snapshot_progress: dict[str, Any]) -> Checkpoint:
        """The open transaction ends at `header`: its checkpoint goes to the frontier, which releases it
        once this transaction and every earlier one are acknowledged."""
        if self.txn is None:
            raise TerminalError(f"commit at {self.file}:{header.log_pos} with no open transaction")
        self.gtid_state[self._gtid[0]] = self._gtid[1]
        checkpoint = Checkpoint(
            gtid_state=format_gtid_state(self.gtid_state), file=self.file, pos=header.log_pos,
            server_id=header.server_id, ts_ms=header.timestamp * 1000,
            snapshot=copy.deepcopy(snapshot_progress) if snapshot_progress else {},
        )  # fmt: skip
        self.frontier.commit(self.txn, checkpoint)
        self.txn, self.ctx = None, None
        self.committed += 1
        return checkpoint
