"""cdcflow as a library in a user's own PySpark job, against real Kafka, Spark and Delta.

The wheel is built from the repository and installed, with the lock's versions and nothing else of the
repository, into a fresh virtual environment of the newest Python here. The README's example runs there as it
is, in a process of its own (a user's job: its own SparkSession, built with `cdcflow.spark_conf()`). The same
process then tries the library's other ways in on that session: a micro-batch applied twice (as Spark replays
one after a crash), cdcflow's whole pipeline on the caller's session, and `parse_changes`. The test process
itself runs no Spark."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients import kafka as k
from cdcflow.dev.testing import unique_name
from cdcflow.events.json_codec import SCHEMA_ID

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
HISTORY_TOPIC = "cdcflow-mysql-schema-history"  # the capture's default, which the example's Endpoints assume
DB, TABLE = "shop", "orders"  # the table the example reads back by name


def readme_example() -> str:
    """The README's library example: the python block after its `library-example` marker."""
    text = README.read_text()
    found = re.search(r"<!-- library-example[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert found, "README.md has no library-example block"
    return found.group(1)


def newest_python() -> str:
    """The newest Python here that cdcflow supports (pyproject's requires-python: 3.11 to 3.13)."""
    found: dict[tuple[int, int], str] = {}
    candidates = [*Path.home().glob(".pyenv/versions/3.1*/bin/python3.1*"), *Path("/usr/bin").glob("python3.1*")]
    for path in candidates:
        name = re.fullmatch(r"python3\.(1[1-3])", path.name)
        if name and os.access(path, os.X_OK):
            found.setdefault((3, int(name.group(1))), str(path))
    return found[max(found)] if found else sys.executable


def uv() -> str:
    return shutil.which("uv") or str(ROOT / ".tools" / "bin" / "uv")


@pytest.fixture(scope="module")
def users_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh virtual environment with the wheel built from the repository and the lock's versions of its
    dependencies (no development ones): the Python of a user's job."""
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([uv(), "build", "--wheel", "--out-dir", str(root / "dist"), str(ROOT)], check=True,
                   capture_output=True, timeout=900)  # fmt: skip
    wheels = list((root / "dist").glob("cdcflow-*.whl"))
    assert len(wheels) == 1, wheels
    inside = zipfile.ZipFile(wheels[0]).namelist()
    assert any(n.startswith("cdcflow/_native.") and n.endswith(".so") for n in inside), "no compiled module"
    assert not [n for n in inside if n.startswith("cdcflow/dev/")], "the development side is in the wheel"
    pins = root / "pins.txt"
    subprocess.run([uv(), "export", "--frozen", "--no-dev", "--no-emit-project", "--no-hashes", "-q", "-o", str(pins)],
                   cwd=ROOT, check=True, timeout=120)  # fmt: skip
    subprocess.run([uv(), "venv", "-q", "--python", newest_python(), str(root / "venv")], check=True, timeout=120)
    python = str(root / "venv" / "bin" / "python")
    install = [uv(), "pip", "install", "-q", "--python", python, "-c", str(pins), str(wheels[0])]
    # From uv's cache when it holds every package (a second on this machine; asking the index costs 20 s), else
    # from the index (the first run on a machine).
    if subprocess.run([*install, "--offline"], capture_output=True, timeout=900).returncode != 0:
        subprocess.run(install, check=True, timeout=900)
    return python


def test_the_development_commands_say_where_they_come_from(users_python: str) -> None:
    """An install from the wheel has no local stack: `cdcflow stack` says so instead of failing on an import."""
    run = subprocess.run([users_python, "-m", "cdcflow.cli.main", "stack", "up"], capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode != 0
    assert "comes with a checkout of cdcflow's repository" in run.stderr, run.stderr


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
import sys as _sys
_out["cdcflow_file"] = cdcflow.__file__
_out["python"] = list(_sys.version_info[:2])
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


def test_the_readme_example_runs_from_the_wheel_as_a_users_job_and_applies_exactly_once(
    kafka: dict[str, Any], users_python: str, tmp_path: Path
) -> None:
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
    # The user's environment: their Python for Spark's workers too, nothing of the repository on the path.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "VIRTUAL_ENV")}
    env |= {"KAFKA_BOOTSTRAP": bootstrap, "CDC_TOPICS": re.escape(source) + r"\..*", "DATA_DIR": str(tmp_path / "data"),
            "CDC_SOURCE": source, "RESULT": str(result), "PYSPARK_PYTHON": users_python}  # fmt: skip
    run = subprocess.run([users_python, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(result.read_text())
    # it ran from the wheel, in the fresh environment
    assert Path(out["cdcflow_file"]).is_relative_to(Path(users_python).parents[1]), out["cdcflow_file"]
    assert tuple(out["python"]) == tuple(
        int(v) for v in subprocess.check_output([users_python, "-c", "import sys; print(*sys.version_info[:2])"],
                                                text=True).split()
    )  # fmt: skip

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
