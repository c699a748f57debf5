"""The MySQL capture's core (core.py) on generated event sequences, with no server and no Kafka.

A workload of event groups is drawn (transactional groups, groups that touched a non-transactional table
with savepoints, ROLLBACK TO and ROLLBACK, XA transactions prepared and later committed or rolled back,
DDL), written as the binlog events MariaDB writes for it, and fed to the core. A small executor carries out
the actions as the capture loop does (rows out or held, released, undone, dropped, kept under an XA id) and
acknowledges sends at drawn moments. The oracle is the workload's own account of which rows happened, in
commit order; it never asks the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql import core
from cdcflow.sources.mysql.binlog.columns import Column, TableSchema
from cdcflow.sources.mysql.binlog.events import (
    GTID_COMPLETED_XA,
    GTID_PREPARED_XA,
    GTID_STANDALONE,
    GTID_TRANSACTIONAL,
    BinlogEvent,
    EventHeader,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XaPrepareEvent,
    XidEvent,
)
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint, PendingTxn

pytestmark = pytest.mark.unit

SCHEMA = TableSchema(7, "db", "t", (Column("id", 3, 0, False, None),), (0,))


def header(pos: int) -> EventHeader:
    return EventHeader(timestamp=1_700_000_000 + pos, type=0, server_id=1, size=10, log_pos=pos, flags=0)


@dataclass
class Workload:
    """Binlog events, and what the workload knows happened: row ids in the order they became true."""

    events: list[BinlogEvent] = field(default_factory=list)
    happened: list[int] = field(default_factory=list)
    prepared: dict[str, list[int]] = field(default_factory=dict)  # xid -> rows waiting for XA COMMIT
    seq: int = 10
    next_row: int = 0

    def emit(self, ev_type: type, *args: Any) -> None:
        self.events.append(ev_type(header(100 + len(self.events)), *args))

    def begin(self, flags: int, xid: str | None = None) -> None:
        self.seq += 1
        self.emit(GtidEvent, 0, self.seq, flags, xid)

    def row(self) -> int:
        self.next_row += 1
        self.emit(TableMapEvent, 7, "db", "t", SCHEMA)
        self.emit(RowsEvent, "insert", 7, SCHEMA, ((None, {"id": self.next_row}),))
        return self.next_row

    def query(self, text: str) -> None:
        self.emit(QueryEvent, "db", text, 0)


@st.composite
def workloads(draw: st.DrawFn) -> Workload:
    w = Workload()
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["transactional", "non-transactional", "xa", "ddl", "xa-completion"]))
        if kind == "transactional":  # InnoDB only: rows stream out; a savepoint holds the rows after it
            w.begin(GTID_TRANSACTIONAL)
            w.query("BEGIN")
            rows = [w.row() for _ in range(draw(st.integers(0, 3)))]
            if draw(st.booleans()):
                w.query("SAVEPOINT `s1`")
                later = [w.row() for _ in range(draw(st.integers(0, 3)))]
                if draw(st.booleans()):
                    w.query("ROLLBACK TO `s1`")
                    later = []
                rows += later
            w.emit(XidEvent, w.seq)
            w.happened += rows
        elif kind == "non-transactional":  # rows held; savepoints, ROLLBACK TO and ROLLBACK undo some
            w.begin(0)
            w.query("BEGIN")
            rows: list[int] = []
            savepoints: list[tuple[str, int]] = []  # (name, rows when set), in the order set
            for _ in range(draw(st.integers(0, 8))):
                step = draw(st.sampled_from(["row", "row", "savepoint", "rollback to"]))
                if step == "row":
                    rows.append(w.row())
                elif step == "savepoint":
                    name = draw(st.sampled_from(["a", "b", "c"]))
                    savepoints = [s for s in savepoints if s[0] != name] + [(name, len(rows))]
                    w.query(f"SAVEPOINT `{name}`")
                elif savepoints:
                    index = draw(st.integers(0, len(savepoints) - 1))
                    name, mark = savepoints[index]
                    del savepoints[index + 1 :]  # savepoints set after it are gone
                    del rows[mark:]
                    w.query(f"ROLLBACK TO {name}")
            if draw(st.booleans()):
                w.query("COMMIT")
                w.happened += rows
            else:
                w.query("ROLLBACK")
        elif kind == "xa":
            xid = f"X'{w.seq}',X'',1"
            w.begin(GTID_TRANSACTIONAL | GTID_PREPARED_XA, xid)
            w.query(f"XA START {xid}")
            rows = [w.row() for _ in range(draw(st.integers(0, 3)))]
            w.query(f"XA END {xid}")
            w.emit(XaPrepareEvent, xid, False)
            w.prepared[xid] = rows
        elif kind == "xa-completion" and w.prepared:
            xid = draw(st.sampled_from(sorted(w.prepared)))
            commit = draw(st.booleans())
            w.begin(GTID_STANDALONE | GTID_COMPLETED_XA, xid)
            w.query(f"XA {'COMMIT' if commit else 'ROLLBACK'} {xid}")
            rows = w.prepared.pop(xid)
            w.happened += rows if commit else []
        else:  # a DDL: a group of its own
            w.begin(GTID_STANDALONE)
            w.query("ALTER TABLE t ADD c INT")
        if draw(st.booleans()):
            w.emit(RotateEvent, f"bin.{len(w.events):06d}", 4)
        if draw(st.booleans()):
            w.emit(HeartbeatEvent)
    return w


class Executor:
    """The capture loop's part, minus the I/O: records are row ids; `sent` waits for acknowledgements."""

    def __init__(self, c: core.CaptureCore, frontier: AckFrontier) -> None:
        self.core = c
        self.frontier = frontier
        self.published: list[int] = []
        self.group: list[list[int]] = []  # held rows, per rows event
        self.xa: dict[str, list[int]] = {}
        self.unacknowledged: list[PendingTxn] = []
        self.groups: list[tuple[PendingTxn, Checkpoint]] = []  # in commit order
        self.ddl = 0

    def send(self, txn: PendingTxn, n: int) -> None:
        txn.outstanding += n
        self.unacknowledged += [txn] * n

    def feed(self, ev: BinlogEvent) -> None:
        for action in self.core.feed(ev):
            txn = self.core.position.txn
            if isinstance(action, core.PublishRows):
                ids = [after["id"] for _, after in action.event.rows if after is not None]
                assert txn is not None
                if action.held:
                    self.group.append(ids)
                else:
                    self.published += ids
                    self.send(txn, len(ids))
            elif isinstance(action, core.UndoHeld):
                del self.group[action.kept :]
            elif isinstance(action, core.ReleaseGroup):
                assert txn is not None
                released = [i for ids in self.group for i in ids]
                self.published += released
                self.send(txn, len(released))
                self.group = []
            elif isinstance(action, core.DiscardGroup):
                self.group = []
            elif isinstance(action, core.PrepareXa):
                assert txn is not None
                held = [i for ids in self.group for i in ids]
                self.xa[action.xid], self.group = held, []
                self.send(txn, len(held))  # into the XA topic, as part of the prepare group
                self.core.prepared(action.xid, len(held))
            elif isinstance(action, core.CompleteXa):
                assert txn is not None and action.prepared is not None
                held = self.xa.pop(action.xid)
                assert action.prepared["records"] == len(held)
                if action.commit:
                    self.published += held
                    self.send(txn, len(held))
            elif isinstance(action, core.PublishDdl):
                self.ddl += 1
            elif isinstance(action, core.EndGroup):
                assert txn is not None
                self.groups.append((txn, self.core.end_group(action.header, {})))

    def acknowledge(self, n: int) -> None:
        for txn in self.unacknowledged[:n]:
            txn.on_delivery(None, None)
        del self.unacknowledged[:n]

    def advance(self) -> Checkpoint | None:
        """The frontier's newest checkpoint: never one with an unacknowledged record in or before its group."""
        newest = self.frontier.advance()
        if newest is not None:
            index = next(i for i, (_txn, cp) in enumerate(self.groups) if cp is newest)
            assert all(txn.outstanding == 0 for txn, _cp in self.groups[: index + 1])
        return newest


