"""The sinks under the interleavings their own workloads never produce, against real
HBase, Kafka, Spark, Delta and Phoenix: random batch boundaries, a concurrent writer, two
pipelines over one table, two sources with the same db.table."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import ColumnFamily
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import SCHEMA_ID, encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import dedupe, events_of, parse
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.layouts.base import FoldHooks
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.delta.views import hbase_state_rows
from cdcflow.pipeline.sinks.hbase.mutations import cell_mutations
from cdcflow.verify.hbase import compare_rows, rows_of

# sinks made directly, outside a pipeline: Kafka is not read by what these tests do with them
NO_ENDPOINTS = Endpoints(bootstrap_servers="unused:9092")

TYPES = [CellType.PUT] * 8 + [CellType.DELETE, CellType.DELETE_COLUMN, CellType.DELETE_FAMILY,
                              CellType.DELETE_FAMILY_VERSION]  # fmt: skip


def hbase_event(source: str, table: str, cells: list[Cell], seq: int) -> bytes:
    op = Op.UPDATE if any(c.type is CellType.PUT for c in cells) else Op.DELETE
    info = SourceInfo("hbase", source, "default", table, 1_700_000_000_000 + seq, (seq, 0),
                      extra={"region": "r1", "cluster_id": "c1"})  # fmt: skip
    return encode(ChangeEvent(cells[0].row, op, info, cells=tuple(cells)))


def random_change(rng: random.Random, row: bytes) -> list[Cell]:
    """One mutation of one row: 1-3 cells of random types over few columns and timestamps 1..8."""
    cells = []
    for _ in range(rng.randint(1, 3)):
        t = rng.choice(TYPES)
        family = rng.choice([b"cf", b"cg"])
        qualifier = b"" if t in (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION) else rng.choice(
            [b"a", b"b", b"c"])  # fmt: skip
        value = b"v%d" % rng.randrange(10**6) if t is CellType.PUT else b""
        cells.append(Cell(row, family, qualifier, rng.randint(1, 8), t, value))
    return cells


def test_delta_state_equals_hbase_for_any_batching_shuffled_and_duplicated(
    hbase_client: HBaseClient, kafka: dict[str, Any], tmp_path: Path
) -> None:
    """The same changes written to a real HBase table (in order) and applied to the Delta state in
    random batches, shuffled, a third of them twice: the state equals HBase's, version by version.
    (Item 1: with one version kept, [put@5, put@3] then [Delete@5] left the column deleted.)"""
    rng = random.Random(15)
    name = f"rb{uuid.uuid4().hex[:8]}"
    hbase_client.create_table(name, [ColumnFamily("cf", max_versions=8), ColumnFamily("cg", max_versions=8)])
    rows = [b"r%02d" % i for i in range(12)]
    events = []
    for seq in range(1, 251):  # HBase applies them in this order: the positions say so too
        cells = random_change(rng, rng.choice(rows))
        # (the HBase sink's own cell → mutation mapping: it must make HBase apply every cell)
        for m in cell_mutations(cells[0].row, cells):
            hbase_client.mutate(name, m)
        events.append(hbase_event("rb", name, cells, seq))
    replay = events + rng.sample(events, k=len(events) // 3)
    rng.shuffle(replay)
    topic = f"{name}.default.{name}"
    k.create_topic(kafka["bootstrap_servers"], topic, partitions=3)
    k.produce_sync(kafka["bootstrap_servers"], topic, [(None, v) for v in replay])
    root = tmp_path / "state"
    cfg = PipelineConfig(
        topics=f"{name}\\..*", dead_letter_topic=f"{name}-dead", max_offsets_per_trigger=rng.randint(60, 90),
        # readers see 1 version; 8 kept; folds run between the batches (fold_rows) as well as at the end
        sinks=(SinkConfig(name="state", type="delta", options={"path": str(root), "fold_rows": 50}),),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": kafka["bootstrap_servers"], "zk_quorum": "unused"},
                        tmp_path / "checkpoints")  # fmt: skip
    assert pipeline.run(available_now=True)["state"] == "done"
    assert pipeline.spark is not None
    path = str(root / "rb" / "default" / name)
    batches = pipeline.spark.sql(f"DESCRIBE HISTORY delta.`{root / '_changes'}`").count()
    folds = pipeline.spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
    for versions in (8, 3, 1):
        report = compare_rows(rows_of(hbase_client.scan(name, max_versions=versions)),
                              hbase_state_rows(pipeline.spark, path, versions))  # fmt: skip
        assert report.clean and report.rows_compared >= 3, f"{versions}: {report.summary()} {report.examples}"
    assert batches >= 4  # the changes really arrived in several batches
    assert folds >= 2  # and were folded in several steps
    hbase_client.delete_table(name)


def events_frame(spark: SparkSession, values: list[bytes]) -> DataFrame:
    """Change events as the pipeline hands them to a sink (parsed, deduplicated), each keyed in
    Kafka by its change key as the captures key them."""
    raw = spark.createDataFrame(
        [("t", 0, i, json.dumps(json.loads(v)["key"]).encode(), v) for i, v in enumerate(values)],
        "topic string, partition int, offset long, key binary, value binary",
    )
    events = events_of(parse(raw))
    return dedupe(events)


class _OvertakenMerge(FoldHooks):
    """A Delta state sink's first MERGE is overtaken by another writer's commit: the MERGE's source blocks (in
    the Python worker reading it) until a thread of the test has committed the other writer's batch. The MERGE
    has already read the table by then."""

    def __init__(self, flags: Path) -> None:
        self.flags = flags

    def merge_source(self, path: str, batch: DataFrame) -> DataFrame:
        reading, committed = str(self.flags / "reading"), str(self.flags / "committed")

        def wait_for_the_other_writer(_row_key: bytes) -> bool:
            import os
            import time

            if not os.path.exists(committed):  # only the first MERGE waits
                open(reading, "w").close()
                deadline = time.monotonic() + 120
                while not os.path.exists(committed) and time.monotonic() < deadline:
                    time.sleep(0.05)
            return True

        barrier = F.udf(wait_for_the_other_writer, BooleanType()).asNondeterministic()
        # one partition: the other writer's jobs get the second core meanwhile
        return batch.coalesce(1).where(barrier("row_key"))


def test_a_concurrent_delta_writer_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Item 2: the stored state was read in one job and written back unconditionally; a commit by
    another writer in between was overwritten. Here the other writer commits while our MERGE runs
    (after it read the table, before it commits): Delta must refuse ours, and the MERGE runs again."""
    spark = build_session("cdcflow-test")
    path = str(tmp_path / "state")
    ours = [hbase_event("w", "t", [Cell(b"r%02d" % i, b"cf", b"a", 1, CellType.PUT, b"ours")], 10 + i)
            for i in range(20)]  # fmt: skip
    theirs = [hbase_event("w", "t", [Cell(b"r%02d" % i, b"cf", b"b", 1, CellType.PUT, b"theirs")], 100 + i)
              for i in range(0, 20, 2)]  # fmt: skip
    seed = [hbase_event("w", "t", [Cell(b"r%02d" % i, b"cf", b"c", 1, CellType.PUT, b"seed")], 1 + i)
            for i in range(0, 20, 4)]  # fmt: skip
    other = DeltaStateSink(
        "second", DeltaStateOptions(table_map={"w/default.t": path}, log_path=str(tmp_path / "log-2")), NO_ENDPOINTS
    )
    other.apply_batch(events_frame(spark, seed), 0)
    other.flush(spark)  # the table exists with some rows
    first = DeltaStateSink(
        "first", DeltaStateOptions(table_map={"w/default.t": path}, log_path=f"{tmp_path}/log-1"), NO_ENDPOINTS,
        hooks=_OvertakenMerge(tmp_path),
    )  # fmt: skip
    their_events = events_frame(spark, theirs)

    def other_writer() -> None:
        deadline = time.monotonic() + 120
        while not (tmp_path / "reading").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            other.apply_batch(their_events, 1)
            other.flush(spark)
        finally:
            (tmp_path / "committed").touch()

    thread = threading.Thread(target=other_writer)
    thread.start()
    conflicts = metrics.DELTA_CONFLICTS.labels("first")._value.get()
    with caplog.at_level("WARNING", logger="cdcflow.pipeline.sinks.delta"):
        first.apply_batch(events_frame(spark, ours), 0)
        first.flush(spark)  # the fold's MERGE is the one the other writer overtakes
    thread.join()
    # the conflict path ran: Delta refused the first commit and the MERGE ran again
    assert "another writer committed first" in caplog.text
    assert metrics.DELTA_CONFLICTS.labels("first")._value.get() > conflicts
    state = {bytes(r["row_key"]): dict(r["cells"]) for r in spark.read.format("delta").load(path).collect()}
    assert len(state) == 20
    for i in range(20):
        cells = state[b"r%02d" % i]
        assert bytes(cells["cf:a"]["value"]) == b"ours"
        assert (bytes(cells["cf:b"]["value"]) if "cf:b" in cells else None) == (b"theirs" if i % 2 == 0 else None)
        assert (bytes(cells["cf:c"]["value"]) if "cf:c" in cells else None) == (b"seed" if i % 4 == 0 else None)


