"""The HBase capture against HBase shaped like production: a ZooKeeper of its own, HDFS, a master and three
region servers as separate processes (`cdcflow stack up hbase-cluster`), a SERIAL peer served by two cdcflow
instances, a randomized workload (puts with versions written out of order, deletes of every kind) writing
throughout. Each test ends with the table rebuilt from Kafka equal to HBase (every version; what deletes
masked) and every row's changes in order. make soak only (seven more JVMs; the short one of make test is
test_hbase_cluster_short.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.hbase import region_admin as admin
from cdcflow.dev.testing import soak_size
from cdcflow.errors import HBaseTerminalError

from .hbase_cluster_capture import CLAIMED, FAILED_SHIPMENT, ClusterCapture

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not soak_size(0, 1), reason="make soak only (seven JVMs more than make test's stack)"),
]


def test_regions_moved_split_merged_balanced_and_drained_under_writes(kafka: dict[str, Any], tmp_path: Path) -> None:
    """What a cluster does to regions on its own or at an operator's word, one after another under writes: every
    region moved to another server, a region split and its daughters merged, all regions gathered on one server
    and the balancer run, the busiest server drained and then stopped (its queue claimed by a survivor). A SERIAL
    peer holds a moved region's new server back until the old one shipped its edits: no row's changes reorder."""
    with ClusterCapture(tmp_path, kafka) as run:
        client, table = run.client, run.source
        admin.set_balancer(client, False)  # the test places regions itself until it runs the balancer
        servers = sorted(admin.live_servers(client), key=lambda s: s.port)
        run.start_writing()
        time.sleep(3)

        before = client.regions(table)
        for region in before:
            others = [s for s in servers if (s.host, s.port) != (region.host, region.port)]
            admin.move_region(client, region, others[0])
        moved = run.placement()
        assert all(moved[r.name] != (r.host, r.port) for r in before), (before, moved)
        time.sleep(2)

        count = len(moved)
        client.split_region(table, b"row-00250")
        regions = client.regions(table)
        assert len(regions) == count + 1 and any(r.start_key == b"row-00250" for r in regions), regions
        time.sleep(2)
        second = next(i for i, r in enumerate(regions) if r.start_key == b"row-00250")
        deadline = time.monotonic() + 180
        while True:  # a daughter is not mergeable while it still reads its parent's files (until compacted)
            try:
                admin.merge_regions(client, regions[second - 1], regions[second])
                break
            except HBaseTerminalError as exc:
                assert "is not mergeable" in str(exc) and time.monotonic() < deadline, exc
                time.sleep(3)
        merged = client.regions(table)
        assert len(merged) == count and not any(r.start_key == b"row-00250" for r in merged), merged
        time.sleep(2)

        gather = servers[0]
        for region in merged:
            if (region.host, region.port) != (gather.host, gather.port):
                admin.move_region(client, region, gather)
        assert set(run.placement().values()) == {(gather.host, gather.port)}
        time.sleep(2)
        admin.set_balancer(client, True)
        balancer_moves = admin.balance(client)
        assert balancer_moves > 0
        deadline = time.monotonic() + 60
        while len(set(run.placement().values())) < 2:
            assert time.monotonic() < deadline, "the balancer's moves never spread the table"
            time.sleep(1)
        time.sleep(2)

        hosts = list(run.placement().values())
        busiest = admin.server_at(client, *max(set(hosts), key=hosts.count))
        admin.decommission(client, busiest)
        admin.wait_emptied(client, table, busiest)
        number = run.servers.number_of(busiest.host, busiest.port)
        run.servers.stop(number)
        run.servers.wait_gone(number)
        time.sleep(5)
        run.stop_writing()
        claims = run.wait_for_log(CLAIMED, "a survivor claiming the drained server's replication queue")
        print(f"balancer moved {balancer_moves} regions; server {number} drained and stopped; {claims} queue claims")
        run.verify("regions moved, split, merged, balanced, a server drained")


def test_a_region_server_killed_mid_stream_has_its_queues_claimed_and_nothing_is_lost(
    kafka: dict[str, Any], tmp_path: Path
) -> None:
    """The server holding most of the table's regions is SIGKILLed while writes go on and stays down: ZooKeeper
    expires it, the master reassigns its regions and a survivor claims its replication queue and ships the rest
    of its WALs."""
    with ClusterCapture(tmp_path, kafka) as run:
        hosts = [run.servers.number_of(host, port) for host, port in run.placement().values()]
        assert len(set(hosts)) >= 2, hosts  # the regions are spread
        run.start_writing()
        time.sleep(3)
        victim = max(set(hosts), key=hosts.count)
        run.servers.kill(victim)
        run.servers.wait_gone(victim)
        time.sleep(20)  # the master reassigns the regions; a survivor claims the queue
        run.stop_writing()
        run.wait_for_log(CLAIMED, "a survivor claiming the dead server's replication queue")
        run.verify(f"region server {victim} killed")


def test_instances_share_the_load_survive_one_killed_and_all_down(kafka: dict[str, Any], tmp_path: Path) -> None:
    """Three source servers ship to two cdcflow instances: each instance serves a share (its WAL entries
    counter). One instance SIGKILLed while the servers ship to it: the other takes the whole load. Then every
    instance down for longer than the sources' retry interval (HBase's region servers log their failed
    shipments), then two started again: the sources catch up from their WALs, nothing lost."""
    with ClusterCapture(tmp_path, kafka) as run:
        client, table = run.client, run.source
        servers = sorted(admin.live_servers(client), key=lambda s: s.port)
        for i, region in enumerate(client.regions(table)):  # every source server holds a region of the table
            target = servers[i % len(servers)]
            if (region.host, region.port) != (target.host, target.port):
                admin.move_region(client, region, target)
        assert len(set(run.placement().values())) == len(servers)
        run.start_writing()
        time.sleep(20)
        shares = [run.entries(i) for i in range(run.instances)]
        assert all(s > 0 for s in shares), shares
        print(f"WAL entries per instance with {len(servers)} source servers: {shares}")

        run.peer.kill(run.procs[0])
        survivor_before = run.entries(1)
        time.sleep(20)
        survivor_after = run.entries(1)
        assert survivor_after > survivor_before, (survivor_before, survivor_after)

        run.peer.kill(run.procs[1])
        down_since = len(run.master_log())
        time.sleep(45)  # sources retry every second, up to 10 s apart (replication.source.maxretriesmultiplier 10)
        failed = FAILED_SHIPMENT.findall(run.master_log()[down_since:])
        assert failed, "HBase's region servers logged no failed shipment while every instance was down"
        run.procs = [run.start_instance(i) for i in range(run.instances)]
        time.sleep(10)
        run.stop_writing()
        print(f"instance 0 killed: instance 1 received {survivor_after - survivor_before:.0f} entries in 20 s; "
              f"all down 45 s: {len(failed)} failed shipments logged")  # fmt: skip
        run.verify("an instance killed, then all of them down")
