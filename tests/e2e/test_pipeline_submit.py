"""The same pipeline through spark-submit (`cdcflow pipeline submit`) on a real Spark standalone
cluster (`cdcflow stack up spark`: a master and two workers), every sink, executors doing the work."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.dev.testing import ServiceHarness, soak_size
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.log import changes
from cdcflow.pipeline.sinks.delta.views import hbase_state_rows
from cdcflow.verify.hbase import compare_rows, rows_of, verify_hbase

from .hbase_capture import PeerSetup, wait_until_replicated
from .test_hbase_capture import workload
from .test_pipeline_hbase import FAMILIES, captured_table
from .test_sink_interleavings import history_record, mysql_event


def test_every_sink_runs_unchanged_on_a_standalone_cluster(
    services: ServiceHarness, hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any],
    hbase: dict[str, Any], tmp_path: Path, phoenix_jvm: PhoenixJvm,
) -> None:  # fmt: skip
    cluster = services.endpoints("spark")
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    bootstrap = kafka["bootstrap_servers"]
    # HBase changes, captured by this test's peer
    splits = [b"\x40", b"\x80", b"\xc0"]
    source, hbase_topic = captured_table(hbase_client, peer_setup, split_keys=splits)
    hbase_client.create_table(f"{source}_copy", FAMILIES)
    workload(hbase_client, source, random.Random(17))
    wait_until_replicated(hbase_client, bootstrap, source, hbase_topic, [b"", *splits])
    hbase_events = sum(k.end_offsets(bootstrap, hbase_topic).values())
    # MySQL changes with their schema history (for Phoenix)
    db = f"shop_{peer_setup.name}"
    history = f"{peer_setup.name}-history"
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [(b"db1", history_record("db1", db))])
    mysql_topic = f"{peer_setup.name}.db1.{db}.items"
    k.produce_sync(bootstrap, mysql_topic, [(b'{"id":%d}' % i, mysql_event("db1", i, [1, 100 + i, 0],
                                            {"id": i, "v": f"v{i}"}, db)) for i in range(30)])  # fmt: skip

    everything = f"{peer_setup.name}\\..*"
    cfg = yaml.safe_load(peer_setup.config_path.read_text())
    cfg["pipeline"] = {
        "topics": everything,
        "dead_letter_topic": f"{peer_setup.name}-dead-letter",
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "sinks": [
            {"name": "copy", "type": "hbase", "topics": f"{peer_setup.name}\\.default\\..*"},
            {"name": "state", "type": "delta", "options": {"path": str(tmp_path / "state"), "max_versions": 1000,
                                                         "schema_history_topic": history}},
            {"name": "changelog", "type": "delta_changelog", "options": {"path": str(tmp_path / "changelog")}},
            {"name": "files", "type": "parquet", "options": {"path": str(tmp_path / "parquet")}},
            {"name": "phoenix", "type": "phoenix", "topics": f"{peer_setup.name}\\.db1\\..*",
             "options": {"url": phoenix_url, "create_tables": True, "schema_history_topic": history}},
        ],
    }  # fmt: skip
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(cfg))
    cli = [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "submit", "--config", str(config), "--available-now",
           "--master", cluster["master_url"]]  # fmt: skip
    # spark-submit's own options after "--": as many shuffle (and Delta log) partitions as the cluster
    # has cores (Spark's default of 200, Delta's 50, schedule that many tasks for every small batch)
    spark_args = ["--", "--conf", "spark.sql.shuffle.partitions=2",
                  "--conf", "spark.databricks.delta.snapshotPartitions=2"]  # fmt: skip
    if not soak_size(0, 1):  # short-lived executors: Java's C1 compiler only, as the tests' short drivers
        spark_args += ["--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1"]

    dry = subprocess.run([*cli, "--dry-run", *spark_args], capture_output=True, text=True, check=True)
    assert "spark-submit" in dry.stdout and "--jars" in dry.stdout and "cli/spark_app.py" in dry.stdout
    assert cluster["master_url"] in dry.stdout and "spark.sql.shuffle.partitions=2" in dry.stdout

    run = subprocess.run([*cli, *spark_args], capture_output=True, text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    states = dict(line.split(None, 1) for line in run.stdout.splitlines() if len(line.split(None, 1)) == 2)
    for sink in ("copy", "state", "changelog", "files", "phoenix"):
        assert states.get(sink) == "done", run.stdout[-3000:]

    # every sink is exact
    report = verify_hbase(hbase_client, source, hbase_client, f"{source}_copy", max_versions=1000)
    assert report.clean and report.rows_compared > 50, report.summary()
    spark = build_session("cdcflow-test-submit")
    state = str(tmp_path / "state" / "it" / "default" / source)
    report = compare_rows(rows_of(hbase_client.scan(source, max_versions=1000)), hbase_state_rows(spark, state, 1000))
    assert report.clean, report.summary()
    mysql_state = spark.read.format("delta").load(str(tmp_path / "state" / "db1" / db / "items"))
    assert mysql_state.count() == 30
    assert changes(spark, str(tmp_path / "changelog")).count() == hbase_events + 30
    assert spark.read.parquet(str(tmp_path / "parquet")).count() == hbase_events + 30
    rows = phoenix_jvm.query(f'SELECT ID, V FROM "{db.upper()}"."ITEMS" ORDER BY ID')
    assert [(int(r[0]), r[1]) for r in rows] == [(i, f"v{i}") for i in range(30)]

    # the executors did the work, on both workers (the backfill on the cluster: test_hbase_backfill.py)
    for worker_dir in cluster["worker_dirs"]:
        logs = list(Path(worker_dir).glob("app-*/*/stderr"))
        assert any("Finished task" in log.read_text(errors="replace") for log in logs), worker_dir
