"""The HBase capture's compiled hot path: a call's Kafka records straight from its bytes.

`cdcflow._native` (native/, Rust, built by `make install`) reads the cell block and writes each row
change's JSON record, byte for byte what the Python path (decode_replicate_call → row_changes →
encode) writes; tests/unit/test_native_records.py holds the two equal on generated calls. It covers
the common case only: every cell of a routed table kept, no value hints, no `after` base64. For
anything else (a column filter, hints, a record large enough to need splitting, a malformed block,
a bulk-load marker) `records` answers None and the caller runs the Python path, which builds the
events or raises the precise error.
"""

from __future__ import annotations

import logging
import time
import uuid

import orjson

from cdcflow.clients.kafka.producer import OutRecord
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.protocols.hbase.wal import cluster_uuid, parse_replicate_request
from cdcflow.sources.hbase.changes import split_table
from cdcflow.sources.hbase.routing import Router

log = logging.getLogger(__name__)

try:
    from cdcflow._native import hbase_records

    AVAILABLE = True
except ImportError:  # not built (a source install without Rust): the Python path serves every call
    AVAILABLE = False


def log_which_path() -> None:
    if AVAILABLE:
        log.info("HBase capture: the compiled hot path (cdcflow._native) serves calls of whole rows without hints")
    else:
        log.warning("HBase capture: cdcflow._native is not installed (build it with `make install`, which needs "
                    "Rust's cargo); every call takes the Python path, several times the CPU per row")  # fmt: skip


class NativeRecords:
    """The Kafka records of one call, and the figures the caller counts, when the native path applies."""

    __slots__ = ("bytes", "cells", "clusters", "entries", "oldest_write_ms", "records", "skipped_entries")

    def __init__(self) -> None:
        self.records: list[OutRecord] = []
        self.entries = 0
        self.skipped_entries = 0
        self.cells = 0
        self.bytes = 0
        self.oldest_write_ms: int | None = None
        self.clusters: set[uuid.UUID] = set()


def source_json(name: str, table: str, region: str, cluster: str, seq: int, write_ms: int) -> tuple[bytes, bytes]:
    """An entry's `source` object as the JSON codec writes it, cut around the row index of `pos`:
    head ends with `"pos":[SEQ,`, tail starts with `]`."""
    namespace, qualifier = split_table(table)
    doc = orjson.dumps({"connector": "hbase", "name": name, "db": namespace, "table": qualifier,
                        "ts_ms": write_ms, "snapshot": False, "pos": [seq, 0],
                        "region": region, "cluster_id": cluster})  # fmt: skip
    marker = b'"pos":[%d,0]' % seq
    cut = doc.index(marker) + len(marker) - 2  # at the 0
    return doc[:cut], doc[cut + 1 :]


def records(
    param: bytes, cell_block: bytes, router: Router, source_name: str, skip_before: int | None, max_record: int,
    nil_cluster: uuid.UUID,
) -> NativeRecords | None:  # fmt: skip
    """The call's records through the native path, or None when the Python path must serve it."""
    if not AVAILABLE:
        return None
    request = parse_replicate_request(param)
    out = NativeRecords()
    entries: list[tuple[int, tuple[bytes, bytes] | None]] = []
    topics: list[str] = []
    for e in request.entry:
        key = e.key
        out.entries += 1
        clusters = key.cluster_ids
        last_cluster = cluster_uuid(clusters[-1]) if clusters else None
        out.clusters.add(last_cluster if last_cluster is not None else nil_cluster)
        table = key.table_name.decode("utf-8", "replace")
        route = router.route(table)
        write_ms = key.write_time
        if (skip_before is not None and write_ms < skip_before) or route is None:
            out.skipped_entries += 1
            entries.append((e.associated_cell_count, None))
            topics.append("")
            continue
        if not route.keeps_everything or route.hints.rules:
            return None
        if out.oldest_write_ms is None or write_ms < out.oldest_write_ms:
            out.oldest_write_ms = write_ms
        region = key.encoded_region_name.decode("ascii", "replace")
        cluster = str(last_cluster) if last_cluster is not None else ""
        source = source_json(source_name, table, region, cluster, key.log_sequence_number, write_ms)
        entries.append((e.associated_cell_count, source))
        topics.append(route.topic)
    made = hbase_records(cell_block, entries, SCHEMA_ID, int(time.time() * 1000), max_record)
    if made is None:
        return None
    append = out.records.append
    cells = size = 0
    for entry_index, row, value, n_cells in made:
        append(OutRecord(topics[entry_index], row, value))
        cells += n_cells
        size += len(value)
    out.cells, out.bytes = cells, size
    return out
