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
import re
from typing import Any

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import EventHeader, GtidEvent
from cdcflow.sources.mysql.binlog.gtid_set import ExecutedGtids, GtidSet
from cdcflow.sources.mysql.binlog.mysql_events import MySqlGtidEvent
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn

_SAVEPOINT = re.compile(r"^SAVEPOINT\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_ROLLBACK_TO = re.compile(r"^ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_COMMIT = re.compile(r"^COMMIT(?:\s+WORK)?\s*$", re.IGNORECASE)
_ROLLBACK = re.compile(r"^ROLLBACK(?:\s+WORK)?\s*$", re.IGNORECASE)
_XA_STATEMENT = re.compile(r"^XA\s+(START|BEGIN|END)\b", re.IGNORECASE)
_XA_COMMIT = re.compile(r"^XA\s+COMMIT\b", re.IGNORECASE)
_XA_ROLLBACK = re.compile(r"^XA\s+ROLLBACK\b", re.IGNORECASE)
_XA_START = re.compile(r"^XA\s+(?:START|BEGIN)\s+(.+?)(?:\s+(?:JOIN|RESUME))?\s*$", re.IGNORECASE | re.DOTALL)
_XA_COMPLETION = re.compile(r"^XA\s+(?:COMMIT|ROLLBACK)\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)


class GroupKind(enum.Enum):
    """How the capture treats the rows of an event group (MariaDB: from its GTID event's flags)."""

    STREAMED = "streamed"  # transactional tables only: every row in the group is committed; rows go out at once
    BUFFERED = "buffered"  # may hold rows a ROLLBACK / ROLLBACK TO undoes: rows wait for the group's end
    STANDALONE = "standalone"  # one statement, no commit event (DDL)
    XA_PREPARE = "xa_prepare"  # rows of a prepared XA transaction: held until XA COMMIT / XA ROLLBACK
    XA_COMPLETION = "xa_completion"  # XA COMMIT or XA ROLLBACK of a prepared XA transaction


class QueryRole(enum.Enum):
    """What a Query event means for the open event group."""

    OUTSIDE = "outside"  # no group open: nothing to do
    STATEMENT = "statement"  # BEGIN, XA END, RELEASE SAVEPOINT ...: nothing to do
    XA_START = "xa_start"  # MySQL: the group is the first half of an XA transaction; hold its rows from here
    SAVEPOINT = "savepoint"  # remember where the group's rows stand
    ROLLBACK_TO = "rollback_to"  # the rows since that savepoint did not happen
    COMMIT = "commit"  # ends the group: its rows happened
    ROLLBACK = "rollback"  # ends the group: its rows did not happen
    DDL = "ddl"  # a standalone statement (DDL): publish it, then it commits
    XA_COMMIT = "xa_commit"  # the prepared XA transaction's rows happened
    XA_ROLLBACK = "xa_rollback"  # they did not


def savepoint_name(query: str) -> str:
    """`SAVEPOINT `s1``, ``ROLLBACK TO `s1` `` → "s1" (names compare case-insensitively, like MariaDB's)."""
    m = _SAVEPOINT.match(query.strip()) or _ROLLBACK_TO.match(query.strip())
    if m is None:
        raise TerminalError(f"not a savepoint statement: {query[:200]!r}")
    name = m[1]
    if len(name) >= 2 and name[0] == name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return name.lower()


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


def history_behind(checkpoint_state: str, server_state: str) -> list[str]:
    """Domains where the server's binlog is behind the checkpoint: its history is not the one the checkpoint
    came from (RESET MASTER, or a failover to a server that lacks transactions the capture published)."""
    ours, theirs = parse_gtid_state(checkpoint_state), parse_gtid_state(server_state)
    problems = []
    for domain, gtid in sorted(ours.items()):
        seq = int(gtid.rsplit("-", 1)[1])
        server = theirs.get(domain)
        if server is None:
            problems.append(f"domain {domain}: the checkpoint is at {gtid}, the server's binlog has no such domain")
        elif int(server.rsplit("-", 1)[1]) < seq:
            problems.append(f"domain {domain}: the checkpoint is at {gtid}, the server's binlog ends at {server}")
    return problems


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
        m = _XA_START.match(stmt)
        if m:
            self.kind, self.xid = GroupKind.XA_PREPARE, m[1]
            return QueryRole.XA_START
        m = _XA_COMPLETION.match(stmt)
        if m:
            self.kind, self.xid = GroupKind.XA_COMPLETION, m[1]
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
        if self.kind is GroupKind.XA_COMPLETION:
            if _XA_COMMIT.match(stmt):
                return QueryRole.XA_COMMIT
            if _XA_ROLLBACK.match(stmt):
                return QueryRole.XA_ROLLBACK
            raise TerminalError(f"XA completion group {self._gtid[1]} holds {stmt[:200]!r}, not XA COMMIT/ROLLBACK")
        if stmt.upper() == "BEGIN" or _XA_STATEMENT.match(stmt):
            return QueryRole.STATEMENT
        if self.kind is GroupKind.STANDALONE:
            return QueryRole.DDL
        if _SAVEPOINT.match(stmt):
            return QueryRole.SAVEPOINT
        if _ROLLBACK_TO.match(stmt):
            return QueryRole.ROLLBACK_TO
        if _COMMIT.match(stmt):
            return QueryRole.COMMIT
        if _ROLLBACK.match(stmt):
            return QueryRole.ROLLBACK
        return QueryRole.STATEMENT  # RELEASE SAVEPOINT and anything else inside a group changes no row

    def xa_prepared_here(self, xid: str, records: int) -> None:
        """The open group prepared XA transaction `xid` with `records` held rows."""
        assert self.ctx is not None and self.ctx.gtid is not None
        self.xa_prepared[xid] = {"gtid": self.ctx.gtid, "records": records}

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