def mysql_event(source: str, key: int, pos: list[int], after: dict[str, Any], db: str = "shop") -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": "c", "key": {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": source, "db": db, "table": "items", "ts_ms": 1_700_000_000_000,
                   "snapshot": False, "pos": pos},
        "ts_ms": 1_700_000_000_000,
    }).encode()  # fmt: skip


@pytest.fixture(scope="module")
def phoenix_url(services: Any) -> str:
    return str(services.endpoints("phoenix")["jdbc_url"])


def history_record(source: str, db: str) -> bytes:
    columns = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "v", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False, "key_order": None},
    ]
    record = {"kind": "table", "source": source, "db": db, "table": "items", "columns": columns, "pos": [1, 1, 0]}
    return json.dumps(record).encode()


def test_two_sources_with_the_same_table_stay_apart(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """Item 4: two MariaDB servers with the same db.table and the same positions. Before, dedupe
    dropped one source's events (same key and position), the Delta table was shared and the
    changelog identity left the source out."""
    prefix = f"ts{uuid.uuid4().hex[:8]}"
    bootstrap = kafka["bootstrap_servers"]
    db = f"shop_{prefix}"
    history = f"{prefix}-history"
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [(b"east", history_record("east", db)), (b"west", history_record("west", db))])
    records = []
    for source in ("east", "west"):
        topic = f"{prefix}.{source}.{db}.items"
        k.create_topic(bootstrap, topic, partitions=1)
        records = [(b'{"id":%d}' % i, mysql_event(source, i, [1, 100 + i, 0], {"id": i, "v": f"{source}-{i}"}, db))
                   for i in range(10)]  # fmt: skip
        k.produce_sync(bootstrap, topic, records)
    state, changelog = tmp_path / "state", tmp_path / "changelog"
    west_table = f"WEST_{prefix.upper()}.ITEMS"
    sinks = (
        SinkConfig(name="state", type="delta", options={"path": str(state), "schema_history_topic": history}),
        SinkConfig(name="changelog", type="delta_changelog", options={"path": str(changelog)}),
        SinkConfig(name="phoenix", type="phoenix", options={
            "url": phoenix_url, "create_tables": True, "schema_history_topic": history,
            "table_map": {f"west/{db}.items": west_table}}),
    )  # fmt: skip
    cfg = PipelineConfig(topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", sinks=sinks)
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}
    pipeline = Pipeline(cfg, context, tmp_path / "checkpoints")
    assert pipeline.run(available_now=True, max_failures=1) == {
        "state": "done", "changelog": "done", "phoenix": "done"}  # fmt: skip
    spark = pipeline.spark
    assert spark is not None
    for source in ("east", "west"):
        rows = spark.read.format("delta").load(str(state / source / db / "items")).collect()
        assert sorted((r["id"], r["v"]) for r in rows) == [(i, f"{source}-{i}") for i in range(10)]
    logged = spark.read.format("delta").load(str(changelog)).groupBy("source_name").count().collect()
    assert {r["source_name"]: r["count"] for r in logged} == {"east": 10, "west": 10}
    east = phoenix_jvm.query(f'SELECT V FROM "{db.upper()}"."ITEMS" ORDER BY ID')
    west = phoenix_jvm.query(f"SELECT V FROM {west_table} ORDER BY ID")
    assert [r[0] for r in east] == [f"east-{i}" for i in range(10)]
    assert [r[0] for r in west] == [f"west-{i}" for i in range(10)]

    # Without the table_map entry both would write one Phoenix table: refused, naming both sources.
    unmapped = cfg.model_copy(update={"sinks": (SinkConfig(name="phoenix2", type="phoenix", options={
        "url": phoenix_url, "create_tables": True, "schema_history_topic": history}),)})  # fmt: skip
    result = Pipeline(unmapped, context, tmp_path / "checkpoints-2").run(available_now=True, max_failures=1)
    assert result["phoenix2"].startswith("failed") and "two sources' positions do not compare" in result["phoenix2"]


