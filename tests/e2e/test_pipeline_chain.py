"""The whole chain under a randomized 100k-mutation workload, with the pipeline driver SIGKILLed.
The first kill lands inside a Delta fold (its "folding" line logged, its "folded" never).

HBase (3 tables) → cdcflow peer → Kafka → `cdcflow pipeline run` (a separate process group:
driver, its JVM and Python workers) → an HBase copy, Delta current-state tables and a Delta
changelog. The driver is killed with SIGKILL once (three times in make soak) at random points and restarted; at the
end `verify` finds zero differences for both sinks and the changelog holds each change once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.dev.demo.hbase_workload import TYPED_COLUMNS, HBaseWorkload
from cdcflow.dev.testing import soak_size
from cdcflow.dev.testing.pipeline_logs import wait_for_a_fold
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.views import current_view, hbase_state_rows
from cdcflow.verify.hbase import compare_rows, rows_of, verify_hbase

from .hbase_capture import PeerSetup

MUTATIONS = soak_size(8_000, 100_000)  # full size: make soak
KILLS = soak_size(1, 3)  # driver SIGKILLs
# The writer's 200 steps span the kills (each lands 18-30 s after a start): ~25 s for one kill,
# ~80 s for three; the final run starts when the writer is done.
STEP_PAUSE_S = soak_size(100, 250) / 1000


def _end_offsets(bootstrap: str, topics: list[str]) -> int:
    return sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics)


def hive_metastore(root: Path) -> dict[str, str]:
    """Spark settings for Spark's built-in Hive metastore (Derby) under `root`."""
    return {
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore'};create=true",
    }


