"""HBase backfill: what a table held before capture began, as `op: "r"` events in the stream's topics.

Hand-off (docs/hbase-capture.md, "Backfill"): the cdcflow peer exists before the read starts (added
disabled when missing, so HBase keeps every WAL from then on); each table is read from a flush
snapshot taken after that (cloned into a scratch table, because a region server scans tables, not
snapshots); the peer is enabled once every region is published. Every change after the peer was
added reaches Kafka through the peer, everything before it is in the snapshot, and the overlap is
harmless: sinks apply HBase changes per cell by timestamp, and a backfilled cell's position
`[0, snapshot_ms, chunk]` sorts below every streamed one (`[sequence id >= 1, ...]`), so on a tie (same
column and timestamp, rewritten after the snapshot) the stream wins.

The read is raw: delete markers and the versions they mask are published too, so a sink masks a put
streamed later with an older timestamp exactly as the source does.

Work is split per region of the clone (one Spark task each, `pipeline/tasks.py`); a region's progress
(the last row whose events Kafka acknowledged) goes to a compacted topic after every chunk, so a
killed backfill resumes where each region stopped. This module holds the pure parts (plan, rows →
events, progress records) and the per-region work; the CLI drives HBase admin, Spark and the hand-off.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.clients.hbase.model import TableName
from cdcflow.clients.kafka import KafkaEndpoint, create_store_topic, produce_sync, read_to_end
from cdcflow.clients.kafka.producer import AsyncProducer, DeliveryFailed, OutRecord, ProducerSettings
from cdcflow.config import HBaseSourceConfig
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.sources.hbase.changes import split_table
from cdcflow.sources.hbase.peer.handler import (
    CallStats,
    DecodedCall,
    OversizePolicy,
    ReplicationHandler,
    TopicLimits,
)
from cdcflow.sources.hbase.routing import Router

log = logging.getLogger(__name__)

# Cells per event at most: a row wider than this becomes several events (chunk index in `pos`), so no
# single event of a very wide row has to be held whole.
MAX_CELLS_PER_EVENT = 10_000
_SCRATCH_PREFIX = "cdcflow_backfill_"


class BackfillError(TerminalError):
    """A backfill that cannot go on as asked (its snapshot is gone, a table is not captured, ...)."""


# --- the plan ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TablePlan:
    table: str  # as HBase names it: "ns:t", or "t" in the default namespace
    snapshot: str
    clone: str  # the scratch table cloned from the snapshot
    snapshot_ms: int = 0  # the snapshot's creation time (0 until it is taken)
    regions: int = 0  # regions of the clone (0 until it is made)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "snapshot": self.snapshot, "clone": self.clone,
                "snapshot_ms": self.snapshot_ms, "regions": self.regions}  # fmt: skip

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> TablePlan:
        return cls(str(raw["table"]), str(raw["snapshot"]), str(raw["clone"]), int(raw["snapshot_ms"]),
                   int(raw.get("regions", 0)))  # fmt: skip


@dataclass(frozen=True)
class BackfillPlan:
    """One backfill of a set of tables; kept in the progress topic under its id."""

    backfill_id: str
    tables: tuple[TablePlan, ...]
    started_ms: int
    state: str = "reading"  # reading → published (every region acknowledged) → done (hand-off and clean-up)
    enable_peer: bool = True  # enable the peer when done (it was added disabled by this backfill)
    finished_ms: int | None = None

    def to_json(self) -> bytes:
        return orjson.dumps({
            "id": self.backfill_id, "state": self.state, "started_ms": self.started_ms,
            "finished_ms": self.finished_ms, "enable_peer": self.enable_peer,
            "tables": [t.to_json() for t in self.tables],
        })  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes) -> BackfillPlan:
        raw = orjson.loads(data)
        return cls(str(raw["id"]), tuple(TablePlan.from_json(t) for t in raw["tables"]), int(raw["started_ms"]),
                   str(raw["state"]), bool(raw.get("enable_peer", True)), raw.get("finished_ms"))  # fmt: skip


def default_backfill_id(tables: Iterable[str]) -> str:
    return "hbase:" + ",".join(sorted(tables))


def scratch_names(table: str, now_ms: int) -> tuple[str, str]:
    """(snapshot, clone table) for a backfill of `table` started at `now_ms`; the clone lives in the
    table's namespace (it needs no namespace of its own). HBase snapshot names allow [\\w-.]."""
    namespace, qualifier = split_table(table)
    stem = f"{_SCRATCH_PREFIX}{qualifier}_{now_ms}"
    clone = stem if namespace == "default" else f"{namespace}:{stem}"
    snapshot = f"{stem}_{namespace}" if namespace != "default" else stem
    return snapshot, clone


