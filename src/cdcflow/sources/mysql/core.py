"""The MySQL capture's decisions as a pure state machine: decoded binlog events in, actions out.

The capture loop (capture.py) reads and decodes the binlog, feeds each event to `CaptureCore.feed`
and carries out the actions it returns, in order. Everything the loop must not get wrong lives here:
where an event group begins and ends, whether its rows go out at once or wait for its end (MariaDB
writes rows a later ROLLBACK or ROLLBACK TO SAVEPOINT undoes when a transaction touched a
non-transactional table; a prepared XA transaction's rows wait for XA COMMIT), which held rows a
savepoint rollback undoes, and when a group's checkpoint goes to the acknowledgement frontier.
What MariaDB and MySQL write for these cases: docs/decisions/0006 and 0015.

No I/O and no encoding: held rows are counted in rows events (the loop's buffer keeps where each
event's records start), and two facts only the loop knows come back by call: how many records a
prepared XA transaction holds (`prepared`) and the snapshot progress a checkpoint carries
(`end_group`). tests/unit/test_mysql_core.py drives it with generated event sequences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import (
    BinlogEvent,
    EventHeader,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    UnsupportedEvent,
    XaPrepareEvent,
    XidEvent,
)
from cdcflow.sources.mysql.binlog.mysql_events import MySqlGtidEvent
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint
from cdcflow.sources.mysql.statements import QueryRole, savepoint_name
from cdcflow.sources.mysql.transactions import TransactionState


@dataclass(frozen=True, slots=True)
class PublishRows:
    """The rows of a rows event: out now, or (`held`) kept until the group's end says they happened."""

    event: RowsEvent
    held: bool


@dataclass(frozen=True, slots=True)
class DescribeTable:
    """A TABLE_MAP of the open group: its columns into the schema history if they changed."""

    event: TableMapEvent


@dataclass(frozen=True, slots=True)
class UndoHeld:
    """ROLLBACK TO SAVEPOINT: the held rows of every rows event after the first `kept` did not happen."""

    kept: int


@dataclass(frozen=True, slots=True)
class ReleaseGroup:
    """The group committed at `commit`: its held rows go out (and its transaction's END record)."""

    commit: EventHeader


@dataclass(frozen=True, slots=True)
class DiscardGroup:
    """The group ended in ROLLBACK: its held rows never happened."""


@dataclass(frozen=True, slots=True)
class PrepareXa:
    """XA PREPARE: the group's held rows wait under `xid` (the loop stores them, then calls `prepared`)."""

    xid: str


@dataclass(frozen=True, slots=True)
class CompleteXa:
    """XA COMMIT (`commit`) publishes the rows held for `xid`, XA ROLLBACK drops them. `prepared`: what the
    prepare group recorded ({"gtid", "records", "seq"}), None when it was prepared before the capture's start;
    `at`: the XA COMMIT / XA ROLLBACK statement."""

    xid: str
    commit: bool
    prepared: dict[str, Any] | None
    at: EventHeader | None = None


@dataclass(frozen=True, slots=True)
class PublishDdl:
    """A DDL statement (a group of its own): into the schema history, and what it did to rows followed."""

    event: QueryEvent


@dataclass(frozen=True, slots=True)
class EndGroup:
    """The group ends at `header`, committed or not: the loop calls `end_group` (the checkpoint moves)."""

    header: EventHeader


@dataclass(frozen=True, slots=True)
class CaughtUp:
    """A heartbeat from the server: nothing newer is written yet."""


Action = (
    PublishRows | DescribeTable | UndoHeld | ReleaseGroup | DiscardGroup | PrepareXa | CompleteXa | PublishDdl
    | EndGroup | CaughtUp
)  # fmt: skip


