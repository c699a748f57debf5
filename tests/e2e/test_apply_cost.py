"""What a steady-state micro-batch costs each sink, counted in Spark jobs (a count, not a timing: timings
belong in benchmarks/). The Delta sinks' append path is one job per batch: parse, count and append in one
action, the log's idempotence kept by its batch marks instead of Delta's transaction ids (which recompute the
log's state, three jobs, on every commit). The HBase sink's is one job too: its executors write the tables
known to exist and report what they saw. A sink whose count grows fails here."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.dev.testing import unique_name
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import SCHEMA_ID, encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.pipeline.batch_jobs import jobs_per_batch, tasks_per_batch
from cdcflow.pipeline.kafka_source import READ_TASKS_PER_CORE
from cdcflow.pipeline.runner import Pipeline, checkpoint_query_id
from cdcflow.pipeline.sinks.delta.log import changes
from cdcflow.pipeline.sinks.delta.views import current_view

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

SOURCE, DB, TABLE = "jobs", "shop", "items"
BATCH, BATCHES = 40, 6
PARTITIONS = 24
SPARK_DEFAULT_CONSUMERS = 64  # spark.kafka.consumer.cache.capacity when a session does not set it
# Jobs of one steady-state batch (after the first, which creates the tables), per sink.
STEADY_JOBS = {"delta": 1, "log": 1, "files": 1}


def _event(op: str, key: int, seq: int, after: dict[str, Any] | None, db: str = DB, table: str = TABLE) -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": SOURCE, "db": db, "table": table, "ts_ms": int(time.time() * 1000),
                   "snapshot": False, "pos": [1, seq, 0]},
        "ts_ms": int(time.time() * 1000),
    }).encode()  # fmt: skip


def _history() -> bytes:
    return _history_of(DB, TABLE)


def _history_of(db: str, table: str) -> bytes:
    columns = [
        {"name": "id", "type": "BIGINT", "sql_type": "BIGINT", "nullable": False, "key": True, "key_order": 0},
        {"name": "qty", "type": "INT", "sql_type": "INT", "nullable": True, "key": False, "key_order": None},
    ]
    return json.dumps({"kind": "table", "source": SOURCE, "db": db, "table": table, "columns": columns}).encode()


def _batch_jobs(pipeline: Pipeline, checkpoints: Path, sink: str, ceiling: int) -> dict[int, list[str]]:
    """The jobs of each batch of `sink`'s query; every batch ran, and each after the first at most `ceiling`."""
    assert pipeline.spark is not None
    query = checkpoint_query_id(checkpoints / sink)
    assert query is not None
    batches = jobs_per_batch(pipeline.spark, query)
    # (Spark shares a batch's offsets among the topic's partitions, rounding: more partitions, perhaps a batch more)
    assert sorted(batches) == list(range(len(batches))) and len(batches) >= BATCHES, (sink, batches)
    steady = {b: jobs for b, jobs in batches.items() if b > 0}
    assert all(len(jobs) <= ceiling for jobs in steady.values()), (sink, steady)
    return batches


def _executor_consumers(spark: SparkSession) -> dict[str, int]:
    """The Kafka consumers open in the driver's JVM that read for tasks (client id -> the JVM's sequence number of
    the consumer, in the order they were made), from the metrics each registers while it is open."""
    jvm, gateway = spark.sparkContext._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    # (called through the interface: Py4J cannot reach the methods of the JVM's own, unexported server class)
    types = gateway.new_array(jvm.java.lang.Class, 2)
    types[0], types[1] = (jvm.java.lang.Class.forName(f"javax.management.{t}") for t in ("ObjectName", "QueryExp"))
    query = jvm.java.lang.Class.forName("javax.management.MBeanServer").getMethod("queryNames", types)
    args = gateway.new_array(jvm.java.lang.Object, 2)
    args[0] = jvm.javax.management.ObjectName("kafka.consumer:type=consumer-metrics,*")
    names = query.invoke(jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer(), args)
    ids = [str(name.getKeyProperty("client-id")) for name in names]
    return {i: int(i.rsplit("-", 1)[1]) for i in ids if re.fullmatch(r"consumer-spark-kafka-source-.*-executor-\d+", i)}


