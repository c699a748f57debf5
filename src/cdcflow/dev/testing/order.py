"""Per-row order of HBase change events in Kafka, as a consumer without deduplication sees it."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol


class _Record(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


def assert_row_order(records: Iterable[_Record]) -> None:
    """What a consumer applying records in partition order without dedup would see must end right.

    Per row and partition: positions increase, except for replays. A replay (HBase resending a call
    after an error) starts at a position already seen, repeats only positions already seen, and must
    climb back to the highest position before anything new comes; no row may end inside a replay. A
    stale copy landing after newer changes (a timed-out call's records delivered late) breaks this.
    Raises AssertionError naming the row and offset.
    """
    partitions: dict[bytes | None, set[int]] = defaultdict(set)
    state: dict[tuple[int, bytes | None], tuple[tuple[int, ...], tuple[int, ...] | None]] = {}
    seen: dict[tuple[int, bytes | None], set[tuple[str, tuple[int, ...]]]] = defaultdict(set)
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        doc = json.loads(r.value or b"{}")
        region, pos = doc["source"]["region"], tuple(doc["source"]["pos"])
        where = (r.partition, r.key)
        partitions[r.key].add(r.partition)
        top, replay_to = state.get(where, ((), None))
        if replay_to is None:
            if pos < top:
                if (region, pos) not in seen[where]:
                    raise AssertionError(f"row {r.key!r}: new pos {pos} after {top} (offset {r.offset}): a late record")
                replay_to = top
        else:
            if pos > replay_to:
                raise AssertionError(f"row {r.key!r}: pos {pos} while replaying up to {replay_to} (offset {r.offset})")
            if (region, pos) not in seen[where]:
                raise AssertionError(f"row {r.key!r}: unseen pos {pos} inside a replay (offset {r.offset})")
            if pos == replay_to:
                replay_to = None
        seen[where].add((region, pos))
        state[where] = (max(top, pos), replay_to)
    stuck = {k: v for k, v in state.items() if v[1] is not None}
    if stuck:
        raise AssertionError(
            f"{len(stuck)} row(s) end inside a replay of older positions, e.g. {next(iter(stuck.items()))}"
        )
    if not all(len(p) == 1 for p in partitions.values()):
        raise AssertionError("a row spread over several partitions")
