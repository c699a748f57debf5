"""MySQL GTID sets: text and binary forms."""

from __future__ import annotations

import random

import pytest

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "a1b2c3d4-0000-11ee-8000-000000000001"


def test_text_is_normalized_like_the_server_prints_it() -> None:
    text = f" {B}:9:1-3 ,\n{A.upper()}:7-8:1-5:6 "
    s = GtidSet.parse(text)
    assert str(s) == f"{A}:1-8,{B}:1-3:9"
    assert (A, 8) in s and (A.upper(), 1) in s and (B, 4) not in s and (B, 9) in s
    assert GtidSet.parse("") == GtidSet() and not GtidSet.parse("")
    assert str(GtidSet.parse(f"{A.replace('-', '')}:1")) == f"{A}:1"


@pytest.mark.parametrize(
    "text",
    [f"{A}", f"{A}:", f"{A}:0", f"{A}:5-3", f"{A}:x", "not-a-uuid:1", f"{A}:1-{2**63}", f"{A}:1:"],
)
def test_malformed_text_is_refused_with_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError):
        GtidSet.parse(text)


def test_binary_round_trip_with_exclusive_ends() -> None:
    s = GtidSet.parse(f"{A}:1-5:7,{B}:1")
    data = s.encode()
    assert data[:8] == (2).to_bytes(8, "little")
    # A's first interval [1, 6) and second [7, 8): ends exclusive
    first = 8 + 16 + 8
    assert data[first : first + 16] == (1).to_bytes(8, "little") + (6).to_bytes(8, "little")
    assert GtidSet.decode(data) == s
    rng = random.Random(33)
    for _ in range(200):
        spans = {sid: [(a, a + rng.randrange(5)) for a in rng.sample(range(1, 1000), rng.randrange(1, 6))]
                 for sid in rng.sample([A, B], rng.randrange(1, 3))}  # fmt: skip
        s = GtidSet.of(spans)
        assert GtidSet.decode(s.encode()) == s
        assert GtidSet.parse(str(s)) == s


def test_truncated_or_padded_binary_sets_are_refused() -> None:
    data = GtidSet.parse(f"{A}:1-5:7,{B}:1").encode()
    for cut in range(len(data)):
        with pytest.raises(BinlogDecodeError):
            GtidSet.decode(data[:cut])
    with pytest.raises(BinlogDecodeError, match="left after"):
        GtidSet.decode(data + b"\x00")
    huge = (1).to_bytes(8, "little") + bytes(16) + (2**40).to_bytes(8, "little")
    with pytest.raises(BinlogDecodeError, match="do not fit"):
        GtidSet.decode(huge)
    backwards = (1).to_bytes(8, "little") + bytes(16) + (1).to_bytes(8, "little") + (5).to_bytes(8, "little") * 2
    with pytest.raises(BinlogDecodeError, match="not valid"):
        GtidSet.decode(backwards)
    tagged = ((1 << 56) | 1).to_bytes(8, "little")
    with pytest.raises(BinlogDecodeError, match="tagged"):
        GtidSet.decode(tagged)


def test_union_add_and_subset_follow_set_semantics() -> None:
    executed = GtidSet.parse(f"{A}:1-10,{B}:1-3")
    assert GtidSet.parse(f"{A}:2-4:9").issubset(executed)
    assert not GtidSet.parse(f"{A}:10-11").issubset(executed)
    assert not GtidSet.parse("c0000000-0000-0000-0000-000000000000:1").issubset(executed)
    assert str(executed.add(A, 11).add(B, 5)) == f"{A}:1-11,{B}:1-3:5"
    assert executed.union(GtidSet.parse(f"{B}:4")) == GtidSet.parse(f"{A}:1-10,{B}:1-4")


def test_a_checkpoint_past_the_position_a_test_read_has_reached_it() -> None:
    from cdcflow.dev.testing.mysql import position_reached

    # MariaDB: other tests' writes move the domain's sequence past the one read
    assert position_reached("0-1-2263", "0-1-735") and position_reached("0-1-735", "0-1-735")
    assert not position_reached("0-1-700", "0-1-735") and not position_reached(None, "0-1-735")
    assert not position_reached("0-1-900", "0-1-735,3-2-7") and position_reached("3-2-9,0-1-900", "0-1-735,3-2-7")
    # MySQL: the set read inside the checkpoint's
    sid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert position_reached(f"{sid}:1-90", f"{sid}:1-40") and not position_reached(f"{sid}:1-30", f"{sid}:1-40")
