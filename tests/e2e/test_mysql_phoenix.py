"""MariaDB → `cdcflow mysql` capture → Kafka → `cdcflow pipeline run` (a real process) → Phoenix.

A randomized workload (every supported column type, multi-row statements, primary-key changes
including composite keys, deletes, rolled-back transactions) runs while the pipeline process is
killed with SIGKILL (once; three times in make soak) and restarted. Afterwards `cdcflow verify mysql-phoenix` (the
CLI, as a user runs it) must report zero differences for every table.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients.hbase import HBaseClient, connect
from cdcflow.clients.kafka import read_latest
from cdcflow.dev.testing import ServiceHarness, soak_size, unique_name
from cdcflow.dev.testing.mysql import (
    WORKLOAD_TABLES,
    CaptureThread,
    MySqlWorkload,
    admin_endpoint,
    position_reached,
    server_position,
    source_config,
)
from cdcflow.sources.mysql.checkpoint import Checkpoint

from .hbase_capture import PeerSetup, Rebuilder
from .test_hbase_faults import setup_tables, writes


class PipelineProcess:
    def __init__(self, config_path: Path, log: Path) -> None:
        self.config_path, self.log = config_path, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, *args: str) -> None:
        out = open(self.log, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "run", "--config", str(self.config_path), *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout_s)

    def wait_for_batches(self, count: int, timeout_s: float = 240) -> None:
        """Until this run has applied `count` more batches (so a kill lands mid-stream, not at start-up)."""
        start = self.log.read_text().count(" applied ")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.log.read_text().count(" applied ") - start >= count:
                return
            assert self.proc is not None and self.proc.poll() is None, self.log.read_text()[-4000:]
            time.sleep(0.5)
        raise AssertionError(f"no progress:\n{self.log.read_text()[-4000:]}")


def cli(config_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdcflow.cli.main", *args, "--config", str(config_path)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def write_config(
    tmp_path: Path,
    bootstrap: str,
    zk_quorum: str,
    mariadb: dict[str, Any],
    source: Any,
    phoenix_url: str,
    **pipeline: Any,
) -> Path:
    """A cdcflow config whose pipeline reads this source's topics into Phoenix."""
    config_path = tmp_path / "cdcflow.yaml"
    config_path.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": bootstrap},
        "hbase": {"zk_quorum": zk_quorum},
        "mysql": {"host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
                  "password": mariadb["password"], "schema_history_topic": source.schema_history_topic},
        "pipeline": {
            "topics": source.topic_prefix.replace(".", "\\.") + "\\..*",
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "dead_letter_topic": f"{source.name}-pipeline-dead",
            "trigger_seconds": 1,
            "sinks": [{"name": "phoenix", "type": "phoenix",
                       "options": {"url": phoenix_url, "create_tables": True}}],
            **pipeline,
        },
    }))  # fmt: skip
    return config_path


class Writer:
    """The randomized workload's transactions, `per_second`, in a thread while the block runs."""

    def __init__(self, workload: MySqlWorkload, per_second: float) -> None:
        self.workload, self.pause = workload, 1 / per_second
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            self.workload.transaction()
            time.sleep(self.pause)

    def __enter__(self) -> Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        self.workload.close()


def finish_and_verify(
    mariadb: dict[str, Any],
    bootstrap: str,
    source: Any,
    capture: CaptureThread,
    pipeline: PipelineProcess,
    config_path: Path,
    db: str,
) -> dict[str, str]:
    """Let the capture catch up with the last transaction, apply what is left, then `cdcflow verify
    mysql-phoenix` (the CLI) must report no differences for every table. Returns rows compared per table."""
    gtid_pos = server_position(admin_endpoint(mariadb))
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        raw = read_latest(bootstrap, source.offsets_topic, source.name.encode())
        if raw and position_reached(Checkpoint.from_bytes(raw).gtid_state, gtid_pos):
            break
        time.sleep(1)
    else:
        raise AssertionError("capture did not catch up")
    capture.stop()
    pipeline.kill()
    pipeline.start("--available-now")
    assert pipeline.wait(600) == 0, pipeline.log.read_text()[-4000:]
    result = cli(config_path, "verify", "mysql-phoenix", *(f"{db}.{table}" for table in WORKLOAD_TABLES))
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.findall(rf"^mysql-phoenix ({db}\.\w+): no differences: (\d+) rows compared", result.stdout, re.M)
    assert len(found) == len(WORKLOAD_TABLES), result.stdout
    return dict(found)


