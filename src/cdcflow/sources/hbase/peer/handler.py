"""One ReplicateWALEntry call → change events → Kafka; success only after every acknowledgement."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from cdcflow.clients.kafka import KafkaTarget, create_topic, topic_config
from cdcflow.clients.kafka.producer import AsyncProducer, DeliveryFailed, OutRecord
from cdcflow.errors import TerminalError
from cdcflow.events import oversize
from cdcflow.events.cells import Cell
from cdcflow.events.json_codec import ValueHints, encode
from cdcflow.events.model import ChangeEvent
from cdcflow.protocols.hbase.wal import WalEntry, decode_replicate_call
from cdcflow.sources.hbase import native_records
from cdcflow.sources.hbase.changes import row_changes
from cdcflow.sources.hbase.routing import Route, Router

log = logging.getLogger(__name__)

# Events encoded larger than this keep their ChangeEvent until the topic's limit is known, so they can
# still be split. Below any sensible topic limit (Kafka's default is 1 MB).
_KEEP_EVENT_ABOVE = 128 * 1024
# Room in a record for its key, headers and batch framing, below the topic's max.message.bytes.
_RECORD_OVERHEAD = 16 * 1024


NO_CLUSTER = uuid.UUID(int=0)


class OversizeRefused(TerminalError):
    """hbase.oversize is 'refuse': the call is answered with an error until the limit is raised."""


@dataclass
class CallStats:
    entries: int = 0
    rows: int = 0
    cells: int = 0
    bytes: int = 0
    skipped_entries: int = 0
    oversize: int = 0
    oldest_write_ms: int | None = None
    # The cluster that shipped each entry (last of its cluster_ids; the nil UUID when it has none).
    shipping_clusters: set[uuid.UUID] = field(default_factory=set)


@dataclass
class DecodedCall:
    """What the pure part of a call produced: the records, and the events of the large ones."""

    records: list[OutRecord]
    large: dict[int, tuple[ChangeEvent, ValueHints]] = field(default_factory=dict)
    path: Literal["native", "python"] = "python"  # which code decoded and encoded the call

    @property
    def footprint(self) -> int:
        """Bytes this call holds in memory while it waits for Kafka: each record's key and value twice (ours,
        and the producer's copy until it is acknowledged), and the objects around them."""
        return sum(2 * (len(r.value or b"") + len(r.key or b"")) + 200 for r in self.records)


@dataclass(frozen=True)
class OversizePolicy:
    max_record_bytes: int = 8 * 2**20
    action: Literal["split", "refuse"] = "split"
    topic: str = "cdcflow-hbase-oversize"
    after_base64: bool = False


@dataclass(frozen=True)
class _Oversized:
    """A record too large for its topic: its parts, and what its marker needs once they are in Kafka."""

    index: int  # in the call's records
    event: ChangeEvent
    cut: oversize.Cut
    limit: int
    encoder: Callable[[ChangeEvent], bytes]


class TopicLimits:
    """Creates each topic once (max.message.bytes above max_record_bytes) and learns the largest event
    it takes. Blocking Kafka admin calls: run `ensure` off the event loop."""

    def __init__(self, bootstrap: KafkaTarget, max_record_bytes: int, partitions: int = -1) -> None:
        self.bootstrap = bootstrap
        self.max_record_bytes = max_record_bytes
        self.partitions = partitions  # -1: the broker's num.partitions
        self._limits: dict[str, int] = {}
        self._lock = threading.Lock()  # concurrent calls for a new topic: one creates it, the others wait

    def limit(self, topic: str) -> int:
        return self._limits.get(topic, self.max_record_bytes)

    def known(self, topic: str) -> bool:
        return topic in self._limits

    def ensure(self, topic: str) -> int:
        with self._lock:
            return self._ensure(topic)

    def _ensure(self, topic: str) -> int:
        if topic not in self._limits:
            create_topic(self.bootstrap, topic, partitions=self.partitions,
                         config={"max.message.bytes": str(self.max_record_bytes + 64 * 1024)})  # fmt: skip
            topic_max = int(topic_config(self.bootstrap, topic, "max.message.bytes") or self.max_record_bytes)
            self._limits[topic] = min(self.max_record_bytes, topic_max - _RECORD_OVERHEAD)
            log.info("topic %s takes events up to %d bytes", topic, self._limits[topic])
        return self._limits[topic]

    def refused(self, topic: str, size: int) -> None:
        """Kafka refused `size` bytes for `topic` as too large: take less from now on."""
        self._limits[topic] = min(self.limit(topic), size - _RECORD_OVERHEAD)
        log.warning("Kafka refused %d bytes for %s as too large; events above %d bytes are split from now on",
                    size, topic, self._limits[topic])  # fmt: skip


