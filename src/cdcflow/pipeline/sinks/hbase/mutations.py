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
    """One Put and as few Deletes as HBase allows for the row, cells in WAL order within each.

    HBase turns a Delete's DeleteFamily cell into `Delete.addFamily`, which drops the cells of
    that family added before it in the same Delete. One event can hold several mutations of a
    row (a WAL entry of a batch), so a DeleteFamily after other delete cells of its family starts
    a new Delete: every marker reaches HBase."""
    put = Put(row)
    deletes = [Delete(row)]
    families_in_delete: set[bytes] = set()
    for cell in cells:
        if cell.type is CellType.PUT:
            put.add(cell.family, cell.qualifier, cell.value, cell.timestamp)
            continue
        if cell.type is CellType.DELETE_FAMILY and cell.family in families_in_delete:
            deletes.append(Delete(row))
            families_in_delete = set()
        families_in_delete.add(cell.family)
        delete = deletes[-1]
        method = _DELETES[cell.type]
        if cell.type in (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION):
            getattr(delete, method)(cell.family, cell.timestamp)
        else:
            getattr(delete, method)(cell.family, cell.qualifier, cell.timestamp)
    return [m for m in (put.mutation, *(d.mutation for d in deletes)) if m.ops]
