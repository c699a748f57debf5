"""The per-row order check of the HBase fault tests must pass replays and fail late stale copies."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from cdcflow.dev.testing.order import assert_row_order

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def records(*positions: int, key: bytes = b"r") -> list[Rec]:
    return [
        Rec(0, i, key, json.dumps({"source": {"region": "a", "pos": [p, 0]}}).encode()) for i, p in enumerate(positions)
    ]


@pytest.mark.parametrize(
    "positions",
    [(1, 2, 3), (1, 2, 3, 3), (1, 2, 3, 1, 2, 3, 4), (1, 2, 2, 3), (1, 2, 3, 2, 3, 4, 5)],
    ids=["increasing", "last repeated", "whole replay", "one repeated", "partial replay"],
)
def test_in_order_and_replays_pass(positions: tuple[int, ...]) -> None:
    assert_row_order(records(*positions))


@pytest.mark.parametrize(
    ("positions", "error"),
    [
        ((1, 3, 2), "a late record"),  # never seen before, after a newer one
        ((1, 2, 3, 4, 1, 2, 3), "end inside a replay"),  # a timed-out call's copies after newer data
        ((1, 2, 3, 1, 4), "while replaying"),  # new data before the replay reached the top
    ],
)
def test_stale_copies_fail(positions: tuple[int, ...], error: str) -> None:
    with pytest.raises(AssertionError, match=error):
        assert_row_order(records(*positions))


def test_a_row_in_two_partitions_fails() -> None:
    recs = [*records(1), Rec(1, 0, b"r", records(2)[0].value)]
    with pytest.raises(AssertionError, match="several partitions"):
        assert_row_order(recs)
