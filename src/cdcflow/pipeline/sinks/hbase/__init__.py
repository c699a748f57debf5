"""HBase sink: writes every cell with its own timestamp and exact delete type, so an HBase → HBase
copy is exact. HBase's rules make it idempotent: rewriting a cell is a no-op, and a delete marker
masks puts at or below its timestamp whichever arrives first, so replays cannot resurrect data.

A table that appears at the source while the pipeline runs must not stop the copy of the others:
a missing target table is created (the source table's families and their settings when the
source cluster can be read, else the families the events carry; replication scope 0, so the copy
is not captured again), or, with `create_tables: false`, its events go to the dead-letter topic
with the reason while the other tables keep flowing.

A source table truncated, or deleted and created again (an op t event with `truncate.before_ts`, from the
peer's look at hbase:meta) is followed by cell timestamp, not by arrival: every row of the copy gets a
DeleteFamily marker just below that time, and the sink remembers it (a file in its checkpoint folder), so a
change older than it that arrives later (replication behind, a replay) is not written either."""

from __future__ import annotations

import base64
import itertools
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from cdcflow.clients.hbase import HBaseClient, NativeHBaseClient, connect
from cdcflow.clients.hbase.admin import FOREVER, family_ttl, set_family_attributes
from cdcflow.clients.hbase.model import ColumnFamily, Delete, Mutation
from cdcflow.config.sinks import HBaseSinkOptions, SinkOptions
from cdcflow.errors import CdcflowError
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import cell_from_json
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.dead_letters import write_dead_letters
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.hbase.mutations import cell_mutations
from cdcflow.pipeline.sinks.naming import mapped_table
from cdcflow.pipeline.sinks.table_events import under_policy

log = logging.getLogger(__name__)


def target_table(options: HBaseSinkOptions, source: str | None, db: str, table: str) -> str:
    source_name = table if db == "default" else f"{db}:{table}"
    mapped = mapped_table(options.table_map, db, table, source)
    return mapped if mapped else f"{source_name}{options.table_suffix}"


def source_table(db: str, table: str) -> str:
    return table if db == "default" else f"{db}:{table}"


