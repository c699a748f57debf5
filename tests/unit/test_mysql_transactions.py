"""The capture's transaction state machine, fed decoded events by hand (no server)."""

from __future__ import annotations

import pytest

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import (
    GTID_COMPLETED_XA,
    GTID_PREPARED_XA,
    GTID_STANDALONE,
    GTID_TRANSACTIONAL,
    EventHeader,
    GtidEvent,
)
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint
from cdcflow.sources.mysql.gtid_state import history_behind
from cdcflow.sources.mysql.statements import QueryRole, savepoint_name
from cdcflow.sources.mysql.transactions import GroupKind, TransactionState

pytestmark = pytest.mark.unit


def header(log_pos: int, server_id: int = 1, ts: int = 1_700_000_000) -> EventHeader:
    return EventHeader(timestamp=ts, type=0, server_id=server_id, size=10, log_pos=log_pos, flags=0)


def gtid(
    domain: int, seq: int, standalone: bool = False, server_id: int = 1, flags: int = GTID_TRANSACTIONAL,
    xid: str | None = None,
) -> GtidEvent:  # fmt: skip
    return GtidEvent(header(100, server_id), domain, seq, flags | (GTID_STANDALONE if standalone else 0), xid)


def start() -> Checkpoint:
    return Checkpoint(gtid_state="0-1-10,3-2-7", file="mysql-bin.000004", pos=4, server_id=1, ts_ms=0)


def test_a_committed_transaction_releases_its_checkpoint_once_acknowledged() -> None:
    frontier = AckFrontier()
    state = TransactionState(start(), frontier)
    ctx = state.begin(gtid(0, 11))
    assert ctx.gtid == "0-1-11" and ctx.file == "mysql-bin.000004" and ctx.seq == 11
    opened = state.open
    assert opened is not None
    _ctx, txn = opened
    txn.outstanding += 1  # one record sent, not yet acknowledged
    assert state.query_role("COMMIT") is QueryRole.COMMIT
    checkpoint = state.commit(header(500), {"db.t": {"done": True}})
    assert checkpoint.gtid_state == "0-1-11,3-2-7" and checkpoint.pos == 500
    assert state.open is None and frontier.advance() is None  # still waiting for the acknowledgement
    txn.on_delivery(None, None)
    assert frontier.advance() == checkpoint


def test_query_roles_inside_and_outside_transactions() -> None:
    state = TransactionState(start(), AckFrontier())
    assert state.query_role("COMMIT") is QueryRole.OUTSIDE
    state.begin(gtid(0, 11))
    assert state.query_role(" begin ") is QueryRole.STATEMENT
    assert state.query_role("SAVEPOINT `s1`") is QueryRole.SAVEPOINT
    assert state.query_role("RELEASE SAVEPOINT `s1`") is QueryRole.STATEMENT
    # The old prefix match took these for the end of the transaction.
    assert state.query_role("ROLLBACK TO `s1`") is QueryRole.ROLLBACK_TO
    assert state.query_role("rollback work to savepoint s1") is QueryRole.ROLLBACK_TO
    assert state.query_role("rollback") is QueryRole.ROLLBACK
    assert state.query_role("COMMIT") is QueryRole.COMMIT
    assert state.query_role("XA END X'7831',X'',1") is QueryRole.STATEMENT
    state.commit(header(200), {})
    state.begin(gtid(0, 12, standalone=True))
    assert state.query_role("ALTER TABLE t ADD c INT") is QueryRole.DDL


def test_rotate_moves_the_file_of_later_transactions() -> None:
    state = TransactionState(start(), AckFrontier())
    state.rotate("mysql-bin.000005")
    assert state.begin(gtid(0, 11)).file == "mysql-bin.000005"
    assert state.commit(header(300), {}).file == "mysql-bin.000005"


def test_a_commit_without_an_open_transaction_fails_loudly() -> None:
    with pytest.raises(TerminalError, match="no open group"):
        TransactionState(start(), AckFrontier()).commit(header(300), {})


