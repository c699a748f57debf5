"""The per-cell row state behind the Delta current-state sink and HBase events' `after` (cdcflow.events.row_state)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.dev.testing import soak_size
from cdcflow.events.cells import CellType, column_name, from_string_binary, string_binary
from cdcflow.events.row_state import RowState, StateCell, merge

# 1,500 generated batches per property in make test (a few seconds each), 5,000 in make soak (13-28 s each in CI runs).
MERGE_EXAMPLES = soak_size(1500, 5000)

P, D, DC, DF, DFV = (CellType.PUT, CellType.DELETE, CellType.DELETE_COLUMN, CellType.DELETE_FAMILY,
                     CellType.DELETE_FAMILY_VERSION)  # fmt: skip


def put(q: bytes, ts: int, v: bytes, pos: int = 0, f: bytes = b"cf") -> StateCell:
    return StateCell(f, q, ts, P, v, (pos,))


def marker(t: CellType, ts: int, q: bytes = b"", f: bytes = b"cf") -> StateCell:
    return StateCell(f, q, ts, t, b"", (0,))


def visible(state: RowState) -> dict[tuple[bytes, bytes], tuple[int, bytes]]:
    return {k: (c.ts, c.value) for k, c in state.newest().items()}


def test_newer_put_wins_and_a_replay_changes_nothing() -> None:
    s = merge(RowState(), [put(b"a", 10, b"new", 2)])
    older = merge(s, [put(b"a", 5, b"old", 1), put(b"a", 10, b"new", 2)])
    assert visible(older) == {(b"cf", b"a"): (10, b"new")}  # the older version is kept below it
    assert merge(older, [put(b"a", 5, b"old", 1), put(b"a", 10, b"new", 2)]) == older


def test_same_timestamp_later_position_wins_in_any_order() -> None:
    a, b = put(b"a", 7, b"first", 1), put(b"a", 7, b"second", 2)
    assert visible(merge(RowState(), [a, b])) == visible(merge(RowState(), [b, a])) == {(b"cf", b"a"): (7, b"second")}


def test_deletes_leave_tombstones_that_mask_late_replays() -> None:
    s = merge(RowState(), [put(b"a", 5, b"v"), marker(DF, 6)])
    assert not s.exists and s.tombstones == [marker(DF, 6)]
    # the put replayed after its delete stays deleted; a newer put shows
    s = merge(s, [put(b"a", 5, b"v"), put(b"b", 9, b"w")])
    assert visible(s) == {(b"cf", b"b"): (9, b"w")}


def test_every_delete_type() -> None:
    base = [put(b"a", t, b"a%d" % t) for t in (1, 2, 3)] + [put(b"b", t, b"b%d" % t) for t in (1, 2, 3)]
    assert visible(merge(RowState(), [*base, marker(D, 3, b"a")], 3))[(b"cf", b"a")] == (2, b"a2")
    assert visible(merge(RowState(), [*base, marker(DC, 3, b"a")], 3)).keys() == {(b"cf", b"b")}
    assert visible(merge(RowState(), [*base, marker(DFV, 3)], 3)) == {
        (b"cf", b"a"): (2, b"a2"),
        (b"cf", b"b"): (2, b"b2"),
    }
    assert visible(merge(RowState(), [*base, marker(DF, 2)], 3)) == {
        (b"cf", b"a"): (3, b"a3"),
        (b"cf", b"b"): (3, b"b3"),
    }
    # another family is untouched
    assert visible(merge(RowState(), [put(b"a", 1, b"x", f=b"cg"), marker(DF, 9)])) == {(b"cg", b"a"): (1, b"x")}


def test_retained_versions_are_capped_per_column_and_readers_see_max_versions() -> None:
    s = merge(RowState(), [put(b"a", t, b"%d" % t) for t in range(10)], retained_versions=3)
    assert [c.ts for c in s.puts] == [9, 8, 7]
    assert [c.ts for c in s.visible(2)] == [9, 8]


def test_a_version_delete_in_a_later_batch_reveals_the_version_below() -> None:
    """[put@5, put@3] then [Delete@5] must equal all three at once (put@3 visible),
    also when readers see one version only."""
    batched = merge(merge(RowState(), [put(b"a", 5, b"five", 1), put(b"a", 3, b"three", 2)]), [marker(D, 5, b"a")])
    at_once = merge(RowState(), [put(b"a", 5, b"five", 1), put(b"a", 3, b"three", 2), marker(D, 5, b"a")])
    assert batched == at_once
    assert visible(batched) == {(b"cf", b"a"): (3, b"three")}


def test_column_names_have_one_unambiguous_spelling() -> None:
    assert string_binary(b"ab\x00\\\xff") == "ab\\x00\\x5C\\xFF"
    assert column_name(b"cf", b"name") == "cf:name"
    # the byte 0xFF and the four characters "\xff" are two different columns
    assert column_name(b"cf", b"\xff") != column_name(b"cf", b"\\xff")
    assert column_name(b"cf", b"\\xff") == "cf:\\x5Cxff"
    assert column_name(b"cf", "é".encode()) == "cf:\\xC3\\xA9"


@given(st.binary(max_size=40))
def test_string_binary_reads_back(data: bytes) -> None:
    assert from_string_binary(string_binary(data)) == data


# --- properties ---------------------------------------------------------------------------

cells_strategy = st.lists(
    st.builds(
        StateCell,
        family=st.sampled_from([b"cf", b"cg"]),
        qualifier=st.sampled_from([b"a", b"b", b"c"]),
        ts=st.integers(1, 8),
        type=st.sampled_from([P, P, P, D, DC, DF, DFV]),
        value=st.binary(max_size=3),
        pos=st.tuples(st.integers(0, 50)),
    ),
    max_size=40,
)


def _normalize(cells: list[StateCell]) -> list[StateCell]:
    """Family-level markers carry no qualifier, and a position identifies one put value (as in the WAL)."""
    out = []
    for c in cells:
        if c.type in (DF, DFV):
            c = StateCell(c.family, b"", c.ts, c.type, b"", c.pos)
        elif c.type is P:
            c = StateCell(c.family, c.qualifier, c.ts, P, b"%d" % c.pos[0], c.pos)
        else:
            c = StateCell(c.family, c.qualifier, c.ts, c.type, b"", c.pos)
        out.append(c)
    return out


def reference_visible(cells: list[StateCell], max_versions: int) -> dict[tuple[bytes, bytes], list[tuple[int, bytes]]]:
    """HBase's rules applied to the whole cell set at once, with no bookkeeping to get wrong."""
    deletes = [c for c in cells if c.type is not P]

    def masked(p: StateCell) -> bool:
        for d in deletes:
            if d.family != p.family:
                continue
            if (d.type is DF and p.ts <= d.ts) or (d.type is DFV and p.ts == d.ts):
                return True
            if d.qualifier == p.qualifier and ((d.type is DC and p.ts <= d.ts) or (d.type is D and p.ts == d.ts)):
                return True
        return False

    best: dict[tuple[bytes, bytes, int], StateCell] = {}
    for p in cells:
        if p.type is P:
            k = (p.family, p.qualifier, p.ts)
            if k not in best or p.pos > best[k].pos:
                best[k] = p
    out: dict[tuple[bytes, bytes], list[tuple[int, bytes]]] = {}
    for p in sorted(best.values(), key=lambda c: -c.ts):
        if not masked(p):
            versions = out.setdefault((p.family, p.qualifier), [])
            if len(versions) < max_versions:
                versions.append((p.ts, p.value))
    return out