def test_randomized_workload_survives_three_driver_kills(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    rng = random.Random(2026)
    tables = [f"{peer_setup.name}_t{i}" for i in range(3)]
    workload = HBaseWorkload(hbase_client, tables, rows_per_table=2000, seed=rng.randrange(2**32))
    workload.create_tables(with_copies=True)
    peer_setup.add_peer(*tables)
    peer_setup.start()

    state_root, changelog = tmp_path / "state", tmp_path / "changelog"
    checkpoints = tmp_path / "checkpoints"
    cfg = yaml.safe_load(peer_setup.config_path.read_text())
    cfg["pipeline"] = {
        "topics": f"{peer_setup.name}\\..*",
        "dead_letter_topic": f"{peer_setup.name}-dead-letter",
        "checkpoint_dir": str(checkpoints),
        "trigger_seconds": 2,
        "max_offsets_per_trigger": 10_000,
        "retry_backoff_max_s": 5,
        "spark_conf": hive_metastore(tmp_path),  # the Delta sink's table names outlive the process
        "sinks": [
            {"name": "hbase_copy", "type": "hbase"},
            {"name": "state", "type": "delta",
             "options": {"path": str(state_root), "max_versions": 1000, "typed_columns": TYPED_COLUMNS,
                         "fold_rows": 1000}},  # folds while the pipeline runs: the first kill lands in one
            {"name": "changelog", "type": "delta_changelog", "options": {"path": str(changelog)}},
        ],
    }  # fmt: skip
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(cfg))
    log_path = tmp_path / "pipeline.log"

    def start_pipeline(*extra: str) -> subprocess.Popen[bytes]:
        with open(log_path, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "run", "--config", str(config), *extra],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    writer_error: list[BaseException] = []

    def write() -> None:
        try:
            while workload.mutations < MUTATIONS:
                workload.step(min(MUTATIONS // 200, MUTATIONS - workload.mutations))
                time.sleep(STEP_PAUSE_S)  # spread the workload over the kills
        except BaseException as exc:  # surfaced by the main thread
            writer_error.append(exc)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for kill in range(KILLS):
            started = log_path.stat().st_size if log_path.exists() else 0
            proc = start_pipeline()
            procs.append(proc)
            if kill == 0:  # the first kill lands inside a Delta fold
                folding = wait_for_a_fold(proc, log_path, started)
            else:
                time.sleep(rng.uniform(18, 30))  # Spark starts in ~15 s: the kill lands mid-batch
            assert proc.poll() is None, f"pipeline exited early; see {log_path}:\n{log_path.read_text()[-3000:]}"
            os.killpg(proc.pid, signal.SIGKILL)  # driver, its JVM and Python workers at once
            proc.wait()
            if kill == 0:
                killed = log_path.read_bytes()[started:].decode(errors="replace")
                assert f"{folding}: folded" not in killed[killed.index(f"{folding}: folding") :], "the kill missed"
            print(f"kill {kill + 1}: after {workload.mutations} mutations, progress {read_progress(checkpoints)}")
        writer.join(timeout=600)
        assert not writer_error, writer_error
        assert workload.mutations == MUTATIONS

        # Every mutation is one event; wait until replication delivered them all (duplicates only add).
        topics = [f"{peer_setup.name}.default.{t}" for t in tables]
        deadline = time.monotonic() + 300
        while _end_offsets(kafka["bootstrap_servers"], topics) < MUTATIONS:
            assert time.monotonic() < deadline, "replication did not deliver every mutation"
            time.sleep(2)

        final = start_pipeline("--available-now")
        procs.append(final)
        assert final.wait(timeout=900) == 0, log_path.read_text()[-5000:]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    # The state tables by name, read by another process through the Hive metastore the pipeline used (started
    # now, so its JVM starts while this process checks the rest)
    reader_code = (
        "import json, sys\n"
        "from cdcflow.pipeline.session import build_session\n"
        "spark = build_session('cdcflow-test-reader', conf=json.loads(sys.argv[1]))\n"
        "print(json.dumps({t: spark.table(f'default.{t}').count() for t in sys.argv[2:]}))\n"
    )
    reader_log = tmp_path / "reader.log"  # a file: the JVM's warnings could fill a pipe no one reads yet
    with open(reader_log, "w") as log:
        reader = subprocess.Popen([sys.executable, "-c", reader_code, json.dumps(hive_metastore(tmp_path)), *tables],
                                  stdout=subprocess.PIPE, stderr=log, text=True)  # fmt: skip

    try:
        for t in tables:
            report = verify_hbase(hbase_client, t, hbase_client, f"{t}_copy", max_versions=1000)
            assert report.clean and report.rows_compared > 1000, f"{t} hbase copy: {report.summary()} {report.examples}"

        spark = build_session("cdcflow-test-verify")
        for t in tables:
            path = str(state_root / "it" / "default" / t)  # <path>/<source name>/<ns>/<table>
            for versions in (1000, 1):
                report = compare_rows(rows_of(hbase_client.scan(t, max_versions=versions)),
                                      hbase_state_rows(spark, path, versions))  # fmt: skip
                assert report.clean, f"{t} delta state ({versions} versions): {report.summary()} {report.examples}"

        # The changelog holds each change exactly once: the same identities as the topics, no repeats.
        identities = set()
        for topic in topics:
            total = sum(k.end_offsets(kafka["bootstrap_servers"], topic).values())
            for rec in k.consume(kafka["bootstrap_servers"], topic, expected=total, timeout_s=120):
                e = json.loads(rec.value or b"{}")
                identities.add((rec.key, e["source"]["region"], tuple(e["source"]["pos"])))
        rows = spark.read.format("delta").load(str(changelog)).select("event_key", "region", "pos").collect()
        logged = [(bytes(r["event_key"]), r["region"], tuple(r["pos"])) for r in rows]
        assert len(logged) == len(set(logged)), "a change is in the changelog twice"
        assert set(logged) == identities
        assert len(identities) >= MUTATIONS

        out, _ = reader.communicate(timeout=300)
    finally:
        if reader.poll() is None:  # a check above failed
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, reader_log.read_text()[-3000:]
    by_name = json.loads(out.strip().splitlines()[-1])
    assert by_name == {t: current_view(spark, str(state_root / "it" / "default" / t)).count() for t in tables}

    progress = read_progress(checkpoints)
    assert {"hbase_copy", "state", "changelog"} <= progress.keys()
    assert all(progress[s].get("offsets_behind") in (0, None) for s in ("hbase_copy", "state", "changelog"))