class HBaseSink(Sink):
    reads_events_once = True  # one job per batch; a batch with a new target reads it again (a second job)

    def __init__(self, name: str, options: SinkOptions, context: Endpoints) -> None:
        super().__init__(name, options, context)
        assert isinstance(options, HBaseSinkOptions)
        self.opts = options
        self.zk_quorum = options.zk_quorum or context.require_zk_quorum(name)
        # the source cluster, read for its families' VERSIONS and TTLs: the target's when none is known
        self.source_zk = context.zk_quorum or self.zk_quorum
        self._existing: set[str] = set()  # target tables known to exist
        self._ttl_checked: dict[str, float] = {}  # target → monotonic time its TTLs were last compared
        self._sources: dict[str, str] = {}  # target → its source table (as the executors reported it)
        self._floors: dict[str, int] | None = None  # target → every source cell older than this is gone

    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        """One Spark job in the steady state: the executors write the rows of the target tables known to exist
        and report, per target, what they saw (its source table, the families of a target not known yet, the
        newest truncate, the mutations written). Only a batch that brings a new target runs more: the driver
        creates it (or, with create_tables off, dead-letters its events) and a second job writes its rows."""
        hb = under_policy(events.where(F.col("source.connector") == "hbase"), self.opts.on_drop)
        rows = hb.select(
            F.col("source.name").alias("name"), F.col("source.db").alias("db"), F.col("source.table").alias("table"),
            F.when(F.col("op") == "t", F.col("truncate.before_ts")).alias("truncate_ts"),
            F.unbase64(F.get_json_object("key", "$.row")).alias("row"),
            F.col("source.pos").alias("pos"), "cells",
        )  # fmt: skip
        # A row's changes share a partition (envelope.dedupe); in position order they replay the source's order,
        # across regions and backfills too (a backfilled change's position is below the stream's).
        rows = rows.sortWithinPartitions("name", "db", "table", "row", "pos").drop("pos")
        try:
            # Each target's TTLs follow its source's before cells are written (a cell already past the copy's
            # TTL would be dropped at its next flush, although the source keeps it under its longer one).
            if self.opts.follow_ttl:
                self._follow_ttls({t: s for t, s in self._sources.items() if t in self._existing})
            seen = self._write(rows, frozenset(self._existing))
            self._sources.update({t: s.source for t, s in seen.items()})
            new = {t: s for t, s in seen.items() if s.missing}
            refused = self._ensure_targets({t: (s.source, s.families) for t, s in new.items()}) if new else set()
            created = set(new) - refused
            if created:  # the new tables' rows, now that they exist
                if self.opts.follow_ttl:
                    self._follow_ttls({t: self._sources[t] for t in created})
                again = self._write(rows, frozenset(created))
                for target in created:
                    seen[target].mutations = again[target].mutations if target in again else 0
        except Exception:
            # A target deleted since it was seen (or never right) is looked up, and created, again on the retry
            # instead of failing every retry of a long-running pipeline.
            self._existing.clear()
            raise
        if refused:
            self._dead_letter_refused(hb, events, {s.source_key: t for t, s in seen.items() if t in refused},
                                      batch_id)  # fmt: skip
        log.debug("sink %s: batch %d: %d mutations written", self.name, batch_id,
                  sum(s.mutations for s in seen.values()))  # fmt: skip
        # A truncate is followed after the batch's rows are written: its markers mask their older cells as
        # they mask the rows written before, and the floor kept keeps older cells of later batches out.
        truncated = {t: s.truncate_ts for t, s in seen.items() if s.truncate_ts is not None and t not in refused}
        self._raise_floors(truncated)
        for target, before_ts in sorted(truncated.items()):
            self._empty_before(target, before_ts)
            metrics.TRUNCATES.labels(self.name, target).inc()

    def _write(self, rows: DataFrame, known: frozenset[str]) -> dict[str, TargetSeen]:
        """One job: the rows of the `known` targets written (cells older than their target's truncate floor left
        out), what the executors saw of every target returned."""
        zk, opts, floors = self.zk_quorum, self.opts, self._raise_floors({})
        # Rows reach the executors' Python as Arrow batches (mapInArrow): about 3x cheaper than
        # foreachPartition's pickled Rows for these nested cells (benchmarks/README.md).
        reports = rows.mapInArrow(
            lambda batches: _apply_arrow_batches(batches, zk, opts, known, floors), TargetSeen.SCHEMA
        ).collect()
        seen: dict[str, TargetSeen] = {}
        for r in reports:
            seen.setdefault(r["target"], TargetSeen(r["source_key"], r["source"])).add(
                set(r["families"] or ()), r["truncate_ts"], r["missing"], r["mutations"]
            )
        return seen

    def _dead_letter_refused(self, hb: DataFrame, events: DataFrame, refused: dict[str, str], batch_id: int) -> None:
        """The events of targets that do not exist (create_tables off) go to the dead-letter topic."""
        target_of = F.create_map(*[F.lit(x) for kv in refused.items() for x in kv])
        isolated = hb.withColumn("_target", target_of[_source_key(F.col("source.name"), F.col("source.db"),
                                                                  F.col("source.table"))])  # fmt: skip
        isolated = isolated.where(F.col("_target").isNotNull())
        reason = F.concat(F.lit("hbase sink "), F.lit(self.name), F.lit(": target table "), F.col("_target"),
                          F.lit(" does not exist and create_tables is false"))  # fmt: skip
        write_dead_letters(isolated, F.to_json(F.struct(*[c for c in events.columns])).cast("binary"), reason,
                           batch_id, self.context, self.name)  # fmt: skip
        log.warning("sink %s: events for missing table(s) %s went to the dead-letter topic %s", self.name,
                    ", ".join(sorted(set(refused.values()))), self.context.dead_letter_topic)  # fmt: skip

    def _floors_path(self) -> Path:
        return Path(str(self.context.checkpoint_root)) / self.name / "hbase-truncates.json"

    def _raise_floors(self, truncated: Mapping[str, int]) -> dict[str, int]:
        """Every target's newest truncate, this batch's included, kept in the checkpoint folder before the batch's
        truncates are applied (a replay of the batch finds it there, or in the batch again)."""
        if self._floors is None:
            path = self._floors_path()
            self._floors = {str(k): int(v) for k, v in json.loads(path.read_text()).items()} if path.exists() else {}
        raised = {t: ts for t, ts in truncated.items() if ts > self._floors.get(t, -1)}
        if raised:
            self._floors.update(raised)
            path = self._floors_path()
            path.parent.mkdir(parents=True, exist_ok=True)
            scratch = path.with_suffix(".tmp")
            scratch.write_text(json.dumps(self._floors, sort_keys=True))
            scratch.replace(path)
        return dict(self._floors)

    def _empty_before(self, target: str, before_ts: int) -> None:
        """A DeleteFamily marker at `before_ts - 1` in every family of every row of `target`: what the source
        lost in its truncate is masked in the copy, what it got since is not."""
        client = connect(self.zk_quorum)
        started, marked = time.perf_counter(), 0
        try:
            families = [f.encode() for f in client.family_attributes(target)]
            batch: list[Mutation] = []
            # every version: a row's newest cell can be newer than the truncate and an older one not
            for cells in client.scan_rows(target, max_versions=ALL_VERSIONS):
                if any(c.timestamp < before_ts for c in cells):
                    delete = Delete(cells[0].row)
                    for family in families:
                        delete.family(family, before_ts - 1)
                    batch.append(delete.mutation)
                if len(batch) >= BATCH_MUTATIONS:
                    client.mutate_batch(target, batch)
                    marked, batch = marked + len(batch), []
            if batch:
                client.mutate_batch(target, batch)
                marked += len(batch)
        finally:
            client.close()
        log.info("sink %s: %s: source truncated at %d: %d row(s) emptied of older cells in %.1f s", self.name,
                 target, before_ts, marked, time.perf_counter() - started)  # fmt: skip

    def _ensure_targets(self, wanted: dict[str, tuple[str, set[str]]]) -> set[str]:
        """Create the missing target tables (or, when creating is off, return them)."""
        missing = {t: v for t, v in wanted.items() if t not in self._existing}
        if not missing:
            return set()
        refused: set[str] = set()
        client = connect(self.zk_quorum)
        try:
            existing = set(client.list_tables())
            for target, (source, families) in sorted(missing.items()):
                if target in existing or f"default:{target}" in existing:
                    self._existing.add(target)
                    continue
                if not self.opts.create_tables:
                    refused.add(target)
                    continue
                client.create_table(target, self._families(source, families))
                names = _family_names(families)
                log.info("sink %s: created HBase table %s for %s (families %s)", self.name, target, source,
                         ", ".join(sorted(names | set(self.opts.create_families))))  # fmt: skip
                self._existing.add(target)
        finally:
            client.close()
        return refused

    def _families(self, source: str, seen: set[str]) -> list[ColumnFamily]:
        """The source table's families with their VERSIONS (and TTL, with follow_ttl) when the source cluster
        answers, plus the families the events carry and `create_families`; replication scope 0 (not captured
        again)."""
        versions: dict[str, int] = {}
        ttls: dict[str, int | None] = {}
        try:
            src = connect(self.source_zk, op_timeout_s=10.0)
            try:
                for fam, attrs in src.family_attributes(source).items():
                    versions[fam] = int(attrs.get("VERSIONS", self.opts.create_max_versions))
                    ttls[fam] = family_ttl(attrs) if self.opts.follow_ttl else None
            finally:
                src.close()
        except (CdcflowError, OSError, ValueError) as exc:
            log.info("sink %s: the source table %s cannot be described (%s); using the events' families",
                     self.name, source, exc)  # fmt: skip
        names = set(versions) | _family_names(seen)
        names |= set(self.opts.create_families)
        return [ColumnFamily(n, versions.get(n, self.opts.create_max_versions), replication_scope=0,
                             ttl_s=ttls.get(n)) for n in sorted(names)]  # fmt: skip

    def _follow_ttls(self, targets: dict[str, str]) -> None:
        """Each target's families get their source family's TTL (cells expire in the copy as in the source),
        compared at most once a minute per table. A source that cannot be read is tried again later."""
        now = time.monotonic()
        due = {t: s for t, s in targets.items() if now - self._ttl_checked.get(t, -TTL_CHECK_S) >= TTL_CHECK_S}
        if not due:
            return
        try:
            src = NativeHBaseClient(self.source_zk, op_timeout_s=10.0)
            same = self.zk_quorum == self.source_zk
            dst = src if same else NativeHBaseClient(self.zk_quorum, op_timeout_s=10.0)
        except (CdcflowError, OSError) as exc:
            log.info("sink %s: TTLs not compared now (%s)", self.name, exc)
            return
        try:
            for target, source in sorted(due.items()):
                try:
                    wanted = {f: family_ttl(a) for f, a in src.family_attributes(source).items()}
                    have = {f: family_ttl(a) for f, a in dst.family_attributes(target).items()}
                    changes = {f: {"TTL": str(ttl if ttl is not None else FOREVER)} for f, ttl in wanted.items()
                               if f in have and have[f] != ttl}  # fmt: skip
                    if changes:
                        log.info("sink %s: %s: TTL of %s set as in %s", self.name, target,
                                 ", ".join(f"{f}={c['TTL']}" for f, c in sorted(changes.items())), source)  # fmt: skip
                        set_family_attributes(dst, target, changes)
                    self._ttl_checked[target] = now
                except (CdcflowError, OSError, ValueError) as exc:
                    log.info("sink %s: %s: TTL not compared now (%s)", self.name, target, exc)
        finally:
            if dst is not src:
                dst.close()
            src.close()


