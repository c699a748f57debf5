"""One ReplicateWALEntry call → change events → Kafka; success only after every acknowledgement."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

from cdcflow.clients.kafka.producer import AsyncProducer, OutRecord
from cdcflow.events.cells import Cell
from cdcflow.events.json_codec import encode
from cdcflow.protocols.hbase.wal import decode_replicate_call
from cdcflow.sources.hbase.changes import row_changes
from cdcflow.sources.hbase.routing import Router

log = logging.getLogger(__name__)


@dataclass
class CallStats:
    entries: int = 0
    rows: int = 0
    cells: int = 0
    bytes: int = 0
    skipped_entries: int = 0
    oldest_write_ms: int | None = None


class ReplicationHandler:
    def __init__(
        self,
        producer: AsyncProducer,
        router: Router,
        source_name: str,
        skip_edits_before_ms: int | None = None,
    ) -> None:
        self.producer = producer
        self.router = router
        self.source_name = source_name
        self.skip_before = skip_edits_before_ms

    def to_records(self, param: bytes, cell_block: bytes, stats: CallStats) -> list[OutRecord]:
        """Pure part of a call: decode, filter, route, encode. Raises on anything undecodable."""
        call = decode_replicate_call(param, cell_block)
        records: list[OutRecord] = []
        for entry in call.entries:
            stats.entries += 1
            if self.skip_before is not None and entry.write_time_ms < self.skip_before:
                stats.skipped_entries += 1
                continue
            route = self.router.route(entry.table)
            if route is None:
                stats.skipped_entries += 1
                continue
            if stats.oldest_write_ms is None or entry.write_time_ms < stats.oldest_write_ms:
                stats.oldest_write_ms = entry.write_time_ms
            keep_all = route.keeps_everything
            for event in row_changes(entry, self.source_name):
                cells: tuple[Cell, ...] = event.cells or ()
                kept = cells if keep_all else tuple(c for c in cells if route.keep(c))
                if not kept:
                    continue
                if len(kept) != len(cells):
                    event = replace(event, cells=kept)
                value = encode(event, route.hints)
                stats.rows += 1
                stats.cells += len(kept)
                stats.bytes += len(value)
                records.append(OutRecord(route.topic, event.key, value))
        return records

    async def replicate(self, param: bytes, cell_block: bytes) -> CallStats:
        stats = CallStats()
        started = time.monotonic()
        records = self.to_records(param, cell_block, stats)
        await self.producer.send_all(records)
        log.debug(
            "call: %d entries, %d rows, %d cells acknowledged in %.1f ms",
            stats.entries, stats.rows, stats.cells, (time.monotonic() - started) * 1000,
        )  # fmt: skip
        return stats
