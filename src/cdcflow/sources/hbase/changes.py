"""WAL entries → row change events (pure). One event per run of consecutive cells of one row."""

from __future__ import annotations

from collections.abc import Iterator

from cdcflow.errors import TerminalError
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.protocols.hbase.wal import BULK_LOAD_QUALIFIER, METAFAMILY, WalEntry


class BulkLoadNotSupported(TerminalError):
    """A bulk-load marker arrived: its data lives in HFiles we cannot read, so we refuse the call."""


def split_table(table: str) -> tuple[str, str]:
    namespace, sep, qualifier = table.partition(":")
    return (namespace, qualifier) if sep else ("default", table)


def row_changes(entry: WalEntry, source_name: str) -> Iterator[ChangeEvent]:
    """Group an entry's cells by row, keeping WAL order; METAFAMILY markers are skipped.

    `pos` = [log_sequence_number, index of the row change within the entry].
    """
    namespace, table = split_table(entry.table)
    cluster = str(entry.cluster_ids[-1]) if entry.cluster_ids else ""
    index = 0
    run: list[Cell] = []
    for cell in entry.cells:
        if cell.family == METAFAMILY:
            if cell.qualifier == BULK_LOAD_QUALIFIER:
                raise BulkLoadNotSupported(
                    f"bulk load on {entry.table} region {entry.region} seq {entry.sequence_id}: "
                    "bulk-loaded HFiles are not captured; disable hbase.replication.bulkload.enabled"
                )
            continue  # flush/compaction/region-event/replication markers carry no row data
        if run and cell.row != run[0].row:
            yield _event(run, entry, namespace, table, cluster, source_name, index)
            index += 1
            run = []
        run.append(cell)
    if run:
        yield _event(run, entry, namespace, table, cluster, source_name, index)


def _event(
    cells: list[Cell], entry: WalEntry, namespace: str, table: str, cluster: str, source_name: str, index: int
) -> ChangeEvent:
    op = Op.UPDATE if any(c.type is CellType.PUT for c in cells) else Op.DELETE
    return ChangeEvent(
        key=cells[0].row,
        op=op,
        source=SourceInfo(
            connector="hbase",
            name=source_name,
            db=namespace,
            table=table,
            ts_ms=entry.write_time_ms,
            pos=(entry.sequence_id, index),
            extra={"region": entry.region, "cluster_id": cluster},
        ),
        after=None,  # for HBase the codec derives `after` from the Put cells
        cells=tuple(cells),
    )
