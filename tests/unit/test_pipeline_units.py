"""Pipeline pieces that need no Spark JVM: sink configuration, the state-row merge, error lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from pyspark.sql import Row

from cdcflow.cli.pipeline import format_progress
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.sinks import DeltaStateOptions, HBaseSinkOptions
from cdcflow.errors import ConfigError
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.runner import TOPICS_FILE, _first_line, check_topic_patterns
from cdcflow.pipeline.session import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    local_driver_conf,
    session_conf,
    spark_submit_command,
)
from cdcflow.pipeline.sinks.delta.fold_service import vacuum_is_safe
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.registry import make_sink

ENDPOINTS = Endpoints(bootstrap_servers="unused:9092")


def test_endpoints_are_checked_where_they_are_made() -> None:
    with pytest.raises(ConfigError, match="bootstrap_servers is required"):
        Endpoints.of({"zk_quorum": "zk:2181"})
    with pytest.raises(ConfigError, match="unknown bootstrap; known: bootstrap_servers"):  # a typo names the keys
        Endpoints.of({"bootstrap": "k:9092"})
    with pytest.raises(ConfigError, match="jdbc:phoenix:"):
        Endpoints("k:9092", phoenix_url="zk:2181")
    with pytest.raises(ConfigError, match="json or avro"):
        Endpoints("k:9092", debezium_topics=(("x\\..*", "protobuf"),))
    given = Endpoints.of(
        {"bootstrap_servers": "k:9092", "heartbeat_topics": ["beats"], "debezium_topics": [["d", "avro"]]}
    )
    assert given.heartbeat_topics == ("beats",) and given.debezium_topics == (("d", "avro"),)
    assert Endpoints.of(given) is given
    # an hbase sink has a cluster to write to, or says what to set
    with pytest.raises(ConfigError, match="sink h: no HBase cluster to write to"):
        make_sink(SinkConfig(name="h", type="hbase"), ENDPOINTS)
    sink = make_sink(SinkConfig(name="h", type="hbase", options={"zk_quorum": "target:2181"}), ENDPOINTS)
    assert sink.context is ENDPOINTS


def test_sink_options_are_typed_and_checked_when_the_config_is_loaded() -> None:
    with pytest.raises(ValidationError, match="path"):
        SinkConfig(name="p", type="parquet")
    with pytest.raises(ValidationError, match="typed_columns"):
        SinkConfig(name="d", type="delta", options={"path": "/x", "typed_columns": {"cf:n": "int128"}})
    with pytest.raises(ValidationError, match="max_version"):  # a typo is an error, not the default
        SinkConfig(name="d", type="delta", options={"max_version": 3})
    with pytest.raises(ValidationError, match="retained_versions"):
        SinkConfig(name="d", type="delta", options={"max_versions": 3, "retained_versions": 2})
    with pytest.raises(ValidationError, match=r"write 'ns\.t'"):
        SinkConfig(name="h", type="hbase", options={"table_map": {"ns:t": "x"}})
    with pytest.raises(ConfigError, match=r"set path .* or log_path"):  # the change log needs a home
        DeltaStateSink("d", DeltaStateOptions(), ENDPOINTS)
    with pytest.raises(ConfigError, match=r"no path"):
        DeltaStateSink("d", DeltaStateOptions(log_path="/log"), ENDPOINTS).table_path("mysql", "db", "t")
    with pytest.raises(ValidationError, match="fold_rows"):
        SinkConfig(name="d", type="delta", options={"fold_rows": 0})
    sink = make_sink(
        SinkConfig(name="d", type="delta"), Endpoints("unused:9092", data_dir="/data")
    )  # default path beside the checkpoints
    assert isinstance(sink, DeltaStateSink)
    assert sink.table_path("hbase", "default", "users") == "/data/delta/hbase/default/users"
    assert sink.log_path == "/data/delta/_changes"
    assert DeltaStateOptions(max_versions=1000).kept_versions == 1000 and DeltaStateOptions().kept_versions == 8


def cell(q: bytes, ts: int, value: bytes, type_: str = "Put", pos: int = 1) -> Row:
    return Row(family=b"cf", qualifier=q, ts=ts, type=type_, value=value, pos=[pos, 0])


def test_query_errors_show_the_sinks_own_error_not_the_wrappers() -> None:
    text = (
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "x.py", line 1, in call\n'
        "py4j.protocol.Py4JJavaError: An error occurred while calling o1.collect.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure\n"
        "cdcflow.errors.HBaseTerminalError: TableNotFoundException: no regions for t_copy in hbase:meta\n"
    )
    assert _first_line(Exception(text)) == (
        "cdcflow.errors.HBaseTerminalError: TableNotFoundException: no regions for t_copy in hbase:meta"
    )
    assert _first_line(Exception("ValueError: bad\nmore")) == "ValueError: bad"
    # Py4J puts the Java exception on a line of its own, after ": " (a parquet sink writing under a file):
    py4j = ("py4j.protocol.Py4JJavaError: An error occurred while calling o780.parquet.\n"
            ": org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/x\n"
            "\tat org.apache.hadoop.fs.RawLocalFileSystem.mkdirs(RawLocalFileSystem.java:700)")  # fmt: skip
    assert _first_line(Exception(py4j)) == (
        "org.apache.hadoop.fs.ParentNotDirectoryException: Parent path is not a directory: file:/x"
    )
    assert _first_line(Exception("")) == "Exception"


def test_status_line() -> None:
    doc = {"batch_id": 3, "rows": 10, "total_rows": 99, "processed_rows_per_second": 12.5, "batch_duration_ms": 800,
           "last_source_ts_ms": 1000, "offsets_behind": 0}  # fmt: skip
    assert format_progress("copy", doc, 4000) == (
        "copy           batch 3: 10 rows (total 99), 12.5 rows/s, batch 800 ms, lag 3.0s, behind 0"
    )
    failing = format_progress("copy", {"state": "failing", "failures": 2, "error": "boom"}, 0)
    assert "FAILING (2x" in failing and "boom" in failing
    lost = format_progress("copy", {**doc, "unapplied": {"shop.items": 2}}, 4000).splitlines()
    assert lost[1].strip() == "shop.items: 2 change(s) NOT APPLIED (oversize, parts gone: in the dead-letter topic)"
    cuts = {
        "bank": {"gtid": "0-1-42", "source_ts_ms": 1000, "pending_transactions": 2,
                 "waiting_for": {"shop.transfers": [0, 1]}, "problem": None},
        "hr": {"gtid": None, "pending_transactions": 1, "waiting_for": {}, "problem": "too many changes"},
    }  # fmt: skip
    lines = [line.strip() for line in format_progress("lake", {**doc, "consistent_cuts": cuts}, 4000).splitlines()]
    assert lines[1:] == [
        "consistent cut of bank: after 0-1-42 (3s ago at the source), 2 transaction(s) waiting "
        "(next: shop.transfers 0/1)",
        "consistent cut of hr: no transaction whole yet, 1 transaction(s) waiting  CANNOT MOVE: too many changes",
    ]


def test_a_checkpoint_is_not_continued_under_another_topic_pattern(tmp_path: Path) -> None:
    cfg = PipelineConfig(topics=r"cdcflow\..*")
    check_topic_patterns(cfg, tmp_path, {"a": r"cdcflow\..*", "b": r"cdcflow\.mysql\..*"})  # new: recorded
    assert (tmp_path / "b" / TOPICS_FILE).read_text() == r"cdcflow\.mysql\..*"
    check_topic_patterns(cfg, tmp_path, {"a": r"cdcflow\..*", "b": r"cdcflow\.mysql\..*"})  # same: fine
    with pytest.raises(ConfigError, match=re.escape(r"b: cdcflow\.mysql\..* → x\.*")) as err:
        check_topic_patterns(cfg, tmp_path, {"a": r"cdcflow\..*", "b": r"x\.*"})
    assert "a:" not in str(err.value) and "move the checkpoint folder" in str(err.value)
    assert (tmp_path / "b" / TOPICS_FILE).read_text() == r"cdcflow\.mysql\..*"  # nothing rewritten
    # A checkpoint from before patterns were recorded was made with pipeline.topics.
    (tmp_path / "old" / "offsets").mkdir(parents=True)
    check_topic_patterns(cfg, tmp_path, {"old": r"cdcflow\..*"})
    (tmp_path / "older" / "offsets").mkdir(parents=True)
    with pytest.raises(ConfigError, match="older"):
        check_topic_patterns(cfg, tmp_path, {"older": r"cdcflow\.mysql\..*"})


def test_the_spark_envelope_is_derived_from_the_json_schema() -> None:
    from pyspark.sql.types import ArrayType, LongType, StringType, StructType

    from cdcflow.events.json_codec import json_schema
    from cdcflow.pipeline.envelope import ENVELOPE, spark_type

    fields = {f.name: f.dataType for f in ENVELOPE.fields}
    assert list(fields)[:-1] == list(json_schema()["properties"]) and "_corrupt" in fields
    assert isinstance(fields["key"], StringType) and isinstance(fields["after"], StringType)  # table-shaped: raw
    source = fields["source"]
    assert isinstance(source, StructType)
    names = {f.name: f.dataType for f in source.fields}
    assert isinstance(names["pos"], ArrayType) and isinstance(names["pos"].elementType, LongType)
    assert {"region", "cluster_id", "gtid", "file", "server_id"} <= set(names)  # every connector's details
    cells = fields["cells"]
    assert isinstance(cells, ArrayType) and isinstance(cells.elementType, StructType)
    assert [f.name for f in cells.elementType.fields] == ["family", "qualifier", "ts", "type", "value", "tags"]
    with pytest.raises(ConfigError, match="cannot hold"):
        spark_type({"type": "number"})


def test_every_sink_reads_table_map_keys_the_same_way() -> None:
    from cdcflow.pipeline.sinks.hbase import target_table
    from cdcflow.pipeline.sinks.naming import mapped_table
    from cdcflow.pipeline.sinks.phoenix.schema import target_name

    table_map = {"shop.orders": "SALES.ORDERS", "ns.t": "ns:t_mirror", "default.users": "users_mirror",
                 "eu/shop.orders": "EU.ORDERS"}  # fmt: skip
    assert mapped_table(table_map, "shop", "orders") == "SALES.ORDERS"
    assert mapped_table(table_map, "shop", "orders", "eu") == "EU.ORDERS"  # the source's own entry wins
    assert mapped_table(table_map, "shop", "orders", "us") == "SALES.ORDERS"
    assert mapped_table(table_map, "default", "users") == "users_mirror"
    assert mapped_table(table_map, "other", "users") is None
    assert target_table(HBaseSinkOptions(table_map=table_map), "hbase", "ns", "t") == "ns:t_mirror"
    assert target_table(HBaseSinkOptions(), "hbase", "default", "t") == "t_copy"
    assert target_name("shop", "orders", table_map, "upper") == ("SALES", "ORDERS")
    assert target_name("shop", "orders", table_map, "upper", "eu") == ("EU", "ORDERS")
    sink = DeltaStateSink("d", DeltaStateOptions(path="/root", table_map={"ns.t": "/elsewhere"}), ENDPOINTS)
    assert sink.table_path("hbase", "ns", "t") == "/elsewhere"
    assert sink.table_path("hbase", "ns", "u") == "/root/hbase/ns/u"
    assert sink.table_path("mysql-eu", "ns", "u") == "/root/mysql-eu/ns/u"  # two sources stay apart


class _EndingQuery:
    """A streaming query (the port the runner supervises) that runs its last batch while the
    supervisor looks at it: the progress read sees batch 1, then the query is over after batch 2."""

    def __init__(self) -> None:
        self.reads = 0

    @property
    def lastProgress(self) -> dict[str, object]:
        self.reads += 1
        batch = 1 if self.reads == 1 else 2
        behind = "500" if batch == 1 else "0"
        return {"batchId": batch, "numInputRows": 10, "durationMs": {"triggerExecution": 5},
                "sources": [{"metrics": {"maxOffsetsBehindLatest": behind}}]}  # fmt: skip

    @property
    def isActive(self) -> bool:
        return False

    def exception(self) -> None:
        return None


def test_the_last_batch_of_an_available_now_run_reaches_the_progress(tmp_path: Path) -> None:
    from cdcflow.pipeline.progress import read_progress
    from cdcflow.pipeline.queries import Query, QuerySink
    from cdcflow.pipeline.runner import Pipeline

    pipeline = Pipeline(PipelineConfig(sinks=(SinkConfig(name="c", type="console"),)), ENDPOINTS, tmp_path)
    runner = Query("c", [QuerySink("c", pipeline.sinks[0], "t")], "t", query=_EndingQuery())  # type: ignore[arg-type]
    pipeline._supervise(runner, available_now=True, max_failures=5)
    assert runner.done
    progress = read_progress(tmp_path)["c"]
    assert progress["spark_batch_id"] == 2 and progress["offsets_behind"] == 0


class _TopicsChangedQuery:
    """A query Spark's Kafka source failed because topics appeared during an AvailableNow run."""

    lastProgress = None
    isActive = False

    def exception(self) -> Exception:
        return RuntimeError(
            "[KAFKA_DATA_LOSS.MISMATCHED_TOPIC_PARTITIONS_BETWEEN_END_OFFSET_AND_PREFETCHED] Kafka data source in "
            "Trigger.AvailableNow should provide the same topic partitions in pre-fetched offset to end offset for "
            "each microbatch. The error could be transient - restart your query"
        )