# --- progress per region ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RegionProgress:
    """How far one region of a table's clone is published: every row up to `last_row` is acknowledged."""

    rows: int = 0
    cells: int = 0
    last_row: bytes | None = None
    done: bool = False
    updated_ms: int = 0

    def to_json(self) -> bytes:
        last = None if self.last_row is None else base64.b64encode(self.last_row).decode()
        return orjson.dumps({"rows": self.rows, "cells": self.cells, "last_row": last, "done": self.done,
                             "updated_ms": self.updated_ms})  # fmt: skip

    @classmethod
    def from_json(cls, data: bytes) -> RegionProgress:
        raw = orjson.loads(data)
        last = raw.get("last_row")
        return cls(int(raw["rows"]), int(raw["cells"]), None if last is None else base64.b64decode(last),
                   bool(raw["done"]), int(raw.get("updated_ms", 0)))  # fmt: skip


def region_key(backfill_id: str, snapshot: str, start_key: bytes) -> bytes:
    """Progress key of a region: the clone's regions are fixed (nothing writes to it), so its start key
    names it across restarts."""
    return f"{backfill_id}/{snapshot}/".encode() + base64.b64encode(start_key)


def plan_key(backfill_id: str) -> bytes:
    return backfill_id.encode()


@dataclass(frozen=True)
class RegionTask:
    """One unit of work: publish one region of a table's clone, after `progress.last_row` if set."""

    backfill_id: str
    plan: TablePlan
    start_key: bytes
    end_key: bytes
    progress: RegionProgress = RegionProgress()


@dataclass
class BackfillStatus:
    """What `cdcflow hbase status` and the log show of a backfill."""

    plan: BackfillPlan
    regions: dict[str, list[RegionProgress]] = field(default_factory=dict)  # table → its regions

    @property
    def rows(self) -> int:
        return sum(p.rows for ps in self.regions.values() for p in ps)

    @property
    def cells(self) -> int:
        return sum(p.cells for ps in self.regions.values() for p in ps)

    def done_regions(self) -> int:
        return sum(p.done for ps in self.regions.values() for p in ps)

    def summary(self) -> str:
        total = sum(t.regions for t in self.plan.tables)
        return (f"backfill {self.plan.backfill_id}: {self.plan.state}, {self.done_regions()}/{total} regions done, "
                f"{self.rows} rows, {self.cells} cells published")  # fmt: skip


def read_status(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, BackfillStatus]:
    """The latest state of every backfill from the progress topic's records (key, value), oldest first."""
    latest: dict[bytes, bytes | None] = {}
    for key, value in records:
        latest[key] = value
    out: dict[str, BackfillStatus] = {}
    for key, value in latest.items():
        if value is not None and b"/" not in key:
            plan = BackfillPlan.from_json(value)
            out[plan.backfill_id] = BackfillStatus(plan)
    for key, value in latest.items():
        if value is None or b"/" not in key:
            continue
        backfill_id, snapshot, _ = key.decode().rsplit("/", 2)
        status = out.get(backfill_id)
        if status is None:
            continue
        for t in status.plan.tables:
            if t.snapshot == snapshot:
                status.regions.setdefault(t.table, []).append(RegionProgress.from_json(value))
    return out


def region_progress(records: Iterable[tuple[bytes, bytes | None]]) -> dict[bytes, RegionProgress]:
    latest: dict[bytes, RegionProgress] = {}
    for key, value in records:
        if value is not None and b"/" in key:
            latest[key] = RegionProgress.from_json(value)
    return latest


# --- rows → events (pure) ---------------------------------------------------------------------------


def row_events(
    cells: list[Cell], table: str, source_name: str, plan: TablePlan, cluster_id: str
) -> Iterator[ChangeEvent]:
    """The events of one row of a raw scan: `op: "r"`, `source.snapshot = true`, every cell as HBase
    stores it (puts and delete markers). Position `[0, snapshot_ms, chunk]`: below every streamed one.

    Two cells with the same column, timestamp and type (files not yet compacted) keep the first, which
    a raw scan returns newest first."""
    namespace, qualifier = split_table(table)
    seen: set[tuple[bytes, bytes, int, CellType]] = set()
    unique: list[Cell] = []
    for c in cells:
        ident = (c.family, c.qualifier, c.timestamp, c.type)
        if ident not in seen:
            seen.add(ident)
            unique.append(c)
    extra = {"region": f"snapshot:{plan.snapshot}", "cluster_id": cluster_id}
    for chunk, start in enumerate(range(0, len(unique), MAX_CELLS_PER_EVENT)):
        part = tuple(unique[start : start + MAX_CELLS_PER_EVENT])
        source = SourceInfo("hbase", source_name, namespace, qualifier, plan.snapshot_ms,
                            (0, plan.snapshot_ms, chunk), True, extra)  # fmt: skip
        yield ChangeEvent(part[0].row, Op.READ, source, None, None, part)


