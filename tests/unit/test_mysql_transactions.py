"""The capture's transaction state machine, fed decoded events by hand (no server)."""

from __future__ import annotations

import pytest

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.events import GTID_STANDALONE, EventHeader, GtidEvent
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint
from cdcflow.sources.mysql.transactions import QueryRole, TransactionState

pytestmark = pytest.mark.unit


def header(log_pos: int, server_id: int = 1, ts: int = 1_700_000_000) -> EventHeader:
    return EventHeader(timestamp=ts, type=0, server_id=server_id, size=10, log_pos=log_pos, flags=0)


def gtid(domain: int, seq: int, standalone: bool = False, server_id: int = 1) -> GtidEvent:
    return GtidEvent(header(100, server_id), domain, seq, GTID_STANDALONE if standalone else 0)


def start() -> Checkpoint:
    return Checkpoint(gtid_state="0-1-10,3-2-7", file="mysql-bin.000004", pos=4, server_id=1, ts_ms=0)


def test_a_committed_transaction_releases_its_checkpoint_once_acknowledged() -> None:
    frontier = AckFrontier()
    state = TransactionState(start(), frontier)
    ctx = state.begin(gtid(0, 11))
    assert ctx.gtid == "0-1-11" and ctx.file == "mysql-bin.000004" and ctx.file_index == 4
    opened = state.open
    assert opened is not None
    _ctx, txn = opened
    txn.outstanding += 1  # one record sent, not yet acknowledged
    assert state.query_role("COMMIT") is QueryRole.END
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
    assert state.query_role("SAVEPOINT s1") is QueryRole.STATEMENT
    assert state.query_role("rollback") is QueryRole.END
    state.commit(header(200), {})
    state.begin(gtid(0, 12, standalone=True))
    assert state.query_role("ALTER TABLE t ADD c INT") is QueryRole.DDL


def test_rotate_moves_the_file_of_later_transactions() -> None:
    state = TransactionState(start(), AckFrontier())
    state.rotate("mysql-bin.000005")
    assert state.begin(gtid(0, 11)).file_index == 5
    assert state.commit(header(300), {}).file == "mysql-bin.000005"


def test_a_commit_without_an_open_transaction_fails_loudly() -> None:
    with pytest.raises(TerminalError, match="no open transaction"):
        TransactionState(start(), AckFrontier()).commit(header(300), {})
