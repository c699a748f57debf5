"""The current state of one HBase row, kept outside HBase (pure; used by the Delta state sink, and
by the JSON codec for an event's `after`).

A row's state is the set of cells that can still matter, under HBase's own rules:

- put versions no delete marker masks, at most `retained_versions` per column (newest by
  timestamp; two puts of the same column and timestamp: the later one in the log wins, as in
  HBase). Readers see the newest `max_versions` of them; the older ones are kept because a
  version Delete of a newer put reveals them, whichever batch that Delete arrives in;
- delete markers (tombstones): the newest DeleteFamily per family, the newest DeleteColumn per
  column, every DeleteFamilyVersion and every version Delete. A marker masks matching puts
  whenever they arrive, before or after it, exactly as HBase does until a major compaction.

Merging is a pure function of the two cell sets, so it is idempotent and order-independent:
applying a batch twice, or old changes after new ones, gives the same state. That is what makes
the Delta current-state table exactly-once in effect under replays.

The reference is HBase reading all the changes before any flush or compaction (a flush applies
the family's VERSIONS and drops older versions for good, so HBase's own answer to "delete the
newest version" depends on flush timing). Exactness limit (docs/pipeline.md): the state equals
that reading for any batching while no column has more than `retained_versions` unmasked
versions at once; beyond that the oldest are dropped, as a flush would.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from cdcflow.events.cells import CellType

Pos = tuple[int, ...]


@dataclass(frozen=True, order=True)
class StateCell:
    """A put version or a delete marker; `qualifier` is b"" for family-level markers."""

    family: bytes
    qualifier: bytes
    ts: int
    type: CellType
    value: bytes = b""
    pos: Pos = ()


@dataclass
class RowState:
    puts: list[StateCell] = field(default_factory=list)  # newest first within each column
    tombstones: list[StateCell] = field(default_factory=list)

    @property
    def exists(self) -> bool:
        """Whether HBase would return the row (it has at least one visible cell)."""
        return bool(self.puts)

    def newest(self) -> dict[tuple[bytes, bytes], StateCell]:
        """The visible cell of each column (what a scan with max_versions=1 returns)."""
        out: dict[tuple[bytes, bytes], StateCell] = {}
        for cell in self.puts:
            out.setdefault((cell.family, cell.qualifier), cell)
        return out

    def visible(self, max_versions: int) -> list[StateCell]:
        """The newest `max_versions` puts of each column (what a scan with that many versions returns)."""
        per_column: dict[tuple[bytes, bytes], int] = {}
        out = []
        for cell in self.puts:
            col = (cell.family, cell.qualifier)
            if per_column.get(col, 0) < max_versions:
                per_column[col] = per_column.get(col, 0) + 1
                out.append(cell)
        return out


def _masked(put: StateCell, markers: _Markers) -> bool:
    family = markers.family.get(put.family)
    column = markers.column.get((put.family, put.qualifier))
    return (
        (family is not None and put.ts <= family.ts)
        or (column is not None and put.ts <= column.ts)
        or (put.family, put.ts) in markers.family_version
        or (put.family, put.qualifier, put.ts) in markers.version
    )


def _newer(a: StateCell | None, b: StateCell) -> StateCell:
    return b if a is None or (b.ts, b.pos) > (a.ts, a.pos) else a


@dataclass
class _Markers:
    """The delete markers that matter, each kept with its own position."""

    family: dict[bytes, StateCell] = field(default_factory=dict)  # the newest DeleteFamily
    column: dict[tuple[bytes, bytes], StateCell] = field(default_factory=dict)  # the newest DeleteColumn
    family_version: dict[tuple[bytes, int], StateCell] = field(default_factory=dict)
    version: dict[tuple[bytes, bytes, int], StateCell] = field(default_factory=dict)

    def add(self, cell: StateCell) -> None:
        if cell.type is CellType.DELETE_FAMILY:
            self.family[cell.family] = _newer(self.family.get(cell.family), cell)
        elif cell.type is CellType.DELETE_COLUMN:
            col = (cell.family, cell.qualifier)
            self.column[col] = _newer(self.column.get(col), cell)
        elif cell.type is CellType.DELETE_FAMILY_VERSION:
            key = (cell.family, cell.ts)
            self.family_version[key] = _newer(self.family_version.get(key), cell)
        elif cell.type is CellType.DELETE:
            vkey = (cell.family, cell.qualifier, cell.ts)
            self.version[vkey] = _newer(self.version.get(vkey), cell)

    def cells(self) -> list[StateCell]:
        def in_family(c: StateCell) -> bool:
            family = self.family.get(c.family)
            return family is not None and c.ts <= family.ts

        def in_column(c: StateCell) -> bool:
            column = self.column.get((c.family, c.qualifier))
            return column is not None and c.ts <= column.ts

        out = [*self.family.values(), *self.column.values()]
        # A version marker inside a family or column marker's range adds nothing.
        out += [c for c in self.family_version.values() if not in_family(c)]
        out += [c for c in self.version.values() if not (in_family(c) or in_column(c))]
        return sorted(out)


DEFAULT_RETAINED_VERSIONS = 8


def merge(state: RowState, cells: Iterable[StateCell], retained_versions: int = DEFAULT_RETAINED_VERSIONS) -> RowState:
    """The state after `cells` (any order, duplicates allowed) were applied on top of `state`."""
    if retained_versions < 1:
        raise ValueError("retained_versions must be at least 1")
    markers = _Markers()
    puts: dict[tuple[bytes, bytes, int], StateCell] = {}
    for cell in [*state.tombstones, *state.puts, *cells]:
        if cell.type is CellType.PUT:
            key = (cell.family, cell.qualifier, cell.ts)
            held = puts.get(key)
            if held is None or cell.pos > held.pos:
                puts[key] = cell
        else:
            markers.add(cell)
    kept: list[StateCell] = []
    per_column: dict[tuple[bytes, bytes], int] = {}
    for put in sorted(puts.values(), key=lambda c: (c.family, c.qualifier, -c.ts)):
        if _masked(put, markers):
            continue
        col = (put.family, put.qualifier)
        if per_column.get(col, 0) < retained_versions:
            per_column[col] = per_column.get(col, 0) + 1
            kept.append(put)
    return RowState(kept, markers.cells())
