"""The pipeline reads the debezium format too: a randomized MariaDB workload captured twice, in Debezium's JSON
with Kafka Connect schemas and in Avro with the stack's registry, applied by one Delta sink; every table of
both equals SELECT * row by row, as with the cdcflow format. Records the pipeline cannot read (garbage, a
Debezium JSON record without its schema, bytes that are no Avro record the registry knows) go to the
dead-letter topic with their bytes and the reason.

Heartbeats (`output.heartbeat_topic`) in all three forms (cdcflow, Debezium JSON, Debezium Avro) are read by the
sinks as progress, never as events or dead letters: while the server stays idle, a continuously running
pipeline's sinks see their newest source time move past the start of the idle time (their lag does not grow)."""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from cdcflow.clients import kafka as k
from cdcflow.config.model import PipelineConfig, SinkConfig
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import (
    WORKLOAD_TABLES,
    CaptureThread,
    MySqlWorkload,
    admin_endpoint,
    run_and_catch_up,
    source_config,
)
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.sinks.delta.views import current_view
from cdcflow.verify.mysql import compare_tables, key_json, source_rows, table_columns


def test_debezium_json_and_avro_topics_apply_exactly_and_unreadable_records_are_dead_lettered(
    mariadb: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], tmp_path: Path,
) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("pdbz")
    workload = MySqlWorkload(admin, db, seed=36, account_ids=300)
    workload.create()
    names = (unique_name("pdj"), unique_name("pda"))
    beats = {"heartbeat_interval_s": 0.5}
    sources = (
        source_config(names[0], [db], output={"format": "debezium", "schemas": True,
                                              "heartbeat_topic": f"cdcflow.{names[0]}.heartbeat", **beats}),
        source_config(names[1], [db], output={"format": "debezium", "serialization": "avro",
                                              "heartbeat_topic": f"cdcflow.{names[1]}.heartbeat", **beats}),
    )  # fmt: skip
    captures = [CaptureThread(cfg, mariadb, bootstrap, registry_url=registry["url"]).start() for cfg in sources]
    run_and_catch_up(workload, 150, captures)
    garbage = [b"not json at all", b'{"before": null, "after": {"id": 1}, "op": "c", "source": {}}']
    k.produce_sync(bootstrap, f"{sources[0].topic_prefix}.{db}.accounts", [(b"k", g) for g in garbage])
    not_avro = b"\x00\x00\x00\x7f\xffno such schema"  # read by Spark's Avro path, which must refuse it too
    k.produce_sync(bootstrap, f"{sources[1].topic_prefix}.{db}.accounts", [(b"k", not_avro)])
    garbage.append(not_avro)

    pattern = rf"cdcflow\.({sources[0].name}|{sources[1].name})\..*"
    delta_root = tmp_path / "delta"
    config = PipelineConfig(
        topics=pattern, dead_letter_topic=f"{sources[0].name}-dead-letter", max_offsets_per_trigger=2000,
        sinks=(SinkConfig(name="delta", type="delta", options={"path": str(delta_root), "mysql_layout": "json",
                                                               "register_in_catalog": False}),),
    )  # fmt: skip
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused:2181", "schema_registry_url": registry["url"],
               "debezium_topics": [[rf"cdcflow\.{sources[0].name}\..*", "json"],
                                   [rf"cdcflow\.{sources[1].name}\..*", "avro"]],
               "debezium_heartbeat_topics": [s.output.heartbeat_topic for s in sources],
               "heartbeat_topics": [s.output.heartbeat_topic for s in sources]}  # fmt: skip
    pipeline = Pipeline(config, context, tmp_path / "checkpoints")
    assert pipeline.run(available_now=True) == {"delta": "done"}
    spark = pipeline.spark
    assert spark is not None

    for source in sources:
        for table in WORKLOAD_TABLES:
            keys = tuple(n for n, *_, pk in table_columns(admin, db, table) if pk)
            rows = current_view(spark, str(delta_root / source.name / db / table)).collect()
            rebuilt = {key_json(after, keys): after for after in (orjson.loads(r["after"]) for r in rows)}
            report = compare_tables(source_rows(admin, db, table), rebuilt)
            where = f"{source.output.serialization} {table}"
            assert report.clean, f"{where}: {report.summary()}\n" + "\n".join(report.examples)
            assert rebuilt or table == "xa_ledger", f"{where}: no rows"

    rows_applied = read_progress(tmp_path / "checkpoints")["delta"]["total_rows"]
    dead = k.consume(bootstrap, config.dead_letter_topic, expected=3, timeout_s=60)
    letters = [orjson.loads(r.value or b"") for r in dead]
    assert sorted(base64.b64decode(letter["raw_base64"]) for letter in letters) == sorted(garbage), letters
    assert all(letter["format"] == "debezium" for letter in letters)
    reasons = " | ".join(letter["error"] for letter in letters)
    assert "not JSON" in reasons and "without Kafka Connect's schema" in reasons, reasons
    assert "not an Avro record of a schema the registry has" in reasons, reasons

    # Idle: the captures run again (and one in the cdcflow format), the server changes nothing; a continuously
    # running pipeline counts their heartbeats as progress.
    plain_name = unique_name("pdc")
    plain = source_config(plain_name, [db], output={"heartbeat_topic": f"cdcflow.{plain_name}.hb", **beats})
    captures = [CaptureThread(cfg, mariadb, bootstrap, registry_url=registry["url"]).start()
                for cfg in (*sources, plain)]  # fmt: skip
    idle_from = int(time.time() * 1000)
    idle = SinkConfig(name="idle", type="parquet", topics=rf"cdcflow\.{plain.name}\..*|{plain.output.heartbeat_topic}",
                      options={"path": str(tmp_path / "idle")})  # fmt: skip
    continuous = config.model_copy(update={"trigger_seconds": 1, "sinks": (*config.sinks, idle)})
    stop = threading.Event()
    idle_context = {**context, "heartbeat_topics": [*context["heartbeat_topics"], plain.output.heartbeat_topic]}
    runner = Pipeline(continuous, idle_context, tmp_path / "checkpoints")
    log_versions = len(list((delta_root / "_changes" / "_delta_log").glob("*.json")))
    outcome: list[dict[str, str]] = []
    thread = threading.Thread(target=lambda: outcome.append(runner.run(stop=stop)), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 180
        while True:
            progress = read_progress(tmp_path / "checkpoints")
            newest = {sink: progress.get(sink, {}).get("last_source_ts_ms") or 0 for sink in ("delta", "idle")}
            if all(ts >= idle_from + 3000 for ts in newest.values()):
                break
            assert time.monotonic() < deadline, f"heartbeats did not move the sinks' progress: {progress}"
            assert thread.is_alive(), outcome
            time.sleep(1)
    finally:
        stop.set()
        thread.join(120)
        for capture in captures:
            capture.stop()
    assert outcome == [{"delta": "done", "idle": "done"}]
    progress = read_progress(tmp_path / "checkpoints")
    assert progress["delta"]["dead_letters"] == len(garbage) and progress["idle"]["dead_letters"] == 0, progress
    assert progress["delta"]["total_rows"] == rows_applied and progress["idle"]["total_rows"] == 0, progress
    # batches of heartbeats only were progress, not sink work: the Delta change log got no empty commits
    assert len(list((delta_root / "_changes" / "_delta_log").glob("*.json"))) == log_versions