def test_topics_appearing_during_available_now_restart_the_query_without_counting_a_failure(tmp_path: Path) -> None:
    """Five of these used to end the run as failed."""
    from cdcflow.pipeline.queries import Query, QuerySink
    from cdcflow.pipeline.runner import MAX_TOPIC_RESTARTS, Pipeline

    pipeline = Pipeline(PipelineConfig(sinks=(SinkConfig(name="c", type="console"),)), ENDPOINTS, tmp_path)
    runner = Query("c", [QuerySink("c", pipeline.sinks[0], "t")], "t")
    started = []
    pipeline._start = lambda r, available_now: started.append(r.name)  # type: ignore[method-assign]
    for _ in range(MAX_TOPIC_RESTARTS):
        runner.query = _TopicsChangedQuery()  # type: ignore[assignment]
        pipeline._supervise(runner, available_now=True, max_failures=5)  # sees the failure
        pipeline._supervise(runner, available_now=True, max_failures=5)  # restarts at once
    assert (runner.failures, runner.done, len(started)) == (0, False, MAX_TOPIC_RESTARTS)
    # beyond the cap it counts as a failure again (a source whose topics never settle)
    runner.query = _TopicsChangedQuery()  # type: ignore[assignment]
    pipeline._supervise(runner, available_now=True, max_failures=5)
    assert runner.failures == 1 and "MISMATCHED_TOPIC_PARTITIONS" in (runner.last_error or "")


