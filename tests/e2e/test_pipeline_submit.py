"""The same pipeline through spark-submit (`cdcflow pipeline submit`), as on a cluster."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients import kafka as k

from .hbase_capture import PeerSetup
from .test_pipeline_delta import mysql_event


def test_pipeline_runs_unchanged_through_spark_submit(
    kafka: dict[str, Any], hbase: dict[str, Any], peer_setup: PeerSetup, tmp_path: Path
) -> None:
    topic = f"{peer_setup.name}.shop.items"
    events = [mysql_event("shop", "items", "c", i, [1, 10 + i, 0], {"id": i}) for i in range(25)]
    k.produce_sync(kafka["bootstrap_servers"], topic, [(b"%d" % i, v) for i, v in enumerate(events)])
    cfg = yaml.safe_load(peer_setup.config_path.read_text())
    cfg["pipeline"] = {
        "topics": f"{peer_setup.name}\\..*",
        "dead_letter_topic": f"{peer_setup.name}-dead-letter",
        "checkpoint_dir": str(tmp_path / "checkpoints"),
        "sinks": [{"name": "state", "type": "delta", "options": {"path": str(tmp_path / "state")}}],
    }
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(cfg))
    cli = [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "submit", "--config", str(config), "--available-now"]

    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, check=True)
    assert "spark-submit" in dry.stdout and "--jars" in dry.stdout and "cli/spark_app.py" in dry.stdout

    run = subprocess.run(cli, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "state" in run.stdout and "done" in run.stdout
    from cdcflow.pipeline.session import build_session

    spark = build_session("cdcflow-test-submit")
    assert spark.read.format("delta").load(str(tmp_path / "state" / "db1" / "shop" / "items")).count() == 25
