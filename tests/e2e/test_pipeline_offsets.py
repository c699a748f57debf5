"""`cdcflow pipeline offsets show | reset` against real Kafka and Spark: refused while the pipeline
runs; a sink rewound to the earliest offsets reads every change again in its next run (batch numbers keep
growing) and its Delta table, guarded by source position, stays exactly what it was; reset to latest
starts the next batch at the end of each partition."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients import kafka as k
from cdcflow.config import SinkConfig
from cdcflow.pipeline.offsets import PipelineRunning, checkpoint_lock, read_position
from cdcflow.pipeline.progress import PROGRESS_FILE
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.sinks.delta.views import current_view

from .hbase_capture import PeerSetup
from .test_pipeline_delta import history_record, mysql_event
from .test_pipeline_hbase import pipeline_for


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "pipeline", "offsets", *args, "--config",
                           str(config)], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_a_sink_rewound_to_earliest_replays_and_stays_exact(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path, peer_setup: PeerSetup
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    topic, history = f"{peer_setup.name}.shop.orders", f"{peer_setup.name}-history"
    k.create_topic(bootstrap, topic, partitions=2)
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [history_record("shop", "orders", [("id", "INT"), ("qty", "INT")])])
    events = [mysql_event("shop", "orders", "c", i, [1, 10 + i, 0], {"id": i, "qty": i}) for i in range(20)]
    events += [mysql_event("shop", "orders", "u", i, [2, i, 0], {"id": i, "qty": 100 + i}) for i in range(10)]
    events += [mysql_event("shop", "orders", "d", i, [3, i, 0], None) for i in range(5)]
    k.produce_sync(bootstrap, topic, [(b'{"id":%d}' % (i % 20), v) for i, v in enumerate(events)])
    root, checkpoints = tmp_path / "state", tmp_path / "checkpoints"
    cfg, context, _ = pipeline_for(peer_setup, kafka, hbase, checkpoints, SinkConfig(
        name="state", type="delta", options={"path": str(root), "schema_history_topic": history,
                                             "register_in_catalog": False}))  # fmt: skip
    config = tmp_path / "cdcflow.yaml"
    config.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap},
                                      "pipeline": {**json.loads(cfg.model_dump_json()),
                                                   "checkpoint_dir": str(checkpoints)}}))  # fmt: skip

    first = Pipeline(cfg, context, checkpoints)
    assert first.run(available_now=True) == {"state": "done"}
    spark = first.spark
    assert spark is not None
    path = str(root / "db1" / "shop" / "orders")
    before = sorted((r["id"], r["qty"]) for r in current_view(spark, path).collect())
    assert before == sorted([(i, 100 + i) for i in range(5, 10)] + [(i, i) for i in range(10, 20)])
    applied = read_position(checkpoints, "state")
    assert applied.committed and sum(sum(p.values()) for p in applied.positions.values()) == len(events)

    with (
        checkpoint_lock(checkpoints, "a test standing in for a running pipeline"),
        pytest.raises(PipelineRunning, match="in use by a test standing in"),
        checkpoint_lock(checkpoints, "cdcflow pipeline offsets reset state"),  # what the reset takes
    ):
        pass

    shown = cli(config, "show")
    assert shown.returncode == 0 and f"batch {applied.batch} applied" in shown.stdout and "0 behind" in shown.stdout
    rewound = cli(config, "reset", "state", "--to", "earliest")
    assert rewound.returncode == 0 and f"-{len(events)} records" in rewound.stdout, rewound.stdout + rewound.stderr
    moved = read_position(checkpoints, "state")
    assert moved.batch == (applied.batch or 0) + 1 and sum(sum(p.values()) for p in moved.positions.values()) == 0

    second = Pipeline(cfg, context, checkpoints)
    assert second.run(available_now=True) == {"state": "done"}
    replayed = read_position(checkpoints, "state")
    assert replayed.batch is not None and replayed.batch > moved.batch  # batch numbers kept growing
    progress = json.loads((checkpoints / "state" / PROGRESS_FILE).read_text())
    assert progress["total_rows"] == 2 * len(events)  # every change read again (the progress totals carry over)
    assert sorted((r["id"], r["qty"]) for r in current_view(spark, path).collect()) == before

    # forward: the next change is skipped on purpose
    k.produce_sync(bootstrap, topic, [(b'{"id":19}', mysql_event("shop", "orders", "u", 19, [4, 0, 0],
                                                                 {"id": 19, "qty": -1}))])  # fmt: skip
    assert cli(config, "reset", "state", "--to", "latest").returncode == 0
    skipped = read_position(checkpoints, "state").positions[topic]
    assert {int(p): o for p, o in skipped.items()} == k.end_offsets(bootstrap, topic)  # its next batch starts after it
