"""Change event → HBase mutations that reproduce its cells exactly (pure).

Writing every cell with its own timestamp and delete type makes an HBase → HBase copy exact
and idempotent: HBase's own rules (a delete marker masks puts at or below its timestamp, the
same cell written twice is one cell) make replays and duplicates harmless.
"""

from __future__ import annotations

from collections.abc import Iterable

from cdcflow.clients.hbase.model import Delete, Mutation, Put
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.model import ChangeEvent

_DELETES = {
    CellType.DELETE: "column_version",
    CellType.DELETE_COLUMN: "column",
    CellType.DELETE_FAMILY: "family",
    CellType.DELETE_FAMILY_VERSION: "family_version",
}


def event_mutations(event: ChangeEvent) -> list[Mutation]:
    return cell_mutations(event.key, event.cells or ())


def cell_mutations(row: bytes, cells: Iterable[Cell]) -> list[Mutation]:
    """At most one Put and one Delete for the row, cells in WAL order within each."""
    put = Put(row)
    delete = Delete(row)
    for cell in cells:
        if cell.type is CellType.PUT:
            put.add(cell.family, cell.qualifier, cell.value, cell.timestamp)
            continue
        method = _DELETES[cell.type]
        if cell.type in (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION):
            getattr(delete, method)(cell.family, cell.timestamp)
        else:
            getattr(delete, method)(cell.family, cell.qualifier, cell.timestamp)
    return [m for m in (put.mutation, delete.mutation) if m.ops]
