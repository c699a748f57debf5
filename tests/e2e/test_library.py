"""cdcflow as a library in a user's own PySpark job, against real Kafka, Spark and Delta.

The README's example runs as it is, in a Python process of its own (a user's job: its own SparkSession, built
with `cdcflow.spark_conf()`). The same process then tries the library's other ways in on that session: a
micro-batch applied twice (as Spark replays one after a crash), cdcflow's whole pipeline on the caller's
session, and `parse_changes`. The test process itself runs no Spark."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients import kafka as k
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.testing import unique_name

pytestmark = [pytest.mark.e2e]

README = Path(__file__).resolve().parents[2] / "README.md"
HISTORY_TOPIC = "cdcflow-mysql-schema-history"  # the capture's default, which the example's Endpoints assume
DB, TABLE = "shop", "orders"  # the table the example reads back by name


def readme_example() -> str:
    """The README's library example: the python block after its `library-example` marker."""
    text = README.read_text()
    found = re.search(r"<!-- library-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert found, "README.md has no library-example block"
    return found.group(1)


# Run after the example, in its process, with its names (spark, endpoints, topics, data, kafka).
AFTER_THE_EXAMPLE = """
import json as _json
_source = os.environ["CDC_SOURCE"]
_out = {}
_state = f"{data}/lake/{_source}/shop/orders"
_out["view"] = {str(r["id"]): r["qty"] for r in cdcflow.current_view(spark, _state).collect()}
_out["by_name"] = {str(r["id"]): r["qty"] for r in spark.table("shop.orders").collect()}

# A batch applied twice, as Spark replays the last one after a crash: the second time writes nothing.
_replayed = cdcflow.SinkConfig.of("replayed", cdcflow.DeltaStateOptions(path=f"{data}/replayed"))
with cdcflow.SinkApplier(spark, _replayed, endpoints, f"{data}/checkpoints") as _twice:
    def _apply_twice(records, batch_id):
        _twice(records, batch_id)
        _twice(records, batch_id)

    _query = (cdcflow.read_changes(spark, endpoints, topics, max_offsets_per_trigger=100)
              .writeStream.foreachBatch(_apply_twice).option("checkpointLocation", _twice.checkpoint)
              .trigger(availableNow=True).start())
    _query.awaitTermination()
    _twice.flush()
_out["replayed_view"] = {str(r["id"]): r["qty"]
                         for r in cdcflow.current_view(spark, f"{data}/replayed/{_source}/shop/orders").collect()}
_out["replayed_log"] = cdcflow.change_log(spark, f"{data}/replayed/_changes").count()
_out["replayed_log_rows"] = spark.read.format("delta").load(f"{data}/replayed/_changes").count()  # as stored
_out["replayed_progress"] = _json.loads(open(f"{data}/checkpoints/replayed/cdcflow-progress.json").read())

# cdcflow's whole pipeline on this session, which it leaves running
_files = cdcflow.SinkConfig.of("files", cdcflow.ParquetOptions(path=f"{data}/files"))
_out["pipeline"] = cdcflow.run_pipeline(spark, cdcflow.PipelineConfig(topics=topics, sinks=(_files,)), endpoints,
                                        f"{data}/pipeline", available_now=True)
_out["files"] = spark.read.parquet(f"{data}/files").count()
_out["same_session"] = spark.sparkContext._jsc is not None and not spark.sparkContext._jsc.sc().isStopped()

# every record, the malformed one with its problem
_records = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka)
            .option("subscribePattern", topics).load())
_out["problems"] = [r["problem"] for r in cdcflow.parse_changes(_records).where("problem IS NOT NULL").collect()]
open(os.environ["RESULT"], "w").write(_json.dumps(_out))
"""


def _event(source: str, op: str, key: int, seq: int, qty: int | None) -> bytes:
    now = int(time.time() * 1000)
    return json.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {"id": key}, "before": None,
        "after": None if qty is None else {"id": key, "qty": qty},
        "source": {"connector": "mysql", "name": source, "db": DB, "table": TABLE, "ts_ms": now, "snapshot": False,
                   "pos": [1, seq, 0]},
        "ts_ms": now,
    }).encode()  # fmt: skip


def _history(source: str) -> bytes:
    columns = [
        {"name": "id", "type": "BIGINT", "sql_type": "BIGINT", "nullable": False, "key": True, "key_order": 0},
        {"name": "qty", "type": "INT", "sql_type": "INT", "nullable": True, "key": False, "key_order": None},
    ]
    return json.dumps({"kind": "table", "source": source, "db": DB, "table": TABLE, "columns": columns}).encode()


def test_the_readme_example_runs_as_a_users_job_and_applies_exactly_once(kafka: dict[str, Any], tmp_path: Path) -> None:
    bootstrap = kafka["bootstrap_servers"]
    source = unique_name("lib")
    topic = f"{source}.{DB}.{TABLE}"
    k.create_topic(bootstrap, HISTORY_TOPIC, partitions=1)
    k.produce_sync(bootstrap, HISTORY_TOPIC, [(source.encode(), _history(source))])
    k.create_topic(bootstrap, topic, partitions=2)
    records: list[tuple[bytes, bytes]] = []
    expected: dict[str, int] = {}
    for seq in range(1, 201):  # inserts, updates of the same keys, every seventh change a delete
        key = seq % 60
        if seq % 7 == 0 and str(key) in expected:
            records.append((json.dumps({"id": key}).encode(), _event(source, "d", key, seq, None)))
            expected.pop(str(key))
        else:
            op = "u" if str(key) in expected else "c"
            records.append((json.dumps({"id": key}).encode(), _event(source, op, key, seq, seq * 10)))
            expected[str(key)] = seq * 10
    records.insert(57, (b"x", b"{not json"))  # a malformed record: a dead letter, not a stop
    k.produce_sync(bootstrap, topic, records)

    script = tmp_path / "my_job.py"
    script.write_text(readme_example() + AFTER_THE_EXAMPLE)
    result = tmp_path / "result.json"
    env = {**os.environ, "KAFKA_BOOTSTRAP": bootstrap, "CDC_TOPICS": re.escape(source) + r"\..*",
           "DATA_DIR": str(tmp_path / "data"), "CDC_SOURCE": source, "RESULT": str(result)}  # fmt: skip
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(result.read_text())

    # the example: the table equals the source, by path and by its catalog name; the example printed it
    assert out["view"] == expected
    assert out["by_name"] == expected
    assert re.search(r"\|\s*id\s*\|\s*qty\s*\|", run.stdout), run.stdout[-2000:]
    # applied twice per batch: the change log holds each change once (the second call found the batch's mark)
    assert out["replayed_view"] == expected
    assert out["replayed_log"] == 200
    assert out["replayed_log_rows"] == 200
    assert out["replayed_progress"]["total_rows"] == 2 * 200  # both calls ran and counted their rows
    # the pipeline ran on the caller's session and left it running
    assert out["pipeline"] == {"files": "done"}
    assert out["files"] == 200
    assert out["same_session"] is True
    assert out["problems"] == ["not a JSON object"]
    # the malformed record went to the dead-letter topic with its place, once per sink that owns it
    letters = [json.loads(r.value) for r in k.consume(bootstrap, "cdcflow-dead-letter", expected=10_000, timeout_s=10)]
    ours = [d for d in letters if d["topic"] == topic]
    assert {d["sink"] for d in ours} >= {"lake", "replayed"}
    assert all(d["offset"] is not None and d["error"] == "not a JSON object" for d in ours)
