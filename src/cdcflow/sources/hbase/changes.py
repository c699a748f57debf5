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
    # One `extra` for every event of the entry: nothing changes a SourceInfo once made.
    extra = {"region": entry.region, "cluster_id": cluster}
    seq, write_ms = entry.sequence_id, entry.write_time_ms
    index = 0
    run: list[Cell] = []
    run_row = b""
    has_put = False
    put = CellType.PUT
    for cell in entry.cells:
        if cell.family == METAFAMILY:
            if cell.qualifier == BULK_LOAD_QUALIFIER:
                raise BulkLoadNotSupported(
                    f"bulk load on {entry.table} region {entry.region} seq {entry.sequence_id}: "
                    "bulk-loaded HFiles are not captured; disable hbase.replication.bulkload.enabled"
                )
            continue  # flush/compaction/region-event/replication markers carry no row data
        if run and cell.row != run_row:
            source = SourceInfo("hbase", source_name, namespace, table, write_ms, (seq, index), False, extra)
            # For HBase the codec derives `after` from the Put cells.
            yield ChangeEvent(run_row, Op.UPDATE if has_put else Op.DELETE, source, None, None, tuple(run))
            index += 1
            run = []
            has_put = False
        if not run:
            run_row = cell.row
        run.append(cell)
        has_put = has_put or cell.type is put
    if run:
        source = SourceInfo("hbase", source_name, namespace, table, write_ms, (seq, index), False, extra)
        yield ChangeEvent(run_row, Op.UPDATE if has_put else Op.DELETE, source, None, None, tuple(run))