# --- one region's work (runs in a Spark task) -------------------------------------------------------


@dataclass(frozen=True)
class BackfillSettings:
    """What a task needs to do a region's work, and nothing that cannot be pickled."""

    hbase: HBaseSourceConfig
    zk_quorum: str
    kafka: KafkaEndpoint
    producer: ProducerSettings
    progress_topic: str
    cluster_id: str
    chunk_rows: int = 2000
    chunk_bytes: int = 8 * 2**20
    progress_every_s: float = 10.0


@dataclass(frozen=True)
class RegionResult:
    table: str
    start_key: bytes
    rows: int
    cells: int
    seconds: float


def publish_region(settings: BackfillSettings, task: RegionTask) -> RegionResult:
    """Scan one region of the clone raw and publish its rows, chunk by chunk; after each chunk is
    acknowledged, its last row goes to the progress topic. Raises on what retries cannot fix (the
    Spark task fails, the backfill stops, and a rerun resumes from the progress)."""
    return asyncio.run(_publish_region(settings, task))


async def _publish_region(settings: BackfillSettings, task: RegionTask) -> RegionResult:
    began = time.monotonic()
    cfg = settings.hbase
    route = Router(cfg.routes, cfg.topic_prefix).route(task.plan.table)
    if route is None:
        raise BackfillError(f"{task.plan.table} is not captured by hbase.routes: nothing to backfill")
    producer = AsyncProducer(settings.producer)
    topics = TopicLimits(settings.kafka, cfg.max_record_bytes, cfg.topic_partitions)
    handler = ReplicationHandler(producer, Router(cfg.routes, cfg.topic_prefix), cfg.name, topics=topics,
                                 oversize=OversizePolicy(cfg.max_record_bytes, cfg.oversize, cfg.oversize_topic,
                                                         cfg.after_base64))  # fmt: skip
    progress = task.progress
    key = region_key(task.backfill_id, task.plan.snapshot, task.start_key)
    client = NativeHBaseClient(settings.zk_quorum, cfg.znode_parent)
    try:
        start = task.start_key if progress.last_row is None else progress.last_row
        rows_iter = client.scan_rows(task.plan.clone, start_row=start, stop_row=task.end_key,
                                     max_versions=2**31 - 1, raw=True, batch_rows=200)  # fmt: skip
        if progress.last_row is not None:
            rows_iter = _after(rows_iter, progress.last_row)
        # One chunk in flight while the next is read: its progress is recorded once Kafka acknowledged it.
        in_flight: tuple[asyncio.Task[None], RegionProgress] | None = None
        for chunk in _chunks(rows_iter, settings.chunk_rows, settings.chunk_bytes):
            stats = CallStats()
            events = [e for row in chunk for e in row_events(row, task.plan.table, cfg.name, task.plan,
                                                             settings.cluster_id)]  # fmt: skip
            decoded = handler.encode_events(events, route, stats)
            sending = asyncio.create_task(_deliver(handler, decoded, stats, task))
            progress = RegionProgress(progress.rows + len(chunk), progress.cells + stats.cells, chunk[-1][0].row,
                                      False, int(time.time() * 1000))  # fmt: skip
            if in_flight is not None:
                await _record(producer, settings.progress_topic, key, *in_flight)
            in_flight = (sending, progress)
        if in_flight is not None:
            await _record(producer, settings.progress_topic, key, *in_flight)
        progress = RegionProgress(progress.rows, progress.cells, progress.last_row, True, int(time.time() * 1000))
        await producer.send_all([OutRecord(settings.progress_topic, key, progress.to_json())])
    finally:
        client.close()
        producer.close(10.0)
    return RegionResult(task.plan.table, task.start_key, progress.rows - task.progress.rows,
                        progress.cells - task.progress.cells, time.monotonic() - began)  # fmt: skip