class CaptureCore:
    """The open group's fate, from a start checkpoint on (one per stream attempt)."""

    def __init__(self, start: Checkpoint, frontier: AckFrontier, mysql: bool) -> None:
        self.position = TransactionState(start, frontier, mysql=mysql)
        self.holding = False  # rows of the open group are held (not published) from here on
        self.held_events = 0  # rows events held in the open group
        self.savepoints: dict[str, int] = {}  # savepoint name -> held rows events when it was set
        self.streamed_rows = 0  # rows of the open group already published (not held)

    def feed(self, ev: BinlogEvent) -> list[Action]:
        """What to do about one decoded event (events of filtered tables come without a schema: skipped)."""
        p = self.position
        if isinstance(ev, RowsEvent):
            if ev.schema is None or p.ctx is None:
                return []
            p.next_rows_event()
            if self.holding:
                self.held_events += 1
            else:
                self.streamed_rows += len(ev.rows)
            return [PublishRows(ev, self.holding)]
        if isinstance(ev, TableMapEvent):
            return [DescribeTable(ev)] if ev.schema is not None and p.open is not None else []
        if isinstance(ev, GtidEvent | MySqlGtidEvent):
            self._begin(ev)
            return []
        if isinstance(ev, XidEvent):
            return [ReleaseGroup(ev.header), EndGroup(ev.header)] if p.open is not None else []
        if isinstance(ev, XaPrepareEvent):
            if p.open is None:
                return []
            if ev.one_phase:  # XA COMMIT ... ONE PHASE: an ordinary commit
                return [ReleaseGroup(ev.header), EndGroup(ev.header)]
            return [PrepareXa(ev.xid), EndGroup(ev.header)]
        if isinstance(ev, QueryEvent):
            return self._query(ev)
        if isinstance(ev, HeartbeatEvent):  # sent only when there is nothing newer
            return [CaughtUp()]
        if isinstance(ev, RotateEvent):
            p.rotate(ev.next_file)
        elif isinstance(ev, UnsupportedEvent):
            raise TerminalError(f"binlog at {p.file}:{ev.header.start_pos}: {ev.reason}")
        return []

    def _begin(self, ev: GtidEvent | MySqlGtidEvent) -> None:
        p = self.position
        if p.open is not None:
            raise TerminalError(f"binlog at {p.file}:{ev.header.start_pos}: GTID {ev.gtid} starts a group "
                                f"while {p.ctx.id if p.ctx else '?'} is still open")  # fmt: skip
        if isinstance(ev, GtidEvent):
            p.begin(ev)
        else:
            p.begin_mysql(ev)
        self._reset(holding=p.holds_rows)

    def _reset(self, holding: bool) -> None:
        self.holding, self.held_events, self.savepoints, self.streamed_rows = holding, 0, {}, 0

    def _query(self, ev: QueryEvent) -> list[Action]:
        p = self.position
        role = p.query_role(ev.query)
        opened = p.open
        if role is QueryRole.OUTSIDE or role is QueryRole.STATEMENT or opened is None:
            return []
        ctx = opened[0]
        if role is QueryRole.XA_START:  # MySQL: the rows of a prepared XA transaction wait for its completion
            self.holding = True
            return []
        if role is QueryRole.SAVEPOINT:  # rows before it cannot be undone by ROLLBACK TO: hold from here
            self.holding = True
            self.savepoints[savepoint_name(ev.query)] = self.held_events
            return []
        if role is QueryRole.ROLLBACK_TO:
            mark = self.savepoints.get(savepoint_name(ev.query))
            if mark is None or not self.holding:
                raise TerminalError(f"binlog at {p.file}:{ev.header.start_pos} ({ctx.gtid}): {ev.query!r} "
                                    "without its SAVEPOINT earlier in the group")  # fmt: skip
            self.savepoints = {n: m for n, m in self.savepoints.items() if m <= mark}
            self.held_events = mark
            return [UndoHeld(mark)]
        ending: Action
        if role is QueryRole.COMMIT:
            ending = ReleaseGroup(ev.header)
        elif role is QueryRole.ROLLBACK:
            if self.streamed_rows:
                raise TerminalError(
                    f"binlog at {p.file}:{ev.header.start_pos} ({ctx.gtid}): a group MariaDB marked as "
                    f"transactional ends in ROLLBACK after {self.streamed_rows} of its rows were published"
                )
            ending = DiscardGroup()
        elif role is QueryRole.DDL:
            ending = PublishDdl(ev)
        else:  # XA COMMIT / XA ROLLBACK of a transaction an earlier group prepared
            xid = p.xid or ""
            ending = CompleteXa(xid, role is QueryRole.XA_COMMIT, p.xa_completed_here(xid), ev.header)
        return [ending, EndGroup(ev.header)]

    def prepared(self, xid: str, records: int) -> None:
        """The loop stored the open group's `records` held records under `xid` (PrepareXa)."""
        self.position.xa_prepared_here(xid, records)

    def end_group(self, header: EventHeader, snapshot_progress: dict[str, Any]) -> Checkpoint:
        """Carry out EndGroup: the group's checkpoint (with the snapshot progress it carries) goes to the
        frontier, which releases it once this group and every earlier one are acknowledged."""
        checkpoint = self.position.commit(header, snapshot_progress)
        self._reset(holding=False)
        return checkpoint