def test_group_kinds_follow_mariadbs_gtid_flags() -> None:
    state = TransactionState(start(), AckFrontier())
    cases = [
        (gtid(0, 11), GroupKind.STREAMED, False),
        (gtid(0, 12, flags=0), GroupKind.BUFFERED, True),  # touched a non-transactional table
        (gtid(0, 13, standalone=True, flags=0), GroupKind.STANDALONE, False),
        (gtid(0, 14, flags=GTID_TRANSACTIONAL | GTID_PREPARED_XA, xid="X'7831',X'',1"), GroupKind.XA_PREPARE, True),
        (gtid(0, 15, standalone=True, flags=GTID_COMPLETED_XA, xid="X'7831',X'',1"), GroupKind.XA_COMPLETION, False),
    ]
    for event, kind, holds in cases:
        state.begin(event)
        assert (state.kind, state.holds_rows, state.xid) == (kind, holds, event.xid)
        state.commit(header(300), {})


def test_xa_groups_keep_the_prepared_set_in_every_checkpoint() -> None:
    state = TransactionState(start(), AckFrontier())
    xid = "X'7831',X'',1"
    state.begin(gtid(0, 11, flags=GTID_PREPARED_XA, xid=xid))
    state.xa_prepared_here(xid, 3)
    prepared = state.commit(header(300), {})
    assert prepared.xa_prepared == {xid: {"gtid": "0-1-11", "records": 3, "seq": 11}}
    assert Checkpoint.from_bytes(prepared.to_bytes()).xa_prepared == prepared.xa_prepared
    state.begin(gtid(0, 12, flags=GTID_PREPARED_XA | GTID_TRANSACTIONAL, xid="X'7832',X'',1"))
    state.commit(header(400), {})  # an ordinary group in between keeps the set
    state.begin(gtid(0, 13, standalone=True, flags=GTID_COMPLETED_XA, xid=xid))
    assert state.query_role(f"XA COMMIT {xid}") is QueryRole.XA_COMMIT
    assert state.xa_completed_here(xid) == {"gtid": "0-1-11", "records": 3, "seq": 11}
    assert state.commit(header(500), {}).xa_prepared == {}
    # A restart from the prepare's checkpoint knows the transaction is still prepared.
    assert TransactionState(prepared, AckFrontier()).xa_prepared == prepared.xa_prepared
    state.begin(gtid(0, 14, standalone=True, flags=GTID_COMPLETED_XA, xid=xid))
    assert state.query_role(f"xa rollback {xid}") is QueryRole.XA_ROLLBACK
    assert state.xa_completed_here(xid) is None  # never prepared here: the capture says so
    with pytest.raises(TerminalError, match="not XA COMMIT"):
        state.query_role("COMMIT")


@pytest.mark.parametrize(
    ("query", "name"),
    [("SAVEPOINT `s1`", "s1"), ("ROLLBACK TO `S1`", "s1"), ("ROLLBACK TO SAVEPOINT `a``b`", "a`b"),
     ("savepoint x", "x"), ("ROLLBACK WORK TO sp_2", "sp_2")],
)  # fmt: skip
def test_savepoint_names_as_mariadb_writes_them(query: str, name: str) -> None:
    assert savepoint_name(query) == name


def test_a_sequence_number_that_goes_back_is_a_changed_history() -> None:
    state = TransactionState(start(), AckFrontier())
    state.begin(gtid(3, 8))  # domain 3 was at 7
    state.commit(header(300), {})
    with pytest.raises(TerminalError, match="does not follow 3-1-8 in domain 3"):
        state.begin(gtid(3, 8))
    state.begin(gtid(5, 1))  # a new domain starts anywhere


def test_history_behind_names_each_domain_the_server_lacks() -> None:
    assert history_behind("0-1-10,3-2-7", "0-1-12,3-2-7") == []
    assert history_behind("", "0-1-3") == []
    assert history_behind("0-1-10,3-2-7", "0-1-4") == [
        "domain 0: the checkpoint is at 0-1-10, the server's binlog ends at 0-1-4",
        "domain 3: the checkpoint is at 3-2-7, the server's binlog has no such domain",
    ]
