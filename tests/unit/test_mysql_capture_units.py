"""Pure parts of the MySQL capture: change events from rows, the acknowledgement frontier, filters, checkpoints."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdcflow.errors import TerminalError
from cdcflow.events.json_codec import decode, encode
from cdcflow.sources.mysql.binlog.columns import LONG, VARCHAR, Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, RowsEvent
from cdcflow.sources.mysql.changes import TxnContext, key_columns, row_changes
from cdcflow.sources.mysql.checkpoint import AckFrontier, Checkpoint
from cdcflow.sources.mysql.gtid_state import format_gtid_state, parse_gtid_state
from cdcflow.sources.mysql.snapshot_driver import TableFilter

SCHEMA = TableSchema(
    table_id=7, db="shop", table="items",
    columns=(Column("b", LONG, 0, False, None), Column("a", LONG, 0, False, None), Column("v", VARCHAR, 20, False, 45)),
    primary_key=(0, 1),
)  # fmt: skip
HEADER = EventHeader(timestamp=1_700_000_000, type=24, server_id=1, size=100, log_pos=1100, flags=0)


def rows_event(kind: str, rows: list[tuple[dict[str, object] | None, dict[str, object] | None]]) -> RowsEvent:
    return RowsEvent(HEADER, kind, 7, SCHEMA, tuple(rows))


def test_update_that_changes_the_key_becomes_a_linked_delete_and_create() -> None:
    txn = TxnContext(id="0-1-9", gtid="0-1-9", file="binlog.000003", seq=9, event_index=2)
    ev = rows_event("update", [({"b": 1, "a": 2, "v": "x"}, {"b": 1, "a": 3, "v": "x"}),
                               ({"b": 5, "a": 5, "v": "p"}, {"b": 5, "a": 5, "v": "q"})])  # fmt: skip
    out = row_changes(ev, txn, "src", key_columns(SCHEMA, {}))
    assert [(e.op.value, e.key) for e in out] == [
        ("d", b'{"a":2,"b":1}'), ("c", b'{"a":3,"b":1}'), ("u", b'{"a":5,"b":5}'),
    ]  # fmt: skip
    assert out[0].pk_change == out[1].pk_change == {"old_key": {"a": 2, "b": 1}, "new_key": {"a": 3, "b": 1}}
    assert out[0].after is None and out[1].before is None and out[2].pk_change is None
    assert [e.transaction for e in out] == [{"id": "0-1-9", "order": n} for n in (1, 2, 3)]
    # position: [file index, start of the rows event, row index]
    assert [e.source.pos for e in out] == [(9, 2, 0), (9, 2, 0), (9, 2, 1)]
    assert out[2].source.extra == {"gtid": "0-1-9", "server_id": 1, "file": "binlog.000003", "position": 1000, "row": 1}
    again = decode(encode(out[0]))  # the envelope round-trips, links included
    assert again.pk_change == out[0].pk_change and again.transaction == out[0].transaction


def test_tables_without_a_primary_key_use_configured_columns_or_the_whole_row() -> None:
    no_pk = TableSchema(7, "shop", "log", SCHEMA.columns, ())
    assert key_columns(no_pk, {"shop.log": ("v",)}) == ("v",)
    assert key_columns(no_pk, {}) == ("b", "a", "v")
    assert key_columns(SCHEMA, {"shop.items": ("v",)}) == ("b", "a")  # a real primary key wins


def test_null_is_kept_distinct_from_missing() -> None:
    txn = TxnContext(id="t", gtid=None, file="binlog.000001", seq=1)
    (ev,) = row_changes(rows_event("insert", [(None, {"b": 1, "a": 1, "v": None})]), txn, "s", ("a", "b"))
    raw = orjson.loads(encode(ev))
    assert raw["after"] == {"b": 1, "a": 1, "v": None} and "v" in raw["after"]


@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=1, max_size=40), st.randoms())
def test_frontier_never_passes_an_unacknowledged_or_open_transaction(
    txns: list[tuple[int, bool]], rnd: random.Random
) -> None:
    frontier = AckFrontier()
    pending = []  # (txn index, handle) of every record sent
    handles = []
    for i, (records, committed) in enumerate(txns):
        t = frontier.begin()
        handles.append(t)
        for _ in range(records):
            frontier.sending(t)
            pending.append((i, t))
        if committed:
            frontier.commit(t, Checkpoint(gtid_state=f"0-1-{i}", file="f.000001", pos=i))
    rnd.shuffle(pending)
    acked: set[int] = set()
    counts = [r for r, _ in txns]
    done = [0] * len(txns)
    newest_seen = -1
    for i, t in pending:
        frontier.delivered(t, None)
        done[i] += 1
        cp = frontier.advance()
        if cp is not None:
            newest_seen = cp.pos
            acked.add(cp.pos)
            # everything up to and including the checkpoint is committed and fully acknowledged
            for j in range(newest_seen + 1):
                assert txns[j][1] and done[j] == counts[j]
    final = frontier.advance()
    if final is not None:
        newest_seen = final.pos
    expected = -1
    for j, (_r, committed) in enumerate(txns):
        if not committed:
            break
        expected = j
    assert newest_seen == expected


def test_a_failed_delivery_is_remembered() -> None:
    frontier = AckFrontier()
    t = frontier.begin()
    frontier.sending(t)
    frontier.commit(t, Checkpoint("0-1-1", "f.000001", 4))
    frontier.delivered(t, "topic x: broker down")
    assert frontier.failure == "topic x: broker down" and frontier.advance() is None


def test_table_filter_and_gtid_state() -> None:
    f = TableFilter(("shop.*", "crm.users"), ("shop.tmp_*",), always=("cdcflow.watermarks",))
    assert f("shop", "items") and f("crm", "users") and f("cdcflow", "watermarks")
    assert not f("shop", "tmp_1") and not f("crm", "orders") and not f("mysql", "user")
    state = parse_gtid_state("1-2-30, 0-1-100")
    assert state == {0: "0-1-100", 1: "1-2-30"} and format_gtid_state(state) == "0-1-100,1-2-30"
    with pytest.raises(TerminalError):
        parse_gtid_state("0-1")


def test_checkpoint_round_trip_and_bad_bytes() -> None:
    cp = Checkpoint("0-1-5", "binlog.000002", 777, server_id=1, ts_ms=5, snapshot={"a.b": {"done": True}})
    assert Checkpoint.from_bytes(cp.to_bytes()) == cp
    with pytest.raises(TerminalError, match="unreadable"):
        Checkpoint.from_bytes(b"{nope")
