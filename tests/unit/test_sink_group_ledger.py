"""The bookkeeping of sinks that share a query (pipeline/groups.py): ledgers, chunks, and the group's
checkpoint as Spark writes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdcflow.errors import ConfigError
from cdcflow.pipeline import groups
from cdcflow.pipeline.runner import group_pattern

pytestmark = pytest.mark.unit


def _write_batch(checkpoint: Path, batch: int, end: groups.Positions, committed: bool = True) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    (checkpoint / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(end)}")
    if committed:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_ledger_survives_a_round_trip_and_each_fall_behind_starts_a_new_episode(tmp_path: Path) -> None:
    ledger = groups.Ledger("g")
    groups.save_ledger(tmp_path, "s", ledger)
    assert groups.load_ledger(tmp_path, "s") == ledger and ledger.joined
    ledger.fall_behind({"t": {"0": 5}}, "its part failed")
    ledger.next_chunk, ledger.pending = 3, groups.Chunk(3, {"t": {"0": 5}}, {"t": {"0": 9}})
    groups.save_ledger(tmp_path, "s", ledger)
    back = groups.load_ledger(tmp_path, "s")
    assert back == ledger and back is not None and back.episode == 1 and not back.joined
    assert back.catch_up_query("q1") == "q1.catch-up.1"
    back.fall_behind({"t": {"0": 7}}, "again")  # a new episode: chunk ids start over under a new query id
    assert (back.episode, back.next_chunk, back.pending, back.catch_up_query("q1")) == (2, 0, None, "q1.catch-up.2")
    assert groups.load_ledger(tmp_path, "other") is None


def test_an_unreadable_ledger_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / groups.LEDGER_FILE).write_text('{"joined": true}')
    with pytest.raises(ConfigError, match=r"cdcflow-group\.json is unreadable"):
        groups.load_ledger(tmp_path, "s")


def test_batch_starts_and_the_newest_committed_batch_come_from_sparks_offset_log(tmp_path: Path) -> None:
    assert groups.newest_committed(tmp_path) is None and groups.batch_start(tmp_path, 0) == {}
    _write_batch(tmp_path, 0, {"t": {"0": 10, "1": 4}})
    _write_batch(tmp_path, 1, {"t": {"0": 12, "1": 9}})
    _write_batch(tmp_path, 2, {"t": {"0": 20, "1": 9}}, committed=False)  # planned, not applied yet
    assert groups.batch_start(tmp_path, 0) == {}  # the query's first batch reads every partition from its start
    assert groups.batch_start(tmp_path, 2) == {"t": {"0": 12, "1": 9}}
    assert groups.newest_committed(tmp_path) == (1, {"t": {"0": 12, "1": 9}})
    (tmp_path / "offsets" / "3").write_text("v1\n{}\n")
    with pytest.raises(ConfigError, match="one Kafka source"):
        groups.batch_end(tmp_path, 3)


def test_positions_compare_by_every_partition() -> None:
    a = {"t": {"0": 5, "1": 7}}
    assert groups.same_position(a, {"t": {"1": 7, "0": 5}})
    assert not groups.same_position(a, {"t": {"0": 5}})  # a partition the other lacks
    assert not groups.same_position({}, {"t": {"0": 0}})
    assert groups.reached(a, {"t": {"0": 5, "1": 6}}) and not groups.reached(a, {"t": {"0": 6}})
    assert not groups.reached(a, {"u": {"0": 0}})  # a partition it never read


def test_a_chunk_takes_at_most_the_limit_shared_by_what_each_partition_has_left() -> None:
    position = {"t": {"0": 100, "1": 0}}
    target = {"t": {"0": 400, "1": 100}, "u": {"0": 60}}
    first = {"u": {"0": 50}}  # u-0 is new to the position: it starts at its first offset
    end = groups.chunk_end(position, target, first, limit=41)
    assert groups.records_between(position, end, first) <= 41
    assert end == {"t": {"0": 130, "1": 10}, "u": {"0": 51}}  # 300, 100 and 10 left: 30, 10 and at least 1
    # chunk after chunk, the catch-up reaches the target exactly and never passes it
    steps = 0
    while not groups.reached(position, target):
        position = groups.chunk_end(position, target, first, limit=41)
        steps += 1
        assert all(position[t][p] <= o for t, ps in target.items() for p, o in ps.items())
    assert groups.same_position(position, target) and steps <= 460 // 41 + 3
    # within the limit: one chunk to the target
    assert groups.chunk_end({"t": {"0": 390, "1": 95}}, target, {"u": {"0": 58}}, 1000) == target


def test_a_group_subscribes_to_each_of_its_sinks_patterns_once_in_a_stable_order() -> None:
    assert group_pattern(["a\\..*", "a\\..*"]) == "a\\..*"
    assert group_pattern(["b\\..*", "a\\..*", "b\\..*"]) == "(?:a\\..*)|(?:b\\..*)"
