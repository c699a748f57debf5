"""The pipeline reads debezium-format Avro inside Spark (pipeline/debezium_avro.py: `from_avro`, SQL conversions,
the envelope's struct made directly) into the same events as the Python transcoder (events/debezium/transcode.py,
which tests/unit/test_debezium_transcode.py holds equal to the cdcflow format), field by field, for a randomized
MariaDB workload with every supported column type, multi-row statements, key changes, deletes and XA."""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, MySqlWorkload, admin_endpoint, run_and_catch_up, source_config
from cdcflow.pipeline.debezium_input import transcoded
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.session import build_session

IMAGES = ("key", "before", "after")  # JSON text: compared as values (the JVM and Python write doubles differently)


def _events(frame: DataFrame) -> dict[tuple[str, int, int], dict[str, Any]]:
    out = {}
    for row in frame.collect():
        event = row.asDict(recursive=True)
        for name in IMAGES:
            event[name] = json.loads(event[name]) if event[name] is not None else None
        out[(event["topic"], event["partition"], event["offset"])] = event
    return out


def test_spark_reads_debezium_avro_into_the_events_the_python_transcoder_makes(
    mariadb: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("dbzspark")
    workload = MySqlWorkload(admin_endpoint(mariadb), db, seed=25, account_ids=200)
    workload.create()
    cfg = source_config(unique_name("dbzs"), [db], output={"format": "debezium", "serialization": "avro"})
    capture = CaptureThread(cfg, mariadb, bootstrap, registry_url=registry["url"]).start()
    run_and_catch_up(workload, 120, [capture])

    spark: SparkSession = build_session("cdcflow-test")
    pattern = rf"{re.escape(cfg.topic_prefix)}\..*"
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
           .option("subscribePattern", pattern).option("startingOffsets", "earliest").load())  # fmt: skip
    in_spark = _events(events_of(parse(transcoded(raw, [(pattern, "avro")], registry["url"]))))
    # the same records through the Python transcoder (the path of a schema Spark's reader cannot take)
    in_python = _events(events_of(parse(transcoded(raw, [(pattern, "json")], registry["url"]))))

    assert len(in_spark) > 500 and {e["op"] for e in in_spark.values()} == {"c", "u", "d"}
    assert in_spark.keys() == in_python.keys()
    differing = [(at, in_spark[at], in_python[at]) for at in sorted(in_spark) if in_spark[at] != in_python[at]]
    assert not differing, f"{len(differing)} events differ; first: {differing[0]}"