@settings(max_examples=300, deadline=None)
@given(workloads(), st.lists(st.integers(0, 5), min_size=1))
def test_the_rows_published_are_the_rows_that_happened_and_checkpoints_wait_for_acknowledgements(
    w: Workload, acks: list[int]
) -> None:
    frontier = AckFrontier()
    executor = Executor(core.CaptureCore(Checkpoint("0-1-10", "bin.000001", 4), frontier, mysql=False), frontier)
    checkpoints: list[Checkpoint] = []
    for i, ev in enumerate(w.events):
        executor.feed(ev)
        executor.acknowledge(acks[i % len(acks)])
        if (cp := executor.advance()) is not None:
            checkpoints.append(cp)
    executor.acknowledge(len(executor.unacknowledged))
    if (cp := executor.advance()) is not None:
        checkpoints.append(cp)

    assert executor.published == w.happened
    assert executor.xa == w.prepared  # still waiting for XA COMMIT / ROLLBACK
    seqs = [int(cp.gtid_state.rsplit("-", 1)[1]) for cp in checkpoints if cp.gtid_state]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # each checkpoint further than the last
    if executor.groups:
        last = executor.groups[-1][1]
        assert checkpoints[-1] is last and last.gtid_state == f"0-1-{w.seq}"
        assert {xid: p["records"] for xid, p in last.xa_prepared.items()} == {x: len(r) for x, r in w.prepared.items()}
    assert executor.core.position.open is None


def test_a_transactional_group_that_rolls_back_published_rows_stops_the_capture() -> None:
    w = Workload()
    w.begin(GTID_TRANSACTIONAL)
    w.row()
    w.query("ROLLBACK")
    frontier = AckFrontier()
    executor = Executor(core.CaptureCore(Checkpoint("0-1-10", "", 4), frontier, mysql=False), frontier)
    with pytest.raises(TerminalError, match="ends in ROLLBACK after 1 of its rows were published"):
        for ev in w.events:
            executor.feed(ev)


def test_rollback_to_an_unknown_savepoint_and_a_group_inside_a_group_stop_the_capture() -> None:
    c = core.CaptureCore(Checkpoint("0-1-10", "", 4), AckFrontier(), mysql=False)
    c.feed(GtidEvent(header(1), 0, 11, 0))
    with pytest.raises(TerminalError, match="without its SAVEPOINT"):
        c.feed(QueryEvent(header(2), "db", "ROLLBACK TO `nope`", 0))
    with pytest.raises(TerminalError, match="still open"):
        c.feed(GtidEvent(header(3), 0, 12, 0))


def test_rows_of_filtered_tables_and_events_outside_a_group_do_nothing() -> None:
    c = core.CaptureCore(Checkpoint("0-1-10", "", 4), AckFrontier(), mysql=False)
    assert c.feed(XidEvent(header(1), 1)) == []
    assert c.feed(QueryEvent(header(2), "db", "COMMIT", 0)) == []
    c.feed(GtidEvent(header(3), 0, 11, GTID_TRANSACTIONAL))
    assert c.feed(RowsEvent(header(4), "insert", 9, None, ((None, {"id": 1}),))) == []
    assert c.feed(HeartbeatEvent(header(5))) == [core.CaughtUp()]
