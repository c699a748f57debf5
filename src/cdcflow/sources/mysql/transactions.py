"""The capture's transaction state machine: where the binlog stream stands, one event at a time.

Pure (no I/O), in the manner of h11's `_state.py`: everything that moves the stream's position
(GTID state, current file, the open event group and what kind it is, the prepared XA transactions,
the group end that releases a checkpoint to the ack frontier) changes here and nowhere else. The
capture's core (core.py) drives it and decides what the group's rows become. What MariaDB 10.11
writes for savepoints, mixed-engine rollbacks and XA (checked with SHOW BINLOG EVENTS) is in
docs/decisions/0006-mysql-groups-savepoints-xa.md; what MySQL 8.0 writes, and how the same state
machine reads it, in docs/decisions/0015-mysql8-groups-positions.md.
"""

from __future__ import annotations

import copy
import enum
from typing import Any

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import EventHeader, GtidEvent
from cdcflow.sources.mysql.binlog.gtid_set import ExecutedGtids, GtidSet
from cdcflow.sources.mysql.binlog.mysql_events import MySqlGtidEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn
from cdcflow.sources.mysql.gtid_state import format_gtid_state, parse_gtid_state
from cdcflow.sources.mysql.statements import QueryRole, role_in_group, xa_completion_id, xa_start_id


class GroupKind(enum.Enum):
    """How the capture treats the rows of an event group (MariaDB: from its GTID event's flags)."""

    STREAMED = "streamed"  # transactional tables only: every row in the group is committed; rows go out at once
    BUFFERED = "buffered"  # may hold rows a ROLLBACK / ROLLBACK TO undoes: rows wait for the group's end
    STANDALONE = "standalone"  # one statement, no commit event (DDL)
    XA_PREPARE = "xa_prepare"  # rows of a prepared XA transaction: held until XA COMMIT / XA ROLLBACK
    XA_COMPLETION = "xa_completion"  # XA COMMIT or XA ROLLBACK of a prepared XA transaction


