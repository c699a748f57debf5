"""The buffer that holds a group's rows until its end: same records back, in order, whether in memory or
spilled to a file, after any sequence of appends and cuts back to a savepoint."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.txn_buffer import GroupBuffer, HeldRecord, RecordBuffer
from cdcflow.sources.mysql.xa import HoldingKey, check_complete

pytestmark = pytest.mark.unit

records = st.builds(
    HeldRecord,
    topic=st.text(min_size=1, max_size=20),
    key=st.one_of(st.none(), st.binary(max_size=30)),
    value=st.binary(max_size=300),
    table=st.text(max_size=20),
)
operations = st.lists(
    st.one_of(st.tuples(st.just("append"), records), st.tuples(st.just("mark"), st.none()),
              st.tuples(st.just("truncate"), st.integers(0, 40)), st.tuples(st.just("read"), st.none())),
    max_size=60,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(operations, st.sampled_from([0, 200, 5000, 10**9]))
def test_buffer_behaves_like_a_list_in_memory_or_spilled(ops: list[tuple[str, object]], memory: int) -> None:
    buffer, model, marks = RecordBuffer(memory_bytes=memory), [], []
    for op, arg in ops:
        if op == "append":
            assert isinstance(arg, HeldRecord)
            buffer.append(arg)
            model.append(arg)
        elif op == "mark":
            marks.append(buffer.mark())
        elif op == "truncate":
            mark = marks[int(arg) % len(marks)] if marks else 0  # type: ignore[call-overload]
            assert buffer.truncate(mark) == max(0, len(model) - mark)
            del model[mark:]
        else:
            assert list(buffer) == model
        assert len(buffer) == len(model)
    assert list(buffer) == model
    if memory == 0 and model:
        assert buffer.spilled == len(model)
    buffer.clear()
    assert list(buffer) == []


@given(records)
def test_held_records_round_trip(record: HeldRecord) -> None:
    assert HeldRecord.from_bytes(record.to_bytes()) == record
    with pytest.raises(ValueError):
        HeldRecord.from_bytes(record.to_bytes()[:-1] if record.to_bytes() else b"x")


def test_large_spilled_records_read_back_across_read_chunks() -> None:
    buffer = RecordBuffer(memory_bytes=0)
    big = [HeldRecord("t", b"k%d" % i, bytes([i]) * (3 * 2**20 + i)) for i in range(5)]
    for r in big:
        buffer.append(r)
    assert buffer.spilled == 5 and list(buffer) == big
    buffer.truncate(2)
    buffer.append(big[4])
    assert list(buffer) == [big[0], big[1], big[4]]


def test_xa_holding_keys_and_completeness() -> None:
    key = HoldingKey("src", "X'7831',X'',1", "0-1-9", 12)
    assert HoldingKey.from_bytes(key.to_bytes()) == key
    assert HoldingKey.from_bytes(b"something else") is None
    assert check_complete("x", "0-1-9", 2, {1: b"b", 0: b"a"}) == [b"a", b"b"]
    with pytest.raises(TerminalError, match="lost rows of prepared XA transaction x"):
        check_complete("x", "0-1-9", 3, {0: b"a", 2: b"c"})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(records, max_size=4), max_size=8), st.integers(0, 9), st.integers(0, 400))
def test_a_group_buffer_keeps_the_records_of_the_first_events(events: list[list[HeldRecord]], kept: int,
                                                             memory: int) -> None:  # fmt: skip
    buffer = GroupBuffer(memory_bytes=memory)  # small budgets spill to the file
    for records_of_event in events:
        buffer.start_event()
        for record in records_of_event:
            buffer.append(record)
    expected = [r for records_of_event in events[:kept] for r in records_of_event]
    assert buffer.keep_events(kept) == sum(map(len, events)) - len(expected)
    assert list(buffer) == expected
    buffer.start_event()  # events after the cut count from there
    buffer.append(HeldRecord("t", None, b"v"))
    assert buffer.keep_events(min(kept, len(events))) == 1 and list(buffer) == expected
    buffer.clear()