def test_a_family_delete_after_other_deletes_of_its_family_gets_its_own_delete() -> None:
    """HBase's Delete.addFamily drops the cells of that family added before it in the same Delete,
    so [DeleteColumn cf:a@9, DeleteFamily cf@3] (two mutations in one WAL entry) as one Delete
    would lose the first marker. Found by the randomized Delta-vs-HBase test."""
    from cdcflow.events.cells import Cell, CellType
    from cdcflow.pipeline.sinks.hbase.mutations import cell_mutations

    cells = [
        Cell(b"r", b"cf", b"a", 9, CellType.DELETE_COLUMN), Cell(b"r", b"cg", b"b", 4, CellType.DELETE),
        Cell(b"r", b"cf", b"", 3, CellType.DELETE_FAMILY), Cell(b"r", b"cf", b"x", 1, CellType.PUT, b"v"),
        Cell(b"r", b"cf", b"", 8, CellType.DELETE_FAMILY),
    ]  # fmt: skip
    put, *deletes = cell_mutations(b"r", cells)
    assert put.kind == "put" and [len(d.ops) for d in deletes] == [2, 1, 1]
    assert [(op.family, op.delete) for d in deletes for op in d.ops] == [
        (b"cf", CellType.DELETE_COLUMN), (b"cg", CellType.DELETE), (b"cf", CellType.DELETE_FAMILY),
        (b"cf", CellType.DELETE_FAMILY),
    ]  # fmt: skip


