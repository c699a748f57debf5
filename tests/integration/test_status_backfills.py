"""HBase backfills on the status page (progress and completion visible): the collector reads the
backfill progress topic on the real Kafka, and the served page lists each backfill with its state, regions done
and rows, as `cdcflow hbase status` does; a finished backfill shows as done."""

from __future__ import annotations

import dataclasses
import time
import urllib.request
from typing import Any

from cdcflow.clients.kafka import KafkaEndpoint, produce_sync
from cdcflow.dev.testing import unique_name
from cdcflow.sources.hbase.backfill import BackfillPlan, ProgressStore, RegionProgress, TablePlan, region_key
from cdcflow.ui.app import StatusServer
from cdcflow.ui.collector import Collector


def test_the_status_page_lists_hbase_backfills_from_their_progress_topic(kafka: dict[str, Any]) -> None:
    ep = KafkaEndpoint.of(kafka["bootstrap_servers"])
    topic = unique_name("backfill-progress")
    store = ProgressStore(ep, topic)
    store.ensure()
    started = int(time.time() * 1000)
    plan = BackfillPlan("hbase:orders", (TablePlan("orders", "snap_o", "clone_o", started, regions=3),), started)
    store.put_plan(plan)
    produce_sync(ep, topic, [
        (region_key(plan.backfill_id, "snap_o", b""), RegionProgress(rows=700, cells=1400, done=True).to_json()),
        (region_key(plan.backfill_id, "snap_o", b"m"), RegionProgress(rows=120, cells=240).to_json()),
    ])  # fmt: skip
    collector = Collector([], kafka=ep, backfill_topic=topic, scrape_seconds=1, state_seconds=1)
    collector.read_slow()
    (shown,) = collector.status()["backfills"]
    assert (shown["id"], shown["state"], shown["tables"], shown["regions_done"], shown["regions"], shown["rows"]) == (
        "hbase:orders", "reading", "orders", 1, 3, 820)  # fmt: skip
    server = StatusServer(collector, "127.0.0.1", 0, 3600)
    server.start()
    try:
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert '<tr class="backfill" data-state="reading"><td>hbase:orders</td>' in page and ">1/3<" in page
        store.put_plan(dataclasses.replace(plan, state="done", finished_ms=started + 5000))
        collector.read_slow()
        page = urllib.request.urlopen(server.url, timeout=10).read().decode()
        assert 'data-state="done"' in page and '<span class="ok">done</span>' in page
    finally:
        server.stop()