def test_a_steady_state_batch_of_the_delta_and_parquet_sinks_runs_one_spark_job_of_few_tasks(
    kafka: dict[str, Any], tmp_path: Path
) -> None:
    """And its records, from more topic partitions than the session has cores, are read in at most
    `READ_TASKS_PER_CORE` tasks per core (Spark's Kafka source plans a task per partition), by Kafka consumers
    kept from batch to batch: three queries over 24 partitions need 72, more than Spark keeps by default."""
    bootstrap = kafka["bootstrap_servers"]
    prefix = unique_name("jobs")
    k.create_topic(bootstrap, f"{prefix}-history", partitions=1)
    k.produce_sync(bootstrap, f"{prefix}-history", [(SOURCE.encode(), _history())])
    topic = f"{prefix}.{DB}.{TABLE}"
    k.create_topic(bootstrap, topic, partitions=PARTITIONS)  # (keyed: each key's changes in one partition, in order)
    records, expected = [], {}
    for seq in range(BATCH * BATCHES):
        key = seq % 70  # inserts, then updates of the same keys, every ninth change a delete
        op = "d" if seq % 9 == 8 and key in expected else ("u" if key in expected else "c")
        after = None if op == "d" else {"id": key, "qty": seq}
        records.append((json.dumps({"id": key}).encode(), _event(op, key, seq + 1, after)))
        if after is None:
            expected.pop(key, None)
        else:
            expected[key] = seq
    k.produce_sync(bootstrap, topic, records)
    cfg = PipelineConfig(
        topics=f"{prefix}\\.{DB}\\..*", dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=BATCH,
        sinks=(
            SinkConfig(name="delta", type="delta", options={"path": str(tmp_path / "delta"),
                                                             "schema_history_topic": f"{prefix}-history"}),
            SinkConfig(name="log", type="delta_changelog", options={"path": str(tmp_path / "log")}),
            SinkConfig(name="files", type="parquet", options={"path": str(tmp_path / "files")}),
        ),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap}, tmp_path / "checkpoints")
    running = SparkSession.getActiveSession()  # (the lane's session, when an earlier test started it)
    consumers_before = _executor_consumers(running) if running is not None else {}
    assert pipeline.run(available_now=True) == dict.fromkeys(STEADY_JOBS, "done")
    spark = pipeline.spark
    assert spark is not None
    # one consumer per query and partition, made once: none closed and made again (Spark's pool, past its capacity,
    # closes the oldest idle ones on every borrow, and the next batch connects again)
    made = sorted(n for i, n in _executor_consumers(spark).items() if i not in consumers_before)
    read = changes(spark, str(tmp_path / "log")).select("kafka_partition").distinct().count()  # (keys may miss one)
    assert read * len(STEADY_JOBS) > SPARK_DEFAULT_CONSUMERS, read
    assert len(made) == len(STEADY_JOBS) * read and made[-1] - made[0] + 1 == len(made), made
    # the batch's records read by at most READ_TASKS_PER_CORE tasks per core (local[2]), then the sinks' shuffle
    shuffled = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    tasks_ceiling = READ_TASKS_PER_CORE * spark.sparkContext.defaultParallelism + shuffled
    for sink, ceiling in STEADY_JOBS.items():
        _batch_jobs(pipeline, tmp_path / "checkpoints", sink, ceiling)
        query = checkpoint_query_id(tmp_path / "checkpoints" / sink)
        assert query is not None
        tasks = {b: n for b, n in tasks_per_batch(spark, query).items() if b > 0}
        assert tasks and all(n <= tasks_ceiling for n in tasks.values()), (sink, tasks, tasks_ceiling)
    # and the work was done: every change applied
    view = current_view(spark, str(tmp_path / "delta" / SOURCE / DB / TABLE))
    assert {r["id"]: r["qty"] for r in view.collect()} == expected
    assert changes(spark, str(tmp_path / "log")).count() == BATCH * BATCHES
    assert spark.read.parquet(str(tmp_path / "files")).count() == BATCH * BATCHES


def _hbase_event(table: str, row: bytes, seq: int, deleted: bool) -> bytes:
    cell = (Cell(row, b"cf", b"q", seq, CellType.DELETE_COLUMN, b"") if deleted
            else Cell(row, b"cf", b"q", seq, CellType.PUT, b"v%d" % seq))  # fmt: skip
    info = SourceInfo("hbase", SOURCE, "default", table, 1_700_000_000_000 + seq, (seq, 0),
                      extra={"region": "r1", "cluster_id": "c1"})  # fmt: skip
    return encode(ChangeEvent(row, Op.DELETE if deleted else Op.UPDATE, info, cells=(cell,)))