def test_the_hbase_sink_sends_a_table_s_mutations_by_count_or_by_value_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big batches save round trips; the byte bound keeps big cells from piling into one request.
    The HBase client is the port here (a recording double); the batching is what is tested."""
    import base64

    import cdcflow.pipeline.sinks.hbase as hbase_sink

    calls: list[tuple[str, int]] = []

    class RecordingClient:
        def mutate_batch(self, table: str, mutations: list[object]) -> None:
            calls.append((table, len(mutations)))

        def close(self) -> None:
            calls.append(("closed", 0))

    monkeypatch.setattr(hbase_sink, "connect", lambda _zk: RecordingClient())

    def row(table: str, i: int, value: bytes) -> dict[str, object]:
        cell = {"family": base64.b64encode(b"cf").decode(), "qualifier": base64.b64encode(b"q").decode(),
                "ts": i + 1, "type": "Put", "value": base64.b64encode(value).decode(), "tags": None}  # fmt: skip
        return {"target": table, "row": f"r{i}".encode(), "cells": [cell]}

    small = [row("a", i, b"v") for i in range(25)] + [row("b", i, b"v") for i in range(3)]
    assert hbase_sink._write_partition(small, "zk", batch_mutations=10, batch_value_bytes=1 << 20) == 28
    assert calls == [("a", 10), ("a", 10), ("a", 5), ("b", 3), ("closed", 0)]

    calls.clear()
    big = [row("a", i, b"x" * 300) for i in range(7)]
    assert hbase_sink._write_partition(big, "zk", batch_mutations=1000, batch_value_bytes=1000) == 7
    assert calls == [("a", 4), ("a", 3), ("closed", 0)]  # 4 x 300 bytes passes 1,000


def test_the_hbase_sink_writes_a_row_s_changes_as_one_and_the_later_put_wins_a_tie(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A row's changes in position order (a backfilled value, then the stream's rewrite of the same column and
    timestamp, then a delete): one write where the rewrite replaced the backfilled put and the marker stays.
    A row seen again after other rows goes in a later call (one call gives a row one sequence id)."""
    import base64

    import cdcflow.pipeline.sinks.hbase as hbase_sink
    from cdcflow.clients.hbase.model import Mutation
    from cdcflow.events.cells import CellType

    calls: list[tuple[str, list[Mutation]]] = []

    class RecordingClient:
        def mutate_batch(self, table: str, mutations: list[Mutation]) -> None:
            calls.append((table, list(mutations)))

        def close(self) -> None:
            pass

    monkeypatch.setattr(hbase_sink, "connect", lambda _zk: RecordingClient())
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731

    def change(row: bytes, *cells: tuple[bytes, int, str, bytes]) -> dict[str, object]:
        return {"target": "t", "row": row, "cells": [
            {"family": b64(b"cf"), "qualifier": b64(q), "ts": ts, "type": kind, "value": b64(v), "tags": None}
            for q, ts, kind, v in cells]}  # fmt: skip

    rows = [
        change(b"r1", (b"a", 5, "Put", b"backfilled"), (b"b", 6, "Put", b"kept")),
        change(b"r1", (b"a", 5, "Put", b"streamed")),
        change(b"r1", (b"b", 4, "DeleteColumn", b"")),
        change(b"r2", (b"a", 1, "Put", b"x")),
        change(b"r1", (b"a", 5, "Put", b"again")),  # not next to its other changes
    ]
    assert hbase_sink._write_partition(rows, "zk") == 4
    (_, first), (_, second) = calls
    put, delete, other = first
    assert put.row == b"r1" and [(op.qualifier, op.value) for op in put.ops] == [(b"b", b"kept"), (b"a", b"streamed")]
    assert [(op.qualifier, op.delete) for op in delete.ops] == [(b"b", CellType.DELETE_COLUMN)]
    assert other.row == b"r2"
    assert [(m.row, [op.value for op in m.ops]) for m in second] == [(b"r1", [b"again"])]


