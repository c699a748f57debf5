"""Which tables keep history (the Delta sink's `history` and `history_tables`), and GTIDs as positions."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cdcflow.config.sinks import DeltaStateOptions, TableHistory
from cdcflow.pipeline.sinks.delta.history.reads import gtid_position

MAX = 2**63 - 1


def test_history_per_sink_and_per_table_the_source_specific_entry_first() -> None:
    options = DeltaStateOptions(
        path="/d", history=True,
        history_tables={"shop.audit": {"enabled": False}, "east/shop.orders": {"track_history_on": ["status"]}},
    )  # fmt: skip
    assert options.history_of("west", "shop", "items") == TableHistory()
    assert options.history_of("west", "shop", "audit") is None
    assert options.history_of("east", "shop", "orders") == TableHistory(track_history_on=("status",))
    assert options.history_of("west", "shop", "orders") == TableHistory()
    only = DeltaStateOptions(path="/d", history_tables={"shop.orders": {}})
    assert only.history_of("any", "shop", "orders") == TableHistory()
    assert only.history_of("any", "shop", "items") is None


def test_bad_history_options_are_refused_naming_the_option() -> None:
    with pytest.raises(ValidationError, match=r"history_tables keys are 'db\.table'"):
        DeltaStateOptions(path="/d", history_tables={"orders": {}})
    with pytest.raises(ValidationError, match="track_history_on lists at least one column"):
        DeltaStateOptions(path="/d", history_tables={"shop.orders": {"track_history_on": []}})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        DeltaStateOptions(path="/d", history_tables={"shop.orders": {"track_history": ["a"]}})


def test_a_gtid_is_the_position_after_its_transaction() -> None:
    assert gtid_position("0-1-4711") == [4711, MAX]
    # MySQL: the executed GTID set at that point, counted (positions count the set's transactions)
    uuid_a, uuid_b = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4f22fa47-71ca-11e1-9e33-c80aa9429562"
    assert gtid_position(f"{uuid_a}:1-100,\n{uuid_b}:1-7:9") == [108, MAX]
    assert gtid_position(f"{uuid_a}:5") == [1, MAX]
    for bad in ("4711", "0-1", f"{uuid_a}:7-3", f"{uuid_a}:x"):
        with pytest.raises(ValueError):
            gtid_position(bad)