TTL_CHECK_S = 60.0
ALL_VERSIONS = 2**31 - 1  # HBase's "every version" (Integer.MAX_VALUE)


def _family_names(encoded: Iterable[str]) -> set[str]:
    """Family names from the events' base64 (HBase families are printable names)."""
    return {base64.b64decode(f).decode("utf-8", "replace") for f in encoded}


def _source_key(name: Column, db: Column, table: Column) -> Column:
    return F.concat(name, F.lit("/"), db, F.lit("."), table)


@dataclass
class TargetSeen:
    """What the executors saw of one target table in a batch."""

    SCHEMA: ClassVar[str] = ("target string, source_key string, source string, families array<string>, "
                             "truncate_ts long, missing boolean, mutations long")  # fmt: skip
    source_key: str  # "<source name>/<db>.<table>"
    source: str  # the source table's HBase name
    families: set[str] = field(default_factory=set)  # base64 family names, of a missing target only
    truncate_ts: int | None = None  # the newest truncate's before_ts
    missing: bool = False  # not known to exist: its rows were not written
    mutations: int = 0

    def add(self, families: set[str], truncate_ts: int | None, missing: bool, mutations: int) -> None:
        self.families |= families
        if truncate_ts is not None:
            self.truncate_ts = max(truncate_ts, self.truncate_ts or truncate_ts)
        self.missing = self.missing or missing
        self.mutations += mutations