def test_the_change_log_is_vacuumed_only_while_no_unfolded_change_is_near_its_retention() -> None:
    hour = 3_600_000
    now = 1_000 * 24 * hour
    assert vacuum_is_safe(now, None)  # nothing pending anywhere
    assert vacuum_is_safe(now, now - 5 * hour)
    assert vacuum_is_safe(now, now - 143 * hour)
    # a table not folded for six days: its changes' files are kept (no VACUUM until it is folded)
    assert not vacuum_is_safe(now, now - 144 * hour)
    assert not vacuum_is_safe(now, now - 240 * hour)


def test_cdcflow_sets_delta_s_session_catalog_only_when_the_user_named_none() -> None:
    assert session_conf({})["spark.sql.catalog.spark_catalog"] == DELTA_CATALOG
    theirs = {"spark.sql.catalog.spark_catalog": "io.unitycatalog.spark.UCSingleCatalog"}
    assert session_conf(theirs)["spark.sql.catalog.spark_catalog"] == theirs["spark.sql.catalog.spark_catalog"]
    assert "spark.sql.catalog.spark_catalog" not in session_conf({}, {"spark.sql.catalog.spark_catalog"})
    extensions = session_conf({"spark.sql.extensions": "org.example.TheirExtension"})["spark.sql.extensions"]
    assert extensions == f"org.example.TheirExtension,{DELTA_EXTENSION}"


