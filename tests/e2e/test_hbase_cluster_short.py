"""make test's short run on HBase shaped like production: two region servers (each its own JVM, WALs on HDFS),
a SERIAL peer served by two cdcflow instances, and every region of the table moved to the other server, twice,
under a randomized workload. The table rebuilt from Kafka equals HBase and no row's changes reorder: HBase
holds a moved region's new server back until the old one has shipped the region's earlier edits. The long
scenarios (splits, merges, the balancer, a drained server, a server killed, instances killed) are in
test_hbase_cluster.py (make soak)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.hbase import region_admin as admin

from .hbase_cluster_capture import ClusterCapture

pytestmark = pytest.mark.e2e


def test_regions_moved_back_and_forth_under_a_serial_peer_keep_every_rows_order(
    kafka: dict[str, Any], tmp_path: Path
) -> None:
    with ClusterCapture(tmp_path, kafka, instances=2, region_servers=2) as run:
        client, table = run.client, run.source
        admin.set_balancer(client, False)  # only the test moves regions
        servers = admin.live_servers(client)
        run.start_writing()
        time.sleep(2)
        for _ in range(2):
            before = client.regions(table)
            for region in before:
                other = next(s for s in servers if (s.host, s.port) != (region.host, region.port))
                admin.move_region(client, region, other)
            after = run.placement()  # hbase:meta's account: every region is on the other server now
            assert all(after[r.name] != (r.host, r.port) for r in before), (before, after)
            time.sleep(2)
        run.stop_writing()
        run.verify(f"each of {len(before)} regions moved twice")
