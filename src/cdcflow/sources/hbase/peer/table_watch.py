"""HBase tables truncated, or deleted and created again: noticed from hbase:meta, published as op t events.

HBase writes nothing to the WAL when a table is truncated or deleted (and created again), so no replication
peer hears of it. Every `hbase.table_watch_s` seconds the peer reads hbase:meta (one scan, nothing installed
in HBase) and compares each table's region ids (the time the master made each region) with its last look:

- a table none of whose regions it saw last time is a candidate. The source settles it: when the table
  shows no cell older than its regions were made (a scan with that time range, which HBase answers
  from file metadata), every cell written before then is gone, and an op t event says so, with
  `truncate.before_ts` that time. Splits and merges make new regions too, but their daughters hold the
  parents' cells, so the scan finds one and nothing is published;
- a table gone from hbase:meta is published as dropped (`cause: drop`: sinks follow their on_drop option);
  created again later, it is a candidate like the others. HBase's truncate takes the table out of hbase:meta
  and makes it anew, so a look in between (seen under load, when the truncate took 2 s) publishes a drop and
  the next one the truncate: both true of the source at the time, and with on_drop `keep` only the truncate
  empties the sinks.

The event goes to every partition of the table's topic. Sinks apply it by cell timestamp, not by arrival:
every cell older than `before_ts` is gone, including changes written before the truncate that reach them
later (replication behind, or a replay). A truncate is published up to `table_watch_s` after it happened
(plus the meta scan); a cdcflow instance that was not running at the time does not notice it (it has no
earlier look to compare with). Several instances each publish it: sinks apply it once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from cdcflow.clients.hbase import NativeHBaseClient
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.sources.hbase.changes import split_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Emptied:
    table: str  # "namespace:qualifier"
    cause: str  # "truncate" (regions made anew, nothing older left) or "drop" (gone from hbase:meta)
    before_ts: int  # every cell older than this (ms) is gone


class TableWatch:
    """hbase:meta's region ids compared with the last look (pure: the caller reads meta and checks)."""

    def __init__(self) -> None:
        self._seen: dict[str, frozenset[int]] | None = None
        self._dropped: set[str] = set()

    def look(self, regions: dict[str, frozenset[int]], now_ms: int) -> tuple[list[tuple[str, int]], list[Emptied]]:
        """(candidates: (table, when its oldest regions were made), tables dropped since the last look remembered).
        Nothing is remembered until `remember`: a round whose events could not be published is looked at again."""
        if self._seen is None:
            return [], []
        seen = self._seen
        candidates = [
            (table, min(ids))
            for table, ids in sorted(regions.items())
            if ids and ((table in seen and not (seen[table] & ids)) or table in self._dropped)
        ]
        dropped = [Emptied(table, "drop", now_ms) for table in sorted(set(seen) - set(regions))]
        return candidates, dropped

    def remember(self, regions: dict[str, frozenset[int]]) -> None:
        if self._seen is not None:
            self._dropped = (self._dropped | (set(self._seen) - set(regions))) - set(regions)
        self._seen = dict(regions)


def truncate_event(source_name: str, cluster_id: str, emptied: Emptied) -> ChangeEvent:
    """The op t event of an emptied table: no row, no cells; its position and time are `before_ts`."""
    namespace, qualifier = split_table(emptied.table)
    source = SourceInfo("hbase", source_name, namespace, qualifier, emptied.before_ts, (emptied.before_ts, 0),
                        extra={"region": "", "cluster_id": cluster_id})  # fmt: skip
    return ChangeEvent(key=b"", op=Op.TRUNCATE, source=source, cells=(),
                       truncate={"cause": emptied.cause, "before_ts": emptied.before_ts})  # fmt: skip


def emptied_tables(watch: TableWatch, client: NativeHBaseClient) -> tuple[dict[str, frozenset[int]], list[Emptied]]:
    """One look at hbase:meta, and the source's answer for each candidate (blocking: run it in a thread):
    (the regions seen, to remember once the events are published; the tables emptied)."""
    regions = client.region_ids()
    candidates, dropped = watch.look(regions, int(time.time() * 1000))
    found = list(dropped)
    for table, made_ms in candidates:
        if client.holds_cells_before(table, made_ms):
            log.info("%s: every region is new (split or merged) and still holds older cells: not emptied", table)
        else:
            found.append(Emptied(table, "truncate", made_ms))
    return regions, found


async def watch_tables(
    interval_s: float,
    client_factory: Callable[[], NativeHBaseClient],
    publish: Callable[[Emptied], Awaitable[None]],
) -> None:
    """Look at hbase:meta every `interval_s` and publish what was emptied. A round that fails (the source
    cluster or Kafka unreachable) remembers nothing: the next one compares with the same earlier look."""
    watch = TableWatch()
    client: NativeHBaseClient | None = None
    while True:
        try:
            if client is None:
                client = await asyncio.to_thread(client_factory)
            regions, emptied = await asyncio.to_thread(emptied_tables, watch, client)
            for table in emptied:
                await publish(table)
            watch.remember(regions)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("looking for truncated or deleted HBase tables failed (%s: %s); again in %.0f s",
                        type(exc).__name__, exc, interval_s)  # fmt: skip
            if client is not None:
                await asyncio.to_thread(client.close)
                client = None
        await asyncio.sleep(interval_s)