def test_a_second_pipeline_over_the_same_phoenix_table_is_refused(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """Item 3: each sink dropped and cleared the shared stage table, so two pipelines wiped each
    other's staged rows and committed offsets with nothing applied. Now the second is refused
    while the first runs, and takes over once it stopped."""
    prefix = f"tw{uuid.uuid4().hex[:8]}"
    bootstrap = kafka["bootstrap_servers"]
    db = f"shop_{prefix}"
    history = f"{prefix}-history"
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [(b"db1", history_record("db1", db))])
    topic = f"{prefix}.{db}.items"
    k.create_topic(bootstrap, topic, partitions=1)
    k.produce_sync(bootstrap, topic, [(None, mysql_event("db1", i, [1, i, 0], {"id": i, "v": f"v{i}"}, db))
                                      for i in range(20)])  # fmt: skip
    options = {"url": phoenix_url, "create_tables": True, "schema_history_topic": history}

    def config(name: str) -> PipelineConfig:
        return PipelineConfig(topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", trigger_seconds=1,
                              sinks=(SinkConfig(name=name, type="phoenix", options=options),))  # fmt: skip

    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}
    first = Pipeline(config("first"), context, tmp_path / "first")
    stop = threading.Event()
    outcome: dict[str, str] = {}
    thread = threading.Thread(target=lambda: outcome.update(first.run(stop=stop)))
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if phoenix_jvm.query(f'SELECT COUNT(*) FROM "{db.upper()}"."ITEMS"')[0][0] == 20:
                    break
            except Exception:
                pass
            time.sleep(1)
        second = Pipeline(config("second"), context, tmp_path / "second")
        result = second.run(available_now=True, max_failures=1)
        assert result["second"].startswith("failed") and "is already written by sink 'first'" in result["second"]
    finally:
        stop.set()
        thread.join(120)
    assert outcome == {"first": "done"}
    # the first has stopped (and released its lease): the second may write now
    result = Pipeline(config("second"), context, tmp_path / "second").run(available_now=True)
    assert result == {"second": "done"}