async def _deliver(
    handler: ReplicationHandler, decoded: DecodedCall, stats: CallStats, task: RegionTask, tries: int = 5
) -> None:
    """Send a chunk, retrying delivery failures (a resend is a duplicate, which the sinks absorb)."""
    for attempt in range(1, tries + 1):
        try:
            await handler.deliver(decoded, stats)
            return
        except DeliveryFailed as exc:
            if attempt == tries:
                raise
            log.warning("backfill %s region %r: delivery failed (%s); sending the chunk again (%d/%d)",
                        task.plan.table, task.start_key[:40], exc, attempt, tries)  # fmt: skip
            await asyncio.sleep(min(2.0**attempt, 30.0))


async def _record(
    producer: AsyncProducer, topic: str, key: bytes, sending: asyncio.Task[None], progress: RegionProgress
) -> None:
    """Wait for a chunk's acknowledgement, then record the region's progress up to its last row."""
    await sending
    await producer.send_all([OutRecord(topic, key, progress.to_json())])


def _after(rows: Iterator[list[Cell]], last_row: bytes) -> Iterator[list[Cell]]:
    for row in rows:
        if row[0].row > last_row:
            yield row


def _chunks(rows: Iterator[list[Cell]], max_rows: int, max_bytes: int) -> Iterator[list[list[Cell]]]:
    chunk: list[list[Cell]] = []
    size = 0
    for row in rows:
        chunk.append(row)
        size += sum(len(c.value) + len(c.qualifier) + 32 for c in row)
        if len(chunk) >= max_rows or size >= max_bytes:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def check_tables(cfg: HBaseSourceConfig, tables: Iterable[str]) -> None:
    """Refuse before anything starts: a table the routes drop would publish nothing; an upsert-format source
    would get cell events in its row topics (and a snapshot's rows could land after newer reads)."""
    if cfg.output.format == "upsert":
        raise ConfigError("hbase.output.format is upsert: `cdcflow hbase backfill` publishes the cdcflow format's "
                          "cells and cannot yet publish whole rows in order with the stream's reads; backfill "
                          "with a source in the cdcflow format (docs/debezium.md, HBase sources)")  # fmt: skip
    router = Router(cfg.routes, cfg.topic_prefix)
    dropped = [t for t in tables if router.route(t) is None]
    if dropped:
        raise ConfigError(f"not captured by hbase.routes, so not backfilled: {', '.join(dropped)}")


# --- the driver: snapshot, clone, one task per region, hand-off -------------------------------------


class ProgressStore:
    """The progress topic: each backfill's plan (key = its id) and each region's progress."""

    def __init__(self, kafka: KafkaEndpoint, topic: str) -> None:
        self.kafka = kafka
        self.topic = topic

    def ensure(self) -> None:
        create_store_topic(self.kafka, self.topic, compact=True)

    def records(self) -> list[tuple[bytes, bytes | None]]:
        return [(r.key, r.value) for r in read_to_end(self.kafka, self.topic) if r.key is not None]

    def status(self) -> dict[str, BackfillStatus]:
        return read_status(self.records())

    def put_plan(self, plan: BackfillPlan) -> None:
        produce_sync(self.kafka, self.topic, [(plan_key(plan.backfill_id), plan.to_json())])


TaskRunner = Callable[[Callable[[RegionTask], RegionResult], list[RegionTask]], list[RegionResult]]


