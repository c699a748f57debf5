"""The HBase capture against HBase shaped like production: a ZooKeeper of its own, HDFS, a master and three
region servers as separate processes (`cdcflow stack up hbase-cluster`). make soak only (seven more JVMs)."""

from __future__ import annotations

import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.hbase import connect
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing import soak_size
from cdcflow.dev.testing.hbase_cluster import RegionServers

from .hbase_capture import PeerSetup, Rebuilder
from .test_hbase_faults import setup_tables, writes

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not soak_size(0, 1), reason="make soak only (seven JVMs more than make test's stack)"),
]


def test_a_region_server_killed_mid_stream_has_its_queues_claimed_and_nothing_is_lost(
    kafka: dict[str, Any], tmp_path: Path
) -> None:
    """Two cdcflow instances behind one SERIAL peer; the table's regions spread over three region servers. The
    server holding most of them is SIGKILLed while writes go on and stays down: ZooKeeper expires it, the master
    reassigns its regions and a survivor claims its replication queue and ships the rest of its WALs. The table
    rebuilt from Kafka equals HBase, every row's changes in order."""
    cluster = Stack(tmp_path / "hbase-cluster")
    cluster.up(["hbase-cluster"])
    try:
        endpoints = cluster.endpoints("hbase-cluster")
        servers = RegionServers(endpoints)
        client = connect(endpoints["zk_quorum"], endpoints["znode_parent"])
        peer = PeerSetup("pc" + str(random.randrange(10**8)), endpoints, kafka, tmp_path)
        peer.write_config()
        try:
            source, target = setup_tables(client, peer)
            peer.start(0)
            peer.start(1)
            regions = client.regions(source)
            hosts = [servers.number_of(r.host, r.port) for r in regions]
            assert len(set(hosts)) >= 2, hosts  # the regions are spread
            rng = random.Random(9)
            writes(client, source, rng, 0, 300)
            stop = threading.Event()
            written = [300]

            def keep_writing() -> None:
                while not stop.is_set():
                    writes(client, source, rng, written[0], 50)
                    written[0] += 50
                    time.sleep(0.2)

            writer = threading.Thread(target=keep_writing, daemon=True)
            writer.start()
            try:
                time.sleep(3)
                victim = max(set(hosts), key=hosts.count)
                servers.kill(victim)
                servers.wait_gone(victim)
                time.sleep(20)  # the master reassigns the regions; a survivor claims the queue
            finally:
                stop.set()
                writer.join(120)
            # HBase's own account of the claim: the master's procedure that hands the dead server's replication
            # queue to a survivor finished.
            log_file = tmp_path / "hbase-cluster" / "hbase-cluster" / "hbase-cluster.log"
            claimed = re.compile(r"Finished pid=\d+, ppid=\d+, state=SUCCESS; \S*ClaimReplicationQueueRemoteProcedure")
            deadline = time.monotonic() + 180
            while not claimed.search(log_file.read_text(errors="replace")):
                assert time.monotonic() < deadline, "no region server claimed the dead server's replication queue"
                time.sleep(2)
            topic = f"{peer.name}.default.{source}"
            rebuild = Rebuilder(client, kafka["bootstrap_servers"], topic, target)
            try:
                rebuild.until_equal(source, timeout_s=300)
                rebuild.assert_row_order()
                print(f"hbase cluster: region server {victim} killed; {written[0]} mutations, "
                      f"{len(rebuild.records)} events, {rebuild.duplicates()} duplicates")  # fmt: skip
            finally:
                rebuild.close()
        finally:
            peer.stop_all()
            client.close()
    finally:
        cluster.down()