def test_a_steady_state_batch_of_the_hbase_sink_runs_one_spark_job(
    kafka: dict[str, Any], hbase: dict[str, Any], hbase_client: HBaseClient, tmp_path: Path
) -> None:
    """The executors write the tables known to exist and report what they saw; only the first batch, which
    brings the new target table, runs a second job (its rows, once the table is created)."""
    bootstrap = kafka["bootstrap_servers"]
    prefix = unique_name("jobs")
    table = unique_name("copy")
    topic = f"{prefix}.default.{table}"
    k.create_topic(bootstrap, topic, partitions=1)
    records, expected = [], {}
    for seq in range(1, BATCH * BATCHES + 1):  # puts and column deletes over 70 rows, one timestamp each
        row = b"r%02d" % (seq % 70)
        deleted = seq % 9 == 8
        records.append((row, _hbase_event(table, row, seq, deleted)))
        if deleted:
            expected.pop(row, None)
        else:
            expected[row] = b"v%d" % seq
    k.produce_sync(bootstrap, topic, records)
    cfg = PipelineConfig(
        topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=BATCH,
        sinks=(SinkConfig(name="copy", type="hbase", options={"table_suffix": "_copy", "create_tables": True}),),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": hbase["zk_quorum"]},
                        tmp_path / "checkpoints")  # fmt: skip
    assert pipeline.run(available_now=True) == {"copy": "done"}
    batches = _batch_jobs(pipeline, tmp_path / "checkpoints", "copy", 1)
    assert len(batches[0]) == 2, batches[0]  # the new table's rows, after it was created
    # and the work was done: the copy holds every row's newest value, the deleted columns gone
    copy = {c.row: c.value for c in hbase_client.scan(f"{table}_copy")}
    hbase_client.delete_table(f"{table}_copy")
    assert copy == expected


PHOENIX_TABLES = ("items", "orders", "users")
PHOENIX_STEADY_JOBS = 3  # the batch's tables and columns; every value checked; every table's rows written


def test_a_steady_state_batch_of_the_phoenix_sink_runs_three_spark_jobs_for_three_tables(
    kafka: dict[str, Any], services: Any, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """Three tables in every batch: one job finds the batch's tables and columns, one checks every value of every
    table against its column type (a value that does not fit stops the batch before anything is written), one
    writes the rows of every table. Each used to be one job per table, in threads of their own."""
    bootstrap = kafka["bootstrap_servers"]
    prefix = unique_name("jobs")
    db = f"shop_{prefix}"
    history = f"{prefix}-history"
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [(SOURCE.encode(), _history_of(db, t)) for t in PHOENIX_TABLES])
    topic = f"{prefix}.{db}"
    k.create_topic(bootstrap, topic, partitions=1)
    records, expected = [], {t: {} for t in PHOENIX_TABLES}  # type: dict[str, dict[int, int]]
    for seq in range(BATCH * BATCHES):
        table = PHOENIX_TABLES[seq % 3]
        key = (seq // 3) % 25
        op = "d" if seq % 11 == 10 and key in expected[table] else ("u" if key in expected[table] else "c")
        after = None if op == "d" else {"id": key, "qty": seq}
        records.append((json.dumps({"id": key}).encode(), _event(op, key, seq + 1, after, db, table)))
        if after is None:
            expected[table].pop(key, None)
        else:
            expected[table][key] = seq
    k.produce_sync(bootstrap, topic, records)
    url = str(services.endpoints("phoenix")["jdbc_url"])
    options = {"url": url, "create_tables": True, "schema_history_topic": history}
    cfg = PipelineConfig(
        topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=BATCH,
        sinks=(SinkConfig(name="phoenix", type="phoenix", options=options),),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}, tmp_path / "checkpoints")
    assert pipeline.run(available_now=True) == {"phoenix": "done"}
    _batch_jobs(pipeline, tmp_path / "checkpoints", "phoenix", PHOENIX_STEADY_JOBS)
    # and the work was done: each table holds every key's newest quantity, the deleted keys gone
    for table in PHOENIX_TABLES:
        rows = phoenix_jvm.query(f'SELECT "ID", "QTY" FROM "{db.upper()}"."{table.upper()}"')
        assert {int(r[0]): int(r[1]) for r in rows} == expected[table], table