class BackfillDriver:
    """Runs one backfill to its end, or resumes it (see the module docstring for the order of steps)."""

    def __init__(self, settings: BackfillSettings, client: NativeHBaseClient, run_tasks: TaskRunner) -> None:
        self.settings = settings
        self.client = client
        self.run_tasks = run_tasks
        self.store = ProgressStore(settings.kafka, settings.progress_topic)

    def run(
        self,
        tables: list[str],
        backfill_id: str | None = None,
        *,
        again: bool = False,
        added_peer: bool = False,
        enable_peer: Callable[[], None] = lambda: None,
        keep_snapshots: bool = False,
    ) -> BackfillStatus:
        tables = [str(TableName.parse(t)).removeprefix("default:") for t in tables]
        check_tables(self.settings.hbase, tables)
        backfill_id = backfill_id or default_backfill_id(tables)
        self.store.ensure()
        known = self.store.status().get(backfill_id)
        if known is not None and known.plan.state == "done" and not again:
            log.info("%s; nothing to do (--again backfills again, from a new snapshot)", known.summary())
            return known
        if known is None or known.plan.state == "done":
            now = int(time.time() * 1000)
            plan = BackfillPlan(backfill_id, tuple(TablePlan(t, *scratch_names(t, now)) for t in tables), now,
                                enable_peer=added_peer)  # fmt: skip
            self.store.put_plan(plan)  # before any snapshot: a crash from here on leaves names to resume with
            log.info("backfill %s: tables %s", backfill_id, ", ".join(tables))
        else:
            plan = known.plan
            if sorted(t.table for t in plan.tables) != sorted(tables):
                raise BackfillError(f"backfill {backfill_id} was started for {[t.table for t in plan.tables]}, "
                                    f"not {tables}: pass another --id")  # fmt: skip
            log.info("resuming %s", known.summary())
        if plan.state == "reading":
            plan = replace(plan, tables=tuple(self._prepare(t) for t in plan.tables))
            self.store.put_plan(plan)
            tasks = self._tasks(plan)
            total = sum(t.regions for t in plan.tables)
            log.info("backfill %s: %d of %d regions to read", backfill_id, len(tasks), total)
            with _ProgressLog(self.store, backfill_id, self.settings.progress_every_s):
                results = self.run_tasks(functools.partial(publish_region, self.settings), tasks)
            rows = sum(r.rows for r in results)
            log.info("backfill %s: %d regions read, %d rows published by this run", backfill_id, len(results), rows)
            plan = replace(plan, state="published")
            self.store.put_plan(plan)
        if plan.state == "published":
            if plan.enable_peer:
                enable_peer()  # the hand-off: from here the stream carries every change
            if not keep_snapshots:
                for t in plan.tables:
                    self._drop_scratch(t)
            plan = replace(plan, state="done", finished_ms=int(time.time() * 1000))
            self.store.put_plan(plan)
        final = self.store.status()[backfill_id]
        log.info("%s", final.summary())
        return final

    def _prepare(self, t: TablePlan) -> TablePlan:
        """The table's snapshot and its clone, each made once (a resumed backfill finds them)."""
        snapshots = self.client.list_snapshots()
        if not self.client.table_exists(t.clone):
            if t.snapshot not in snapshots:
                if t.snapshot_ms:
                    raise BackfillError(f"backfill of {t.table}: its snapshot {t.snapshot} and clone {t.clone} are "
                                        "gone; start it again with --again")  # fmt: skip
                log.info("snapshot %s of %s (flushes every region)", t.snapshot, t.table)
                self.client.snapshot(t.table, t.snapshot)
                snapshots = self.client.list_snapshots()
            log.info("cloning %s into the scratch table %s", t.snapshot, t.clone)
            self.client.clone_snapshot(t.snapshot, t.clone)
        created = snapshots.get(t.snapshot, 0) or t.snapshot_ms or int(time.time() * 1000)
        return replace(t, snapshot_ms=t.snapshot_ms or created, regions=len(self.client.regions(t.clone)))

    def _tasks(self, plan: BackfillPlan) -> list[RegionTask]:
        progress = region_progress(self.store.records())
        tasks = []
        for t in plan.tables:
            for region in self.client.regions(t.clone):
                done = progress.get(region_key(plan.backfill_id, t.snapshot, region.start_key), RegionProgress())
                if not done.done:
                    tasks.append(RegionTask(plan.backfill_id, t, region.start_key, region.end_key, done))
        return tasks

    def _drop_scratch(self, t: TablePlan) -> None:
        if self.client.table_exists(t.clone):
            self.client.delete_table(t.clone)
        if t.snapshot in self.client.list_snapshots():
            self.client.delete_snapshot(t.snapshot)
        log.info("dropped the scratch table %s and snapshot %s", t.clone, t.snapshot)


class _ProgressLog:
    """Logs a backfill's progress from the progress topic every few seconds while its tasks run."""

    def __init__(self, store: ProgressStore, backfill_id: str, every_s: float) -> None:
        self.store = store
        self.backfill_id = backfill_id
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="backfill-progress", daemon=True)

    def __enter__(self) -> _ProgressLog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        began, first_rows = time.monotonic(), None
        while not self._stop.wait(self.every_s):
            try:
                status = self.store.status().get(self.backfill_id)
            except Exception as exc:  # a progress line missed is no reason to stop the backfill
                log.warning("backfill progress unreadable: %s", exc)
                continue
            if status is None:
                continue
            first_rows = status.rows if first_rows is None else first_rows
            rate = (status.rows - first_rows) / max(time.monotonic() - began, 1e-3)
            log.info("%s (%.0f rows/s)", status.summary(), rate)