class ReplicationHandler:
    def __init__(
        self,
        producer: AsyncProducer,
        router: Router,
        source_name: str,
        skip_edits_before_ms: int | None = None,
        *,
        topics: TopicLimits,
        oversize: OversizePolicy = OversizePolicy(),
        native: bool = native_records.AVAILABLE,
    ) -> None:
        self.producer = producer
        self.router = router
        self.source_name = source_name
        self.skip_before = skip_edits_before_ms
        self.topics = topics
        self.oversize = oversize
        # The compiled path (native_records) serves the calls it can; these count both kinds.
        self.native = native
        self.native_calls = 0
        self.python_calls = 0

    def to_records(self, param: bytes, cell_block: bytes, stats: CallStats) -> DecodedCall:
        """Pure part of a call: decode, filter, route, encode. Raises on anything undecodable."""
        if self.native and not self.oversize.after_base64:
            fast = native_records.records(param, cell_block, self.router, self.source_name, self.skip_before,
                                          _KEEP_EVENT_ABOVE, NO_CLUSTER)  # fmt: skip
            if fast is not None:
                self.native_calls += 1
                stats.entries += fast.entries
                stats.skipped_entries += fast.skipped_entries
                stats.rows += len(fast.records)
                stats.cells += fast.cells
                stats.bytes += fast.bytes
                stats.oldest_write_ms = fast.oldest_write_ms
                stats.shipping_clusters.update(fast.clusters)
                return DecodedCall(fast.records, path="native")
        self.python_calls += 1
        out = DecodedCall([])
        for entry, route in self.routed_entries(param, cell_block, stats):
            self._add_events(out, row_changes(entry, self.source_name), route, stats)
        return out

    def routed_entries(self, param: bytes, cell_block: bytes, stats: CallStats) -> Iterator[tuple[WalEntry, Route]]:
        """A call's WAL entries that are kept (not older than skip_edits_before, not dropped by a route), each with
        its route; every entry counted in `stats`."""
        for entry in decode_replicate_call(param, cell_block).entries:
            stats.entries += 1
            stats.shipping_clusters.add(entry.cluster_ids[-1] if entry.cluster_ids else NO_CLUSTER)
            if self.skip_before is not None and entry.write_time_ms < self.skip_before:
                stats.skipped_entries += 1
                continue
            route = self.router.route(entry.table)
            if route is None:
                stats.skipped_entries += 1
                continue
            if stats.oldest_write_ms is None or entry.write_time_ms < stats.oldest_write_ms:
                stats.oldest_write_ms = entry.write_time_ms
            yield entry, route

    def encode_events(self, events: Iterable[ChangeEvent], route: Route, stats: CallStats) -> DecodedCall:
        """Events made elsewhere (the backfill's rows) → records, exactly as a call's events become them."""
        out = DecodedCall([])
        self._add_events(out, events, route, stats)
        return out

    def _add_events(self, out: DecodedCall, events: Iterable[ChangeEvent], route: Route, stats: CallStats) -> None:
        """Filter each event's cells by the route, encode, and remember the large ones (they may need a split)."""
        keep_all = route.keeps_everything
        after_base64 = self.oversize.after_base64
        for event in events:
            cells: tuple[Cell, ...] = event.cells or ()
            kept = cells if keep_all else tuple(c for c in cells if route.keep(c))
            if not kept:
                continue
            if len(kept) != len(cells):
                event = replace(event, cells=kept)
            value = encode(event, route.hints, after_base64=after_base64)
            stats.rows += 1
            stats.cells += len(kept)
            stats.bytes += len(value)
            if len(value) > _KEEP_EVENT_ABOVE:
                out.large[len(out.records)] = (event, route.hints)
            out.records.append(OutRecord(route.topic, event.key, value))

    def fit(self, decoded: DecodedCall, stats: CallStats) -> tuple[list[_Oversized], list[OutRecord]]:
        """(oversized, records): records too large for their topic are cut into parts, their marker made once
        the parts are in Kafka (or the call is refused). Pure once every topic's limit is known."""
        if not decoded.large:
            return [], decoded.records
        records = list(decoded.records)
        oversized: list[_Oversized] = []
        for i, rec in enumerate(decoded.records):
            limit = self.topics.limit(rec.topic)
            if rec.value is None or len(rec.value) <= limit:
                continue
            event, hints = decoded.large[i]
            where = (f"{event.source.db}:{event.source.table} row {event.key[:100]!r} "
                     f"region {event.source.extra.get('region')} pos {list(event.source.pos)}")  # fmt: skip
            if self.oversize.action == "refuse":
                raise OversizeRefused(f"the change of {where} is {len(rec.value)} bytes, over the {limit} bytes "
                                      f"topic {rec.topic} takes, and hbase.oversize is 'refuse'")  # fmt: skip
            cut = oversize.cut(event, rec.value, self.oversize.topic, self.topics.limit(self.oversize.topic))
            oversized.append(_Oversized(i, event, cut, limit, self._encoder(hints)))
            stats.oversize += 1
            log.warning("the change of %s is %d bytes, over the %d bytes topic %s takes: published as a marker "
                        "there and %d parts in %s", where, len(rec.value), limit, rec.topic, len(cut.parts),
                        self.oversize.topic)  # fmt: skip
        return oversized, records

    def _encoder(self, hints: ValueHints) -> Callable[[ChangeEvent], bytes]:
        def encode_like_the_event(event: ChangeEvent) -> bytes:
            return encode(event, hints, after_base64=self.oversize.after_base64)

        return encode_like_the_event

    async def deliver(self, decoded: DecodedCall, stats: CallStats) -> None:
        """Make sure the topics exist and their limits are known, split what is too large, send, wait for acks."""
        new = {r.topic for r in decoded.records if not self.topics.known(r.topic)}
        if decoded.large and self.oversize.action == "split" and not self.topics.known(self.oversize.topic):
            new.add(self.oversize.topic)
        for topic in sorted(new):
            await asyncio.to_thread(self.topics.ensure, topic)
        oversized, records = self.fit(decoded, stats)
        try:
            for big in oversized:  # parts acknowledged first: the marker says where they are
                key = big.cut.info["id"].encode()
                located = await self.producer.send_all(
                    [OutRecord(self.oversize.topic, key, p) for p in big.cut.parts], locate=True
                )
                rec = records[big.index]
                records[big.index] = OutRecord(
                    rec.topic, rec.key, oversize.marker(big.event, big.cut, big.limit, located, big.encoder)
                )
            await self.producer.send_all(records)
        except DeliveryFailed as exc:
            if exc.too_large:  # the topic takes less than it said: split at the size it refused next time
                self.topics.refused(exc.topic, exc.size)
            raise
