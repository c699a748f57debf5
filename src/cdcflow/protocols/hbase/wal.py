"""ReplicateWALEntry calls → WAL entries with their cells. Pure: bytes in, data out."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from cdcflow.errors import WireProtocolError
from cdcflow.events.cells import Cell
from cdcflow.protocols.hbase.cellblock import decode_cells
from cdcflow.protocols.hbase.framing import parse_message
from cdcflow.protocols.hbase.pb import wal_pb2

METAFAMILY = b"METAFAMILY"
BULK_LOAD_QUALIFIER = b"HBASE::BULK_LOAD"


@dataclass(frozen=True)
class WalEntry:
    table: str  # "ns:qualifier", or "qualifier" in the default namespace (as HBase writes it)
    region: str  # encoded region name (32 hex characters)
    sequence_id: int  # the region's log sequence number
    write_time_ms: int
    cluster_ids: tuple[uuid.UUID, ...]  # [0] = origin, [-1] = cluster that shipped it
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class ReplicationCall:
    entries: tuple[WalEntry, ...]
    replication_cluster_id: str


def cluster_uuid(u: object) -> uuid.UUID:
    """A WALKey cluster id (protobuf UUID) as a uuid.UUID."""
    msb = getattr(u, "most_sig_bits")  # noqa: B009 - protobuf field
    lsb = getattr(u, "least_sig_bits")  # noqa: B009
    return uuid.UUID(int=(msb << 64) | lsb)


def parse_replicate_request(param: bytes) -> wal_pb2.ReplicateWALEntryRequest:
    """The request message, with the checks that need no cells: counts, no pre-2.0 inline cells."""
    request = parse_message(wal_pb2.ReplicateWALEntryRequest, param)
    if any(e.associated_cell_count < 0 for e in request.entry):
        raise WireProtocolError("negative associated_cell_count")
    if any(e.key_value_bytes for e in request.entry):
        raise WireProtocolError("WALEntry.key_value_bytes (pre-2.0 sources) is not supported")
    return request


def decode_replicate_call(param: bytes, cell_block: bytes) -> ReplicationCall:
    """Decode one ReplicateWALEntry request; entry i owns the next associated_cell_count cells."""
    request = parse_replicate_request(param)
    announced = sum(e.associated_cell_count for e in request.entry)
    cells = decode_cells(cell_block, limit=announced)
    if len(cells) != announced:
        raise WireProtocolError(f"entries announce {announced} cells, the cell block holds {len(cells)}")
    entries = []
    offset = 0
    for e in request.entry:
        key = e.key
        entries.append(
            WalEntry(
                table=key.table_name.decode("utf-8", "replace"),
                region=key.encoded_region_name.decode("ascii", "replace"),
                sequence_id=key.log_sequence_number,
                write_time_ms=key.write_time,
                cluster_ids=tuple(cluster_uuid(c) for c in key.cluster_ids),
                cells=tuple(cells[offset : offset + e.associated_cell_count]),
            )
        )
        offset += e.associated_cell_count
    return ReplicationCall(tuple(entries), request.replicationClusterId)