class TransactionState:
    """The stream position and the open event group, from a start checkpoint on."""

    def __init__(self, start: Checkpoint, frontier: AckFrontier, mysql: bool = False) -> None:
        self.frontier = frontier
        # MariaDB: the last GTID per domain. MySQL: every GTID passed, as a set (`gtid_state` holds its text).
        self.mysql = mysql
        self.gtid_state = {} if mysql else parse_gtid_state(start.gtid_state or "")
        self.executed = ExecutedGtids(GtidSet.parse(start.gtid_state or "")) if mysql else None
        self._first_statement = False  # MySQL: the group's first Query event says what kind of group it is
        self.file = start.file
        self.txn: PendingTxn | None = None
        self.ctx: TxnContext | None = None
        self.kind = GroupKind.STREAMED
        self.xid: str | None = None  # XA groups: the XA transaction id
        # Prepared XA transactions not completed yet: xid -> {"gtid": prepare group, "records": n}
        self.xa_prepared: dict[str, dict[str, Any]] = copy.deepcopy(start.xa_prepared)
        self._gtid = (0, "")
        self.committed = 0

    @property
    def open(self) -> tuple[TxnContext, PendingTxn] | None:
        """The open group (its context for events, its pending acknowledgements), if any."""
        if self.ctx is None or self.txn is None:
            return None
        return self.ctx, self.txn

    @property
    def holds_rows(self) -> bool:
        """Rows of the open group must wait for its end (they may be undone, or wait for XA COMMIT)."""
        return self.kind in (GroupKind.BUFFERED, GroupKind.XA_PREPARE)

    def rotate(self, next_file: str) -> None:
        self.file = next_file

    def next_rows_event(self) -> None:
        """A rows event of the open group: positions count them (`source.pos`'s second part)."""
        assert self.ctx is not None
        self.ctx.event_index += 1

    def begin(self, ev: GtidEvent) -> TxnContext:
        last = self.gtid_state.get(ev.domain_id)
        if last is not None and ev.seq_no <= int(last.rsplit("-", 1)[1]):
            # Positions are ordered by sequence number: a sink would ignore everything from here on.
            raise TerminalError(
                f"binlog at {self.file}:{ev.header.start_pos}: GTID {ev.gtid} does not follow {last} in domain "
                f"{ev.domain_id}; the binlog history changed (RESET MASTER, a failover to a server with another "
                "history, or gtid_strict_mode=OFF with several writers in one domain)"
            )
        self.txn = self.frontier.begin()
        self.ctx = TxnContext(id=ev.gtid, gtid=ev.gtid, file=self.file, seq=ev.seq_no)
        if ev.xa_completion:
            self.kind = GroupKind.XA_COMPLETION
        elif ev.xa_prepare:
            self.kind = GroupKind.XA_PREPARE
        elif ev.standalone:
            self.kind = GroupKind.STANDALONE
        elif ev.transactional:
            self.kind = GroupKind.STREAMED
        else:
            self.kind = GroupKind.BUFFERED
        self.xid = ev.xid
        self._gtid = (ev.domain_id, ev.gtid)
        return self.ctx

    def begin_mysql(self, ev: MySqlGtidEvent) -> TxnContext:
        """A MySQL transaction starts. Its position is the size of the executed GTID set once it is added
        (ExecutedGtids); MySQL marks neither DDL nor XA in the GTID event, so the group's first statement
        decides its kind (`query_role`)."""
        assert self.executed is not None, "a MySQL GTID event on a MariaDB stream"
        if ev.anonymous:
            raise TerminalError(f"binlog at {self.file}:{ev.header.start_pos}: a transaction without a GTID "
                                "(gtid_mode is not ON); cdcflow reads MySQL with gtid_mode=ON only")  # fmt: skip
        if not self.executed.add(ev.sid, ev.gno):
            raise TerminalError(
                f"binlog at {self.file}:{ev.header.start_pos}: GTID {ev.gtid} was already passed; the binlog history "
                "changed (RESET MASTER, or a failover to a server with another history)"
            )
        self.txn = self.frontier.begin()
        self.ctx = TxnContext(id=ev.gtid, gtid=ev.gtid, file=self.file, seq=self.executed.count)
        self.kind = GroupKind.STREAMED  # InnoDB: MySQL logs committed transactions only (decision 0015)
        self.xid = None
        self._first_statement = True
        self._gtid = (0, ev.gtid)
        return self.ctx

    def _mysql_first_statement(self, stmt: str) -> QueryRole | None:
        """The kind of a MySQL group from its first Query event: BEGIN (rows follow), XA START (the prepared
        half of an XA transaction), XA COMMIT / XA ROLLBACK (the second half), or a statement of its own (DDL)."""
        self._first_statement = False
        if stmt.upper() == "BEGIN":
            return QueryRole.STATEMENT
        xid = xa_start_id(stmt)
        if xid is not None:
            self.kind, self.xid = GroupKind.XA_PREPARE, xid
            return QueryRole.XA_START
        xid = xa_completion_id(stmt)
        if xid is not None:
            self.kind, self.xid = GroupKind.XA_COMPLETION, xid
            return None  # the completion rules below apply
        self.kind = GroupKind.STANDALONE
        return QueryRole.DDL

    def query_role(self, query: str) -> QueryRole:
        if self.open is None:
            return QueryRole.OUTSIDE
        stmt = query.strip()
        if self._first_statement:
            role = self._mysql_first_statement(stmt)
            if role is not None:
                return role
        role = role_in_group(stmt, self.kind is GroupKind.XA_COMPLETION, self.kind is GroupKind.STANDALONE)
        if role is None:
            raise TerminalError(f"XA completion group {self._gtid[1]} holds {stmt[:200]!r}, not XA COMMIT/ROLLBACK")
        return role

    def xa_prepared_here(self, xid: str, records: int) -> None:
        """The open group prepared XA transaction `xid` with `records` held rows."""
        assert self.ctx is not None and self.ctx.gtid is not None
        self.xa_prepared[xid] = {"gtid": self.ctx.gtid, "records": records, "seq": self.ctx.seq}

    def xa_completed_here(self, xid: str) -> dict[str, Any] | None:
        """The open group commits or rolls back `xid`; what was prepared for it (None: prepared before the
        capture's start, so nothing is held)."""
        return self.xa_prepared.pop(xid, None)

    def commit(self, header: EventHeader, snapshot_progress: dict[str, Any]) -> Checkpoint:
        """The open group ends at `header` (committed or rolled back: either way the stream is past it): its
        checkpoint goes to the frontier, which releases it once this group and every earlier one are
        acknowledged."""
        if self.txn is None:
            raise TerminalError(f"end of a group at {self.file}:{header.log_pos} with no open group")
        if self.executed is not None:
            state = str(self.executed)
        else:
            self.gtid_state[self._gtid[0]] = self._gtid[1]
            state = format_gtid_state(self.gtid_state)
        checkpoint = Checkpoint(
            gtid_state=state, file=self.file, pos=header.log_pos,
            server_id=header.server_id, ts_ms=header.timestamp * 1000,
            snapshot=copy.deepcopy(snapshot_progress) if snapshot_progress else {},
            xa_prepared=copy.deepcopy(self.xa_prepared),
        )  # fmt: skip
        self.frontier.commit(self.txn, checkpoint)
        self.txn, self.ctx = None, None
        self.kind, self.xid = GroupKind.STREAMED, None
        self._first_statement = False
        self.committed += 1
        return checkpoint