def test_spark_submit_keeps_a_session_catalog_given_after_the_double_dash() -> None:
    cfg = PipelineConfig(spark_conf={"spark.sql.catalogImplementation": "hive"})
    ours = spark_submit_command(cfg, {}, "local[2]", (), "app.py")
    assert f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}" in ours
    assert "spark.sql.catalogImplementation=hive" in ours
    given = ("--conf", "spark.sql.catalog.spark_catalog=org.example.Catalog")
    theirs = spark_submit_command(cfg, {}, "local[2]", given, "app.py")
    assert not any(a.startswith("spark.sql.catalog.spark_catalog=org.apache") for a in theirs)
    assert theirs[-3:] == [*given, "app.py"]


def test_a_local_driver_gets_a_larger_heap_and_the_throughput_collector_unless_the_user_chose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS"):
        monkeypatch.delenv(variable, raising=False)
    ours = local_driver_conf({})
    assert ours["spark.driver.memory"] == "3g"
    assert ours["spark.driver.extraJavaOptions"].split() == ["-Duser.timezone=UTC", "-XX:+UseParallelGC"]
    # the user's heap and Java options win (theirs are used whole, as session_conf does)
    theirs = local_driver_conf({"spark.driver.memory": "8g", "spark.driver.extraJavaOptions": "-Dx=1"})
    assert theirs == {}
    assert local_driver_conf({}, {"spark.driver.memory"}).keys() == {"spark.driver.extraJavaOptions"}
    # a collector named in the JVM's option variables: a second one would stop the JVM from starting
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xss4m -XX:+UseG1GC")
    assert "spark.driver.extraJavaOptions" not in local_driver_conf({})
    # spark-submit: on a local master only
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    local = spark_submit_command(PipelineConfig(), {}, "local[2]", (), "app.py")
    assert (
        "spark.driver.memory=3g" in local
        and "spark.driver.extraJavaOptions=-Duser.timezone=UTC -XX:+UseParallelGC" in local
    )
    cluster = spark_submit_command(PipelineConfig(), {}, "spark://h:7077", (), "app.py")
    assert not any(a.startswith("spark.driver.memory") for a in cluster)
    assert "spark.driver.extraJavaOptions=-Duser.timezone=UTC" in cluster


def test_a_pipeline_of_delta_sinks_does_not_need_the_local_hbase(tmp_path: Path) -> None:
    """A stack of Kafka and MariaDB only (no HBase started): delta sinks of MySQL sources start; an hbase sink
    without a cluster of its own says that HBase is missing."""
    from cdcflow.cli.wiring import pipeline_context
    from cdcflow.config import CdcflowConfig
    from cdcflow.errors import CdcflowError

    def config(*sinks: SinkConfig) -> CdcflowConfig:
        return CdcflowConfig.model_validate({
            "stack": {"home": str(tmp_path / "stack")}, "kafka": {"bootstrap_servers": "k:9092"},
            "pipeline": {"sinks": [s.model_dump() for s in sinks]},
        })  # fmt: skip

    context = pipeline_context(config(SinkConfig(name="lake", type="delta")))
    assert (context.bootstrap_servers, context.zk_quorum) == ("k:9092", None)
    assert context.data_dir == str(tmp_path / "stack" / "pipeline")
    with pytest.raises(CdcflowError, match="hbase"):
        pipeline_context(config(SinkConfig(name="copy", type="hbase")))
    # an hbase sink with a cluster of its own asks the stack for nothing
    assert pipeline_context(config(SinkConfig(name="copy", type="hbase", options={"zk_quorum": "b:2181"}))).zk_quorum \
        is None  # fmt: skip