@pytest.mark.skipif(
    soak_size(0, 1) == 0,
    reason="make soak only (three SIGKILLs at full rate); make test kills the sink at its two replay-relevant "
    "points in test_pipeline_phoenix.py::test_a_batch_that_dies_during_its_write_is_replayed_exactly",
)
def test_randomized_workload_into_phoenix_survives_pipeline_sigkills(
    mariadb: dict[str, Any], kafka: dict[str, Any], hbase: dict[str, Any], services: ServiceHarness, tmp_path: Path
) -> None:
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_phx")
    workload = MySqlWorkload(admin_endpoint(mariadb), db, seed=23, account_ids=800)
    workload.create()
    source = source_config(unique_name("phx"), [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()
    config_path = write_config(
        tmp_path, bootstrap, hbase["zk_quorum"], mariadb, source, phoenix_url, max_offsets_per_trigger=3000
    )
    pipeline = PipelineProcess(config_path, tmp_path / "pipeline.log")
    rng = random.Random(7)
    with Writer(workload, per_second=soak_size(10, 40)):  # transactions/s; full rate in make soak
        pipeline.start()
        for _ in range(soak_size(1, 3)):  # SIGKILLs of the pipeline process (3 in make soak)
            pipeline.wait_for_batches(rng.randint(1, 2))
            time.sleep(rng.uniform(0, 3))
            pipeline.kill()
            time.sleep(rng.uniform(0, 2))
            pipeline.start()
        pipeline.wait_for_batches(1)  # the last run applies too (then --available-now drains)
    sizes = finish_and_verify(mariadb, bootstrap, source, capture, pipeline, config_path, db)
    log = pipeline.log.read_text()
    assert workload.transactions > soak_size(100, 300) and workload.rollbacks > 0
    print(f"phoenix e2e: {workload.transactions} transactions ({workload.rollbacks} rolled back), rows compared "
          f"{sizes}, pipeline runs {log.count('started query phoenix')}")  # fmt: skip


@pytest.mark.skipif(
    soak_size(0, 1) == 0,
    reason="make soak only (about 3 minutes, most of it HBase with Phoenix restarting): make test covers the "
    "peer's re-registration with a real ZooKeeper session expiry (test_hbase_faults.py) and the Phoenix sink's "
    "replay at its crash points (test_pipeline_phoenix.py)",
)
def test_an_hbase_restart_under_the_phoenix_sink_and_the_hbase_peer(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path,
    hbase_client: HBaseClient, peer_setup: PeerSetup,
) -> None:  # fmt: skip
    """HBase (with Phoenix, and the ZooKeeper the peer registers in) restarted under a running pipeline
    and a running HBase peer, then the pipeline SIGKILLed once. The sink's batches fail or wait
    while it is down, the pipeline retries, and afterwards Phoenix equals MariaDB row for row. The
    peer keeps running, is registered again, and every HBase row written before and after the
    restart arrives. (One restart serves both: each costs a minute or more.)

    The session's HBase is restarted on the same ports (as the Kafka outage tests do with Kafka), so
    later tests find it as before; `up` returns once it answers again."""
    stack = services.stack
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    zk_quorum = services.endpoints("hbase")["zk_quorum"]
    bootstrap = kafka["bootstrap_servers"]
    # Not SERIAL here: with serial replication the restarted region server holds the regions' new edits
    # until the master has handed the dead server's queue to it (HBase's crash procedure, 30 s to 5 min
    # here), which would only measure HBase. Unshipped edits in the old WALs are still waited for.
    peer_setup.write_config(peer={**peer_setup.peer_config(), "serial": False})
    hbase_source, hbase_target = setup_tables(hbase_client, peer_setup)
    peer = peer_setup.start()
    rng = random.Random(13)
    writes(hbase_client, hbase_source, rng, 0, 300)
    db = unique_name("e2e_phx_rs")
    workload = MySqlWorkload(admin_endpoint(mariadb), db, seed=29, account_ids=300)
    workload.create()
    source = source_config(unique_name("phxrs"), [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()
    config_path = write_config(
        tmp_path, bootstrap, zk_quorum, mariadb, source, phoenix_url,
        max_offsets_per_trigger=2000, retry_backoff_max_s=8,
    )  # fmt: skip
    pipeline = PipelineProcess(config_path, tmp_path / "pipeline.log")
    with Writer(workload, per_second=soak_size(8, 30)):
        pipeline.start()
        pipeline.wait_for_batches(1)  # applying before the outage
        outage_from = len(pipeline.log.read_text())
        stack.down(["hbase"])
        try:
            time.sleep(15)  # batches meet a dead HBase meanwhile
        finally:
            stack.up(["phoenix"])  # HBase again, with Phoenix inside
        assert stack.endpoints("phoenix")["jdbc_url"] == phoenix_url
        client = connect(zk_quorum, "/hbase")  # the fixture's connection died with the old HBase
        # HBase rows after the restart now, so that their replication overlaps the Phoenix checks below.
        writes(client, hbase_source, rng, 300, 300)
        pipeline.wait_for_batches(1, timeout_s=600)  # applying again after the restart
        # and a SIGKILL mid-stream (the standalone SIGKILL test runs under make soak): the runs after
        # it (this restart, killed again below while it starts, then --available-now) replay what it
        # left uncommitted, each change once, taking the writer lease over from the dead process
        time.sleep(rng.uniform(0, 2))
        pipeline.kill()
        pipeline.start()
    try:
        finish_and_verify(mariadb, bootstrap, source, capture, pipeline, config_path, db)
        # the sink met the outage: a batch failed and was retried, or waited in Phoenix's client until
        # HBase was back (longer than the 15 s HBase was down)
        after = pipeline.log.read_text()[outage_from:]
        failed = after.count("query phoenix failed")
        waited = [int(ms) for ms in re.findall(r"sink phoenix: batch \d+ applied \d+ rows in (\d+) ms", after)]
        print(f"phoenix across an HBase restart: {workload.transactions} transactions, {failed} failed batch "
              f"attempts, longest batch {max(waited, default=0)} ms; verified at {time.strftime('%X')}")  # fmt: skip
        assert failed or max(waited, default=0) >= 15_000, "the Phoenix sink never met the HBase outage"
        peer_setup.wait_registered(1, timeout_s=60)
        rebuild = Rebuilder(client, bootstrap, f"{peer_setup.name}.default.{hbase_source}", hbase_target)
        try:
            rebuild.until_equal(hbase_source, timeout_s=300)
            rebuild.assert_row_order()
            print(f"hbase peer across the restart: rebuilt table equal at {time.strftime('%X')}")
        finally:
            rebuild.close()
    finally:
        client.close()
    assert peer.poll() is None, "the HBase peer exited when HBase restarted"
