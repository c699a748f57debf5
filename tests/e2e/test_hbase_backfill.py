"""`cdcflow hbase backfill` on a table that already holds data, with writes going on: killed mid-way,
resumed, handed off to the stream, then the whole chain's copies compared with the source.

HBase (8 regions, a randomized workload: puts in and out of timestamp order, every delete type) →
backfill (snapshot, one Spark task per region, SIGKILLed once, rerun) + the cdcflow peer (added disabled
before, enabled by the backfill at its end) → Kafka → the pipeline (`--available-now`) → an HBase copy
and the Delta state. Both equal the source cell by cell, including cells rewritten at the same
timestamp after the snapshot (the stream's value must win over the backfilled one).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient, NativeHBaseClient, admin
from cdcflow.clients.hbase.model import ColumnFamily, Put
from cdcflow.config import SinkConfig
from cdcflow.dev.demo.hbase_workload import FAMILIES, TYPED_COLUMNS, HBaseWorkload
from cdcflow.dev.testing import ServiceHarness, soak_size
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.sinks.delta.views import hbase_state_rows
from cdcflow.sources.hbase.backfill import read_status
from cdcflow.verify.hbase import compare_rows, rows_of, verify_hbase

from .hbase_capture import PeerSetup, wait_until_replicated
from .test_pipeline_hbase import pipeline_for

ROWS = soak_size(6_000, 250_000)
MUTATIONS = soak_size(10_000, 900_000)  # before the backfill; full size: over 1M cells across 8 regions
REGIONS = 8
TIE_ROWS = [b"tie-%02d" % i for i in range(6)]


def test_backfill_killed_and_resumed_then_the_stream_equals_the_source(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path,
    services: ServiceHarness,
) -> None:  # fmt: skip
    """Killed in local mode, resumed on the Spark standalone cluster (its region tasks on both workers'
    executors), then the stream hands off."""
    began = time.monotonic()

    def phase(what: str) -> None:
        print(f"{time.monotonic() - began:6.1f} s  {what}")

    bootstrap = kafka["bootstrap_servers"]
    table = f"{peer_setup.name}_big"
    splits = [b"row-%05d" % (ROWS * i // REGIONS) for i in range(1, REGIONS)]
    hbase_client.create_table(table, list(FAMILIES), split_keys=splits)
    copy_families = [ColumnFamily(f.name, f.max_versions, replication_scope=0) for f in FAMILIES]
    hbase_client.create_table(f"{table}_copy", copy_families, split_keys=splits)
    workload = HBaseWorkload(hbase_client, [table], rows_per_table=ROWS, seed=18)
    workload.run(MUTATIONS, batch=2000)
    for row in TIE_ROWS:  # rewritten at the same timestamp after the snapshot (below)
        hbase_client.mutate(table, Put(row).add(b"cf", b"name", b"before the snapshot", 5))

    # Years of data are not in the WAL: a new WAL now, so the peer added below cannot replay what was
    # written so far (a new peer starts from each region server's current WAL), and only the backfill
    # brings it
    assert isinstance(hbase_client, NativeHBaseClient)
    assert admin.roll_wal_writers(hbase_client) >= 1
    phase(f"{MUTATIONS} mutations written, WAL rolled")
    progress_topic = f"{peer_setup.name}-backfill"
    peer_setup.write_config(backfill={"chunk_rows": 25, "progress_every_s": 1, "progress_topic": progress_topic})
    peer_setup.start()
    # Added disabled for this table only (HBase keeps its changes from here); the backfill enables it at the end
    peer_setup.cli("hbase", "peer", "add", "--disabled", f"--table={table}", "--config", str(peer_setup.config_path))
    k.create_store_topic(bootstrap, progress_topic, compact=True)

    # Writes go on the whole time, from another client (a client is one thread's)
    stop = threading.Event()
    writer_error: list[BaseException] = []

    def write() -> None:
        client = NativeHBaseClient(hbase["zk_quorum"])
        workload.client = client
        try:
            while not stop.is_set():
                # ~50 mutations/s: over the test's 2-3 minutes the stream touches a few thousand of the 6000 rows,
                # so many rows stay the backfill's only (at 250/s it touched all but 273 on a slow machine)
                workload.step(10)
                time.sleep(0.2)
        except BaseException as exc:  # surfaced by the main thread
            writer_error.append(exc)
        finally:
            client.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    log_path = tmp_path / "backfill.log"
    command = [sys.executable, "-m", "cdcflow.cli.main", "hbase", "backfill", table, "--enable-peer", "--config",
               str(peer_setup.config_path)]  # fmt: skip
    try:
        # 1. killed (SIGKILL: driver, Spark JVM, Python workers) once the first region chunks are in Kafka
        reader = k.TopicReader(bootstrap, [progress_topic])
        with open(log_path, "ab") as log:
            first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while not any(b"/" in (r.key or b"") for r in reader.poll(0.2)):
                assert first.poll() is None, f"the backfill ended before any progress:\n{log_path.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "no region progress within 180 s"
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
            reader.close()
        killed = read_status(_records(bootstrap, progress_topic))[f"hbase:{table}"]
        phase(f"killed: {killed.summary()}")
        assert killed.plan.state == "reading" and killed.done_regions() < REGIONS and killed.rows > 0

        status = subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "hbase", "status", "--config",
                                 str(peer_setup.config_path)], capture_output=True, text=True, check=False)  # fmt: skip
        assert f"backfill hbase:{table}: reading, " in status.stdout, status.stdout + status.stderr
        assert re.search(rf"  {table}: \d/8 regions done, \d+ rows, snapshot cdcflow_backfill_", status.stdout)
        assert status.returncode == 1  # the peer is still disabled

        # the snapshot is taken: these rewrites reach Kafka through the stream only
        for row in TIE_ROWS:
            hbase_client.mutate(table, Put(row).add(b"cf", b"name", b"after the snapshot", 5))

        # 2. the same command resumes, on the standalone cluster: the regions done are skipped, the others go
        # on from their last row
        cluster = services.endpoints("spark")
        second = subprocess.run([*command, "--master", cluster["master_url"]], capture_output=True, text=True,
                                timeout=600, check=False)  # fmt: skip
        log_path.write_text(log_path.read_text() + second.stdout + second.stderr)
        assert second.returncode == 0, log_path.read_text()[-5000:]
        # what it resumed from (a record on the wire at the kill may land after the status read above)
        resumed = re.search(r"resuming backfill .*: reading, (\d+)/8 regions done, (\d+) rows", second.stderr)
        assert resumed, second.stderr[-3000:]
        resumed_done, resumed_rows = int(resumed.group(1)), int(resumed.group(2))
        assert resumed_done >= killed.done_regions() and resumed_rows >= killed.rows
        to_read = int(re.search(r"(\d+) of 8 regions to read", second.stderr).group(1))  # type: ignore[union-attr]
        this_run = int(re.search(r"(\d+) rows published by this run", second.stderr).group(1))  # type: ignore[union-attr]
        done = read_status(_records(bootstrap, progress_topic))[f"hbase:{table}"]
        print(
            f"resumed from {resumed_rows} rows: {to_read} regions to read, {this_run} rows by the second run; "
            f"{done.summary()}"
        )
        assert done.plan.state == "done" and done.done_regions() == REGIONS
        assert to_read == REGIONS - resumed_done and this_run == done.rows - resumed_rows
        # the resumed regions were read by executors on both workers
        app = re.search(rf"{to_read} tasks on spark://\S+ \(application (\S+)\)", second.stderr)
        assert app, second.stderr[-3000:]
        for worker_dir in cluster["worker_dirs"]:
            logs = list(Path(worker_dir).glob(f"{app.group(1)}/*/stderr"))
            assert any("Finished task" in log.read_text(errors="replace") for log in logs), worker_dir
        assert done.cells >= soak_size(10_000, 1_000_000)
        assert f"enabled peer {peer_setup.name}" in second.stdout
        scratch = [t for t in hbase_client.list_tables() if t.startswith(f"cdcflow_backfill_{table}_")]
        assert table in hbase_client.list_tables() and not scratch  # the snapshot's scratch table is gone

        time.sleep(2)  # writes continue under the enabled peer
    finally:
        stop.set()
        writer.join(timeout=60)
    assert not writer_error, writer_error

    # The stream caught up once a row written last in every region is in Kafka
    topic = f"{peer_setup.name}.default.{table}"
    wait_until_replicated(hbase_client, bootstrap, table, topic, [b"", *splits])
    phase("the stream delivered the last writes")

    # The pipeline runs in this process (its killed and restarted runs: test_pipeline_chain.py)
    state_root = tmp_path / "state"
    sinks = (
        SinkConfig(name="hbase_copy", type="hbase"),
        SinkConfig(name="state", type="delta",
                   options={"path": str(state_root), "max_versions": 1000, "typed_columns": TYPED_COLUMNS}),
    )  # fmt: skip
    pipeline = Pipeline(*pipeline_for(peer_setup, kafka, hbase, tmp_path / "checkpoints", *sinks))
    assert pipeline.run(available_now=True) == {"hbase_copy": "done", "state": "done"}
    phase("pipeline --available-now done")
    ops: dict[bytes, set[str]] = {}
    for r in k.read_to_end(bootstrap, topic):
        ops.setdefault(r.key or b"", set()).add(json.loads(r.value or b"{}")["op"])
    only_backfilled = [key for key, kinds in ops.items() if kinds == {"r"}]  # rows the stream never had
    assert any(kinds - {"r"} for kinds in ops.values()) and len(only_backfilled) > ROWS // 20
    report = verify_hbase(hbase_client, table, hbase_client, f"{table}_copy", max_versions=1000)
    assert report.clean and report.rows_compared > ROWS // 2, f"hbase copy: {report.summary()} {report.examples}"
    for row in TIE_ROWS:
        (cell,) = [c for c in hbase_client.scan(f"{table}_copy", start_row=row, stop_row=row + b"\0")]
        assert cell.value == b"after the snapshot"
    phase("HBase copy verified")
    spark = pipeline.spark
    assert spark is not None
    path = str(state_root / "it" / "default" / table)
    for versions in (1000, 1):
        report = compare_rows(rows_of(hbase_client.scan(table, max_versions=versions)),
                              hbase_state_rows(spark, path, versions))  # fmt: skip
        assert report.clean, f"delta state ({versions} versions): {report.summary()} {report.examples}"
    phase("Delta state verified")


def _records(bootstrap: str, topic: str) -> list[tuple[bytes, bytes | None]]:
    return [(r.key, r.value) for r in k.read_to_end(bootstrap, topic) if r.key is not None]


def test_a_backfill_of_a_missing_or_uncaptured_table_is_refused_before_anything_changes(
    hbase_client: HBaseClient, peer_setup: PeerSetup
) -> None:
    """Bad input leaves no trace: no peer added (HBase would keep every WAL for it), no plan recorded."""
    routed = f"{peer_setup.name}_secret"
    peer_setup.write_config(routes=[{"table": f"{peer_setup.name}_secret*", "drop": True}])
    for table, message in ((f"{peer_setup.name}_missing", "no such table on the source cluster"),
                           (routed, "not captured by hbase.routes")):  # fmt: skip
        run = subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "hbase", "backfill", table, "--config",
                              str(peer_setup.config_path)], capture_output=True, text=True, check=False)  # fmt: skip
        assert run.returncode != 0 and message in run.stderr and table in run.stderr, run.stderr[-2000:]
    peers = peer_setup.cli("hbase", "peer", "list", "--config", str(peer_setup.config_path))
    assert peer_setup.name not in peers