# Timestamps 1..8: no column can have more than 8 versions, so 8 retained versions are exact.
RETAINED = 8


def _visible(state: RowState, max_versions: int) -> dict[tuple[bytes, bytes], list[tuple[int, bytes]]]:
    got: dict[tuple[bytes, bytes], list[tuple[int, bytes]]] = {}
    for c in state.visible(max_versions):
        got.setdefault((c.family, c.qualifier), []).append((c.ts, c.value))
    return got


@settings(max_examples=MERGE_EXAMPLES, deadline=None)
@given(cells=cells_strategy, max_versions=st.integers(1, 4))
def test_merge_of_one_batch_matches_hbase_rules(cells: list[StateCell], max_versions: int) -> None:
    cells = _normalize(cells)
    at_once = merge(RowState(), cells, RETAINED)
    assert _visible(at_once, max_versions) == reference_visible(cells, max_versions)
    assert merge(at_once, cells, RETAINED) == at_once  # a replay of the same batch changes nothing


@settings(max_examples=MERGE_EXAMPLES, deadline=None)
@given(cells=cells_strategy, seed=st.integers(0, 2**32), max_versions=st.integers(1, 4))
def test_merge_is_independent_of_batch_boundaries_and_duplicates(
    cells: list[StateCell], seed: int, max_versions: int
) -> None:
    cells = _normalize(cells)
    rng = random.Random(seed)
    at_once = merge(RowState(), cells, RETAINED)
    # replayed in random batches, shuffled, with duplicates: the same state, and what HBase shows
    replay = cells + rng.sample(cells, k=len(cells) // 2)
    rng.shuffle(replay)
    state = RowState()
    while replay:
        n = rng.randint(1, 5)
        state = merge(state, replay[:n], RETAINED)
        replay = replay[n:]
    assert state == at_once
    assert _visible(state, max_versions) == reference_visible(cells, max_versions)
    assert merge(state, cells, RETAINED) == state
