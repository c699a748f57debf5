"""HBase → peer → Kafka → Spark pipeline → HBase copy, against the real services."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from cdcflow import kafka as k
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.hbase.client import HBaseClient
from cdcflow.hbase.model import ColumnFamily, Delete, Put
from cdcflow.pipeline.runner import DEAD_LETTER_QUERY, Pipeline, read_progress

from .hbase_capture import PeerSetup, scan_cells
from .test_hbase_capture import workload

FAMILIES = [ColumnFamily("cf", max_versions=1000), ColumnFamily("cg", max_versions=1000)]


def wait_for_topic_rows(kafka: dict[str, Any], topic: str, rows: int) -> None:
    got = k.consume(kafka["bootstrap_servers"], topic, expected=rows, timeout_s=120)
    assert len(got) >= rows, f"only {len(got)} of {rows} events reached {topic}"


def test_pipeline_copies_hbase_exactly_and_dead_letters_garbage(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source = f"{peer_setup.name}_src"
    hbase_client.create_table(source, FAMILIES, split_keys=[b"\x40", b"\x80", b"\xc0"])
    hbase_client.create_table(f"{source}_copy", FAMILIES)
    peer_setup.add_peer(source)
    peer_setup.start()
    workload(hbase_client, source, random.Random(11))
    topic = f"{peer_setup.name}.default.{source}"
    wait_for_topic_rows(kafka, topic, 80)
    # malformed records in the same topic: not JSON, wrong schema, negative position
    bad_pos = b'{"schema":"cdcflow.change/1","op":"u","source":{"connector":"hbase","pos":[-1]},"cells":[]}'
    garbage = [(b"g1", b"\xff\x00 not json"), (b"g2", b'{"schema":"other/9"}'), (b"g3", bad_pos)]
    k.produce_sync(kafka["bootstrap_servers"], topic, garbage)
    dlq = f"{peer_setup.name}-dead-letter"
    cfg = PipelineConfig(
        topics=f"{peer_setup.name}\\..*",
        dead_letter_topic=dlq,
        sinks=(SinkConfig(name="hbase_copy", type="hbase"),),
    )
    context = {"bootstrap_servers": kafka["bootstrap_servers"], "zk_quorum": hbase["zk_quorum"]}
    result = Pipeline(cfg, context, tmp_path / "checkpoints").run(available_now=True)
    assert result == {"hbase_copy": "done", DEAD_LETTER_QUERY: "done"}

    assert scan_cells(hbase_client, f"{source}_copy") == scan_cells(hbase_client, source)
    letters = [
        json.loads(r.value or b"{}") for r in k.consume(kafka["bootstrap_servers"], dlq, expected=3, timeout_s=60)
    ]
    assert sorted(d["error"] for d in letters) == sorted(
        [
            "not a JSON object",
            "schema is not cdcflow.change/1",
            "source.pos must be a non-empty array of non-negative integers",
        ]
    )
    assert all(d["topic"] == topic and d["offset"] >= 0 for d in letters)
    assert read_progress(tmp_path / "checkpoints")["hbase_copy"]["rows"] >= 0

    # More changes, another run from the same checkpoints: applies only what is new, still exact.
    hbase_client.mutate(source, Put(b"\x41new").add(b"cf", b"n", b"1", 9000))
    hbase_client.mutate(source, Delete(b"\x41new").column(b"cf", b"n", 8000))
    k.consume(kafka["bootstrap_servers"], topic, expected=10_000, timeout_s=5)  # let replication catch up
    Pipeline(cfg, context, tmp_path / "checkpoints").run(available_now=True)
    assert scan_cells(hbase_client, f"{source}_copy") == scan_cells(hbase_client, source)