def _apply_arrow_batches(
    batches: Iterable[pa.RecordBatch], zk_quorum: str, opts: HBaseSinkOptions, known: frozenset[str],
    floors: Mapping[str, int],
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """mapInArrow's function on the executor: writes a partition's rows of the `known` targets (the cells at or
    above their target's truncate floor), yields one row per target it saw (TargetSeen)."""
    seen: dict[str, TargetSeen] = {}
    targets: dict[tuple[str, str, str], str] = {}

    def writable() -> Iterator[dict[str, Any]]:
        for batch in batches:
            for r in batch.to_pylist():
                name, db, table = r["name"], r["db"], r["table"]
                target = targets.get((name, db, table))
                if target is None:
                    target = targets[(name, db, table)] = target_table(opts, name, db, table)
                s = seen.get(target)
                if s is None:
                    s = seen[target] = TargetSeen(f"{name}/{db}.{table}", source_table(db, table),
                                                  missing=target not in known)  # fmt: skip
                cells = r["cells"] or []
                if r["truncate_ts"] is not None:
                    s.add(set(), int(r["truncate_ts"]), False, 0)
                elif s.missing:
                    s.families.update(c["family"] for c in cells)
                else:
                    floor = floors.get(target)
                    if floor is not None:  # older than the target's truncate: gone at the source
                        cells = [c for c in cells if c["ts"] >= floor]
                    if cells:
                        yield {"target": target, "row": r["row"], "cells": cells}

    written: dict[str, int] = {}
    _write_partition(writable(), zk_quorum, counted=written)
    yield pa.RecordBatch.from_pylist(
        [{"target": t, "source_key": s.source_key, "source": s.source, "families": sorted(s.families),
          "truncate_ts": s.truncate_ts, "missing": s.missing, "mutations": written.get(t, 0)}
         for t, s in seen.items()],
        schema=pa.schema([("target", pa.string()), ("source_key", pa.string()), ("source", pa.string()),
                          ("families", pa.list_(pa.string())), ("truncate_ts", pa.int64()), ("missing", pa.bool_()),
                          ("mutations", pa.int64())]),
    )  # fmt: skip


# A table's pending mutations go out when either limit is reached: 2,000 per call took 4.0 s for
# 100,000 events where 500 took 7.1 s (fewer round trips); the byte bound keeps a batch of big
# cells from becoming one huge request.
BATCH_MUTATIONS = 2000
BATCH_VALUE_BYTES = 4 << 20


def _write_partition(
    rows: Iterable[Mapping[str, Any]], zk_quorum: str, batch_mutations: int = BATCH_MUTATIONS,
    batch_value_bytes: int = BATCH_VALUE_BYTES, counted: dict[str, int] | None = None,
) -> int:  # fmt: skip
    """Writes rows (target, row, cells) sorted by target, row and position; returns the number of mutations.

    The consecutive changes of one row are written as one: their cells together, where a put of the same
    column and timestamp as an earlier one replaces it (the later change wins, as in the source). Within
    one call HBase gives a row's mutations one sequence id, so two such puts sent together would not
    surely resolve that way; delete markers mask by timestamp whatever the order, so they just add up.
    `counted`, when given, gets the mutations per table."""
    client: HBaseClient | None = None  # on the executor, connected at the first row
    pending: dict[str, list[Mutation]] = {}
    pending_bytes: dict[str, int] = {}
    pending_rows: dict[str, set[bytes]] = {}
    count = 0
    try:
        for (table, row_key), changes in itertools.groupby(rows, key=lambda r: (r["target"], bytes(r["row"]))):
            if client is None:
                client = connect(zk_quorum)
            batch = pending.setdefault(table, [])
            rows_in_batch = pending_rows.setdefault(table, set())
            if row_key in rows_in_batch:  # the row again, not next to its other changes: a later call
                client.mutate_batch(table, batch)
                batch = pending[table] = []
                pending_bytes[table] = 0
                rows_in_batch.clear()
            cells = _later_puts_win([cell_from_json(row_key, c) for r in changes for c in r["cells"]])
            mutations = cell_mutations(row_key, cells)
            batch.extend(mutations)
            rows_in_batch.add(row_key)
            count += len(mutations)
            if counted is not None:
                counted[table] = counted.get(table, 0) + len(mutations)
            pending_bytes[table] = pending_bytes.get(table, 0) + sum(len(c.value) for c in cells)
            if len(batch) >= batch_mutations or pending_bytes[table] >= batch_value_bytes:
                client.mutate_batch(table, batch)
                pending[table], pending_bytes[table] = [], 0
                rows_in_batch.clear()
        for table, batch in pending.items():
            if batch and client is not None:
                client.mutate_batch(table, batch)
    finally:
        if client is not None:
            client.close()
    return count


def _later_puts_win(cells: list[Cell]) -> list[Cell]:
    """The cells in order, without a put that a later put of the same column and timestamp replaces."""
    last = {(c.family, c.qualifier, c.timestamp): i for i, c in enumerate(cells) if c.type is CellType.PUT}
    if len(last) == sum(c.type is CellType.PUT for c in cells):
        return cells
    return [c for i, c in enumerate(cells)
            if c.type is not CellType.PUT or last[(c.family, c.qualifier, c.timestamp)] == i]  # fmt: skip
