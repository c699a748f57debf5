"""The sinks follow what the source does to whole tables: a TRUNCATE empties every sink of the table
(Delta state and view, Phoenix), in its place among the row changes, and a change older than it that
arrives again later (at-least-once delivery) does not bring a row back."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession

from cdcflow.clients import kafka as k
from cdcflow.clients.mysql import execute, query
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.dev.testing import ServiceHarness, unique_name
from cdcflow.dev.testing.mysql import (
    WORKLOAD_TABLES,
    CaptureThread,
    MySqlWorkload,
    admin_endpoint,
    server_position,
    source_config,
)
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.log import WHOLE_TABLE
from cdcflow.pipeline.sinks.delta.records import deletes_path
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.delta.views import current_view
from cdcflow.verify.continuous import TableCheck
from cdcflow.verify.delta import MySqlDeltaWindows, verify_mysql_delta
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows
from cdcflow.verify.phoenix import verify_mysql_phoenix


def _truncates(sink: str, table: str) -> float:
    return float(metrics.TRUNCATES.labels(sink, table)._value.get())


def test_a_truncate_empties_delta_and_phoenix_and_older_changes_stay_out(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """3 rows, an update, TRUNCATE, 2 rows (one a key the truncate removed): every sink holds the 2 rows
    the source holds. Then the changes from before the truncate arrive again (a capture restarted from an
    old checkpoint sends them): the sinks still hold the 2 rows."""
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_trunc")
    admin = admin_endpoint(mariadb)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    source = source_config(unique_name("trunc"), [db])
    topic = f"{source.topic_prefix}.{db}.t"
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        execute(
            admin,
            f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two'), (3, 'three')",
            f"UPDATE {db}.t SET v = 'TWO' WHERE id = 2",
            f"TRUNCATE TABLE {db}.t",
            f"INSERT INTO {db}.t VALUES (4, 'four'), (1, 'one again')",
        )
        records = k.consume(bootstrap, topic, expected=7, timeout_s=60)
        assert len(records) == 7
    finally:
        capture.stop()

    state = tmp_path / "state"
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    history = source.schema_history_topic
    cfg = PipelineConfig(
        topics=source.topic_prefix.replace(".", "\\.") + "\\..*", dead_letter_topic=f"{source.name}-dead",
        sinks=(
            SinkConfig(name="trunc-phoenix", type="phoenix", options={
                "url": phoenix_url, "create_tables": True, "schema_history_topic": history}),
            SinkConfig(name="trunc-delta", type="delta", options={"path": str(state), "schema_history_topic": history}),
        ),
    )  # fmt: skip
    table = f"{db}.t"
    before = (_truncates("trunc-phoenix", table), _truncates("trunc-delta", table))
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}
    pipeline = Pipeline(cfg, context, tmp_path / "checkpoints")
    assert set(pipeline.run(available_now=True, max_failures=1).values()) == {"done"}
    # the truncate path ran in both sinks
    assert _truncates("trunc-phoenix", table) == before[0] + 1
    assert _truncates("trunc-delta", table) == before[1] + 1
    spark = pipeline.spark
    assert spark is not None
    path = str(state / source.name / db / "t")
    expected = {1: "one again", 4: "four"}

    def check() -> None:
        assert source_rows(admin, db, "t") == {
            '{"id":1}': {"id": 1, "v": "one again"},
            '{"id":4}': {"id": 4, "v": "four"},
        }
        folded = {r["id"]: r["v"] for r in spark.read.format("delta").load(path).collect()}
        viewed = {r["id"]: r["v"] for r in current_view(spark, path).collect()}
        assert folded == expected and viewed == expected
        report = verify_mysql_phoenix(admin, db, "t", phoenix_jvm, source=source.name)
        assert report.clean and report.rows_compared == 2, report.summary() + str(report.examples)

    check()
    truncated = spark.read.format("delta").load(deletes_path(path)).where(f"key = '{WHOLE_TABLE}'").count()
    assert truncated == 1

    # At-least-once: the four changes before the truncate arrive again, after it.
    old = [r for r in records if r.value and json.loads(r.value)["op"] in ("c", "u")][:4]
    assert len(old) == 4
    k.produce_sync(bootstrap, topic, [(r.key, r.value) for r in old])
    assert set(Pipeline(cfg, context, tmp_path / "checkpoints").run(available_now=True, max_failures=1).values()) == {
        "done"
    }
    check()


def _event(op: str, key: int | None, pos: list[int], after: dict[str, Any] | None, db: str) -> bytes:
    return json.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {} if key is None else {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": "lc", "db": db, "table": "items", "ts_ms": 1_700_000_000_000,
                   "snapshot": False, "pos": pos},
        "ts_ms": 1_700_000_000_000,
    }).encode()  # fmt: skip


def _frame(spark: SparkSession, values: list[bytes]) -> DataFrame:
    """Events as the pipeline hands them to a Delta sink (parsed; that sink takes them without the dedupe)."""
    rows = [("t", 0, i, None if json.loads(v)["op"] == "t" else json.dumps(json.loads(v)["key"]).encode(), v)
            for i, v in enumerate(values)]  # fmt: skip
    raw = spark.createDataFrame(rows, "topic string, partition int, offset long, key binary, value binary")
    return events_of(parse(raw))


@pytest.mark.parametrize("layout", ["typed", "json"])
def test_a_truncate_not_folded_yet_is_applied_by_the_view(layout: str, kafka: dict[str, Any], tmp_path: Path) -> None:
    """The view applies a truncate still in the change log; the fold then makes the state table equal;
    a change older than the truncate, logged after it, stays out of both."""
    spark = build_session("cdcflow-test")
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("lc")
    history = f"{db}-history"
    k.create_topic(bootstrap, history, partitions=1)
    columns = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "v", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False, "key_order": None},
    ]
    record = {"kind": "table", "source": "lc", "db": db, "table": "items", "columns": columns, "pos": [1, 0, 0]}
    k.produce_sync(bootstrap, history, [(b"lc", json.dumps(record).encode())])
    path = str(tmp_path / "items")
    options = DeltaStateOptions(
        table_map={f"lc/{db}.items": path}, log_path=str(tmp_path / "log"), schema_history_topic=history,
        mysql_layout=layout, fold_rows=1_000_000, fold_interval_s=3600,
    )  # fmt: skip
    sink = DeltaStateSink("lifecycle", options, Endpoints(bootstrap_servers=bootstrap))
    sink.query_id = "q"

    def rows(frame: DataFrame) -> dict[int, str]:
        if layout == "typed":
            return {r["id"]: r["v"] for r in frame.collect()}
        return {json.loads(r["key"])["id"]: json.loads(r["after"])["v"] for r in frame.collect()}

    inserts = [_event("c", i, [1, i, 0], {"id": i, "v": f"v{i}"}, db) for i in (1, 2, 3)]
    try:
        sink.apply_batch(_frame(spark, inserts), 0)
        sink.flush(spark)
        assert rows(current_view(spark, path)) == {1: "v1", 2: "v2", 3: "v3"}
        later = [_event("t", None, [2, 0, 0], None, db), _event("c", 4, [3, 1, 0], {"id": 4, "v": "v4"}, db),
                 _event("u", 1, [3, 1, 1], {"id": 1, "v": "new"}, db)]  # fmt: skip
        sink.apply_batch(_frame(spark, later), 1)
        # not folded: the state still has the three rows, the view applies the truncate
        assert len(rows(spark.read.format("delta").load(path))) == 3
        assert rows(current_view(spark, path)) == {1: "new", 4: "v4"}
        sink.flush(spark)
        assert rows(spark.read.format("delta").load(path)) == {1: "new", 4: "v4"} == rows(current_view(spark, path))
        sink.apply_batch(_frame(spark, [inserts[1], inserts[2]]), 2)  # older than the truncate, delivered again
        assert rows(current_view(spark, path)) == {1: "new", 4: "v4"}
        sink.flush(spark)
        assert rows(spark.read.format("delta").load(path)) == {1: "new", 4: "v4"} == rows(current_view(spark, path))
    finally:
        sink.close()
    tables, _ = rebuild([*inserts, *later, inserts[1]])
    assert compare_tables(
        tables[(db, "items")], {'{"id":1}': {"id": 1, "v": "new"}, '{"id":4}': {"id": 4, "v": "v4"}}
    ).clean


def test_verify_mysql_delta_compares_every_type_and_finds_a_difference(
    mariadb: dict[str, Any], kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """`cdcflow verify mysql-delta` (the CLI, as a user runs it) on typed tables of every supported type after a
    randomized workload: no differences; the JSON layout compares clean too; and a row changed in MariaDB behind
    the capture's back is reported as different."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("e2e_vdelta")
    workload = MySqlWorkload(admin, db, seed=50, account_ids=60)
    workload.create()
    source = source_config(unique_name("vdelta"), [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        for _ in range(40):
            workload.transaction()
        workload.close()  # a prepared XA transaction is finished as decided
        capture.wait_for_checkpoint(server_position(admin), timeout_s=120)
    finally:
        capture.stop()
    typed, json_root = tmp_path / "typed", tmp_path / "json"
    sinks = [
        {"name": "typed", "type": "delta", "options": {"path": str(typed), "register_in_catalog": False}},
        {"name": "json", "type": "delta", "options": {"path": str(json_root), "mysql_layout": "json",
                                                       "register_in_catalog": False}},
    ]  # fmt: skip
    config_path = tmp_path / "cdcflow.yaml"
    config_path.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": bootstrap},
        "hbase": {"zk_quorum": hbase["zk_quorum"]},
        "mysql": {"name": source.name, "host": mariadb["host"], "port": mariadb["port"], "user": mariadb["user"],
                  "password": mariadb["password"], "schema_history_topic": source.schema_history_topic},
        "pipeline": {"topics": source.topic_prefix.replace(".", "\\.") + "\\..*",
                     "checkpoint_dir": str(tmp_path / "checkpoints"), "dead_letter_topic": f"{source.name}-dead",
                     "sinks": sinks},
    }))  # fmt: skip
    cfg = PipelineConfig.model_validate(yaml.safe_load(config_path.read_text())["pipeline"])
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused",
               "mysql_schema_history_topic": source.schema_history_topic}  # fmt: skip
    pipeline = Pipeline(cfg, context, tmp_path / "checkpoints")
    assert set(pipeline.run(available_now=True, max_failures=1).values()) == {"done"}
    spark = pipeline.spark
    assert spark is not None

    tables = [f"{db}.{t}" for t in WORKLOAD_TABLES]
    result = subprocess.run(
        [sys.executable, "-m", "cdcflow.cli.main", "verify", "mysql-delta", "--sink", "typed", *tables,
         "--config", str(config_path)], capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    found = dict(re.findall(rf"^mysql-delta ({db}\.\w+): no differences: (\d+) rows compared", result.stdout, re.M))
    assert set(found) == set(tables) and int(found[f"{db}.accounts"]) > 10, result.stdout
    for table in WORKLOAD_TABLES:
        report = verify_mysql_delta(admin, db, table, spark, str(json_root / source.name / db / table))
        assert report.clean and report.rows_compared > 0, f"json {table}: {report.summary()} {report.examples}"

    # A change the capture never saw: the sink now differs from the source, and verify says so.
    (some_id,) = query(admin, f"SELECT MIN(id) FROM {db}.accounts")[0]
    execute(
        admin, f"UPDATE {db}.accounts SET balance = balance + 1, seen = '2001-02-03 04:05:06.7' WHERE id = {some_id}"
    )
    accounts = str(typed / source.name / db / "accounts")
    report = verify_mysql_delta(admin, db, "accounts", spark, accounts)
    assert report.different == 1 and report.missing == report.extra == 0, report.summary()
    assert "balance" in report.examples[0] and "seen" in report.examples[0], report.examples

    # --sample: rolling windows of 7 keys cover the table in turn, each finding what is in its range: the
    # changed row, and a row deleted behind the capture's back (only the sink has it), the table's last one.
    (last_id, count) = query(admin, f"SELECT MAX(id), COUNT(*) FROM {db}.accounts")[0]
    execute(admin, f"DELETE FROM {db}.accounts WHERE id = {last_id}")
    windows = MySqlDeltaWindows(admin, db, "accounts", spark, accounts, (), sample=7)
    check = TableCheck(f"mysql-delta {db}.accounts", windows.look, windows)
    rounds = [check.round(grace_s=0) for _ in range(-(-count // 7) + 1)]
    assert rounds[-1].range_start == "(start)" and rounds[-2].range_end == "(end)"  # wrapped around once
    one_pass = rounds[:-1]
    assert sum(r.rows_compared for r in one_pass) == count  # every row once (the deleted one from the sink)
    assert sum(r.different for r in one_pass) == 1 and sum(r.extra for r in one_pass) == 1
    assert sum(r.missing for r in one_pass) == 0
    assert rounds[0].different == 1 and rounds[-2].extra == 1, [r.summary() for r in rounds]
    assert one_pass[-1].outstanding == 2  # both, though each round looked at its window only
    assert rounds[-1].outstanding == 2 and rounds[-1].rows_compared == 7


def _caught_up(capture: CaptureThread, admin: Any, timeout_s: float = 180) -> None:
    """Until the capture has published everything the server wrote, and read again every table a DDL asked for."""
    deadline = time.monotonic() + timeout_s
    while True:
        capture.wait_for_checkpoint(server_position(admin), timeout_s=max(1.0, deadline - time.monotonic()))
        snapshot = capture.capture.snapshot
        if snapshot is None or not snapshot.active:
            capture.wait_for_checkpoint(server_position(admin), timeout_s=60)
            return
        assert time.monotonic() < deadline, f"the re-reads did not finish: {snapshot.progress}"
        time.sleep(0.5)


def _sinks(state: Path, phoenix_url: str, history: str, **phoenix: Any) -> tuple[SinkConfig, ...]:
    return (
        SinkConfig(name="ddl-delta", type="delta", options={"path": str(state), "schema_history_topic": history,
                                                          "register_in_catalog": False}),
        SinkConfig(name="ddl-phoenix", type="phoenix", options={
            "url": phoenix_url, "create_tables": True, "schema_history_topic": history, **phoenix}),
    )  # fmt: skip


def test_column_changes_that_rewrite_rows_are_followed_by_delta_and_phoenix(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """One table through every column change that rewrites rows without row events, with rows between them:
    the capture reads the table again after each, and both sinks end equal to MariaDB (verify clean), the
    dropped column's old values gone, the re-added one NULL, the defaulted one filled, 1.2345 kept whole."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("e2e_cols")
    t = f"{db}.t"
    execute(
        admin, f"CREATE DATABASE {db}",
        f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR(8), price DECIMAL(5,2), c VARCHAR(4))",
        f"INSERT INTO {t} VALUES (1, 10, 'x', 1.50, 'c1'), (2, 20, 'y', 2.25, 'c2'), (3, 30, 'z', 3.00, 'c3')",
    )  # fmt: skip
    source = source_config(unique_name("cols"), [db], snapshot={"tables": [t]})
    state = tmp_path / "state"
    cfg = PipelineConfig(
        topics=source.topic_prefix.replace(".", "\\.") + "\\..*", dead_letter_topic=f"{source.name}-dead",
        sinks=_sinks(state, services.endpoints("phoenix")["jdbc_url"], source.schema_history_topic),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}, tmp_path / "checkpoints")
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        _caught_up(capture, admin)  # the rows there before the capture, read by the initial snapshot
        # the sinks' tables exist with the first shape before any column changes
        assert set(pipeline.run(available_now=True, max_failures=1).values()) == {"done"}
        execute(
            admin,
            f"INSERT INTO {t} VALUES (4, 40, 'w', 4.75, 'c4')",
            f"ALTER TABLE {t} ADD COLUMN d INT",  # nullable, no default: existing rows NULL, nothing to read again
            f"INSERT INTO {t} (id, a, b, price, c, d) VALUES (5, 50, 'v', 5.50, 'c5', 5)",
            f"ALTER TABLE {t} MODIFY a BIGINT",
            f"UPDATE {t} SET a = 9000000000 WHERE id = 2",
            f"ALTER TABLE {t} DROP COLUMN b",
            f"ALTER TABLE {t} RENAME COLUMN c TO cc",
            f"ALTER TABLE {t} MODIFY price DECIMAL(12,4)",
            f"UPDATE {t} SET price = 1.2345 WHERE id = 1",
            f"ALTER TABLE {t} ADD COLUMN b INT",  # the dropped column again: its old values must not come back
            f"ALTER TABLE {t} ADD COLUMN s VARCHAR(8) NOT NULL DEFAULT 'new'",
            f"INSERT INTO {t} (id, a, price, cc, d, b, s) VALUES (6, 60, 6.0625, 'c6', 6, 66, 'six')",
        )
        _caught_up(capture, admin)
    finally:
        capture.stop()
    assert capture.capture.stats.ddl_rereads >= 5, capture.capture.stats  # the capture really read it again
    assert capture.capture.stats.ddl_not_followed == 0
    result = pipeline.run(available_now=True, max_failures=1)
    assert set(result.values()) == {"done"}, result
    spark = pipeline.spark
    assert spark is not None
    path = str(state / source.name / db / "t")
    rows = {r["id"]: r.asDict() for r in current_view(spark, path).collect()}
    assert rows[1]["price"] == Decimal("1.2345") and rows[1]["b"] is None and rows[1]["s"] == "new"
    assert rows[2]["a"] == 9000000000 and rows[1]["cc"] == "c1" and rows[6]["b"] == 66
    report = verify_mysql_delta(admin, db, "t", spark, path)
    assert report.clean and report.rows_compared == 6, report.summary() + str(report.examples)
    report = verify_mysql_phoenix(admin, db, "t", phoenix_jvm, source=source.name)
    assert report.clean and report.rows_compared == 6, report.summary() + str(report.examples)


def test_drops_renames_swaps_and_new_keys_are_followed(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """With the sinks' tables made first: DROP TABLE empties the sinks' table; DROP + CREATE starts from nothing;
    the online-migration swap (a copy made with a new column, then RENAME TABLE t TO _t_del, _t_gho TO t, then
    DROP _t_del) leaves t's sinks equal to the new t; a new primary key re-keys the Delta table and makes
    cdcflow's Phoenix table again with the new key."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("e2e_life")
    execute(admin, f"CREATE DATABASE {db}")
    source = source_config(unique_name("life"), [db])
    state = tmp_path / "state"
    cfg = PipelineConfig(
        topics=source.topic_prefix.replace(".", "\\.") + "\\..*", dead_letter_topic=f"{source.name}-dead",
        sinks=_sinks(state, services.endpoints("phoenix")["jdbc_url"], source.schema_history_topic),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}, tmp_path / "checkpoints")
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        execute(
            admin,
            f"CREATE TABLE {db}.gone (id INT PRIMARY KEY, v VARCHAR(8))",
            f"INSERT INTO {db}.gone VALUES (1, 'a'), (2, 'b')",
            f"CREATE TABLE {db}.again (id INT PRIMARY KEY, v VARCHAR(8))",
            f"INSERT INTO {db}.again VALUES (1, 'old'), (2, 'old')",
            f"CREATE TABLE {db}.orders (id INT PRIMARY KEY, v VARCHAR(8))",
            f"INSERT INTO {db}.orders VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            f"CREATE TABLE {db}.regions (id INT, region VARCHAR(4), v VARCHAR(8), PRIMARY KEY (id))",
            f"INSERT INTO {db}.regions VALUES (1, 'us', 'first')",
        )
        _caught_up(capture, admin)
        assert set(pipeline.run(available_now=True, max_failures=1).values()) == {"done"}
        execute(
            admin,
            f"DROP TABLE {db}.gone",
            f"DROP TABLE {db}.again",
            f"CREATE TABLE {db}.again (id INT PRIMARY KEY, v VARCHAR(8))",
            f"INSERT INTO {db}.again VALUES (3, 'new')",
            f"CREATE TABLE {db}._orders_gho (id INT PRIMARY KEY, v VARCHAR(8), w INT NOT NULL DEFAULT 7)",
            f"INSERT INTO {db}._orders_gho (id, v) SELECT id, v FROM {db}.orders",
            f"DELETE FROM {db}.orders WHERE id = 3",
            f"DELETE FROM {db}._orders_gho WHERE id = 3",
            f"UPDATE {db}._orders_gho SET w = 8 WHERE id = 2",  # the copy differs from the original now
            f"RENAME TABLE {db}.orders TO {db}._orders_del, {db}._orders_gho TO {db}.orders",
            f"DROP TABLE {db}._orders_del",
            f"INSERT INTO {db}.orders VALUES (4, 'd', 9)",
            f"ALTER TABLE {db}.regions DROP PRIMARY KEY, ADD PRIMARY KEY (id, region)",
            f"INSERT INTO {db}.regions VALUES (1, 'eu', 'second')",
        )
        _caught_up(capture, admin)
    finally:
        capture.stop()
    assert capture.capture.stats.ddl_not_followed == 0
    result = pipeline.run(available_now=True, max_failures=1)
    assert set(result.values()) == {"done"}, result
    spark = pipeline.spark
    assert spark is not None

    def delta_rows(table: str) -> dict[int, Any]:
        return {r["id"]: r.asDict() for r in current_view(spark, str(state / source.name / db / table)).collect()}

    assert delta_rows("gone") == {} and delta_rows("_orders_gho") == {} and delta_rows("_orders_del") == {}
    for table in ("again", "orders", "regions"):
        report = verify_mysql_delta(admin, db, table, spark, str(state / source.name / db / table))
        assert report.clean and report.rows_compared > 0, f"delta {table}: {report.summary()} {report.examples}"
        report = verify_mysql_phoenix(admin, db, table, phoenix_jvm, source=source.name)
        assert report.clean and report.rows_compared > 0, f"phoenix {table}: {report.summary()} {report.examples}"
    for gone in ("GONE", "_ORDERS_GHO"):
        assert phoenix_jvm.query(f'SELECT COUNT(*) FROM "{db.upper()}"."{gone}"')[0][0] == 0


def _hbase_event(op: str, row: bytes, pos: list[int], cells: list[tuple[int, bytes]], before_ts: int | None = None
                 ) -> bytes:  # fmt: skip
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    event: dict[str, Any] = {
        "schema": SCHEMA_ID, "op": op, "key": {"row": b64(row)},
        "source": {"connector": "hbase", "name": "hb", "db": "default", "table": "items", "ts_ms": pos[0],
                   "snapshot": False, "pos": pos, "region": "" if op == "t" else "r1", "cluster_id": "c1"},
        "cells": [{"family": b64(b"cf"), "qualifier": b64(b"q"), "ts": ts, "type": "Put", "value": b64(value)}
                  for ts, value in cells],
        "ts_ms": pos[0],
    }  # fmt: skip
    if before_ts is not None:
        event["truncate"] = {"cause": "truncate", "before_ts": before_ts}
    return json.dumps(event).encode()


def test_an_hbase_truncate_not_folded_yet_is_applied_by_the_view(
    kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """The HBase peer's op t event (every cell older than before_ts gone): the current view applies it while it
    is still in the change log, the fold then rewrites the state table, and a cell older than it that is logged
    afterwards stays out of both."""
    spark = build_session("cdcflow-test")
    path = str(tmp_path / "items")
    options = DeltaStateOptions(table_map={"hb/default.items": path}, log_path=str(tmp_path / "log"),
                                fold_rows=1_000_000, fold_interval_s=3600, max_versions=3)  # fmt: skip
    context = {"bootstrap_servers": kafka["bootstrap_servers"], "zk_quorum": hbase["zk_quorum"]}
    sink = DeltaStateSink("hbase-lifecycle", options, Endpoints.of(context))
    sink.query_id = "q"

    def rows(frame: DataFrame) -> dict[bytes, bytes]:
        return {bytes(r["row_key"]): bytes(r["cells"]["cf:q"]["value"]) for r in frame.collect() if r["exists"]}

    def state() -> DataFrame:
        return spark.read.format("delta").load(path)

    try:
        sink.apply_batch(_frame(spark, [_hbase_event("u", b"a", [10, 0], [(1000, b"a1")]),
                                        _hbase_event("u", b"b", [11, 0], [(1000, b"b1")])]), 0)  # fmt: skip
        sink.flush(spark)
        assert rows(current_view(spark, path)) == {b"a": b"a1", b"b": b"b1"}
        later = [
            _hbase_event("t", b"", [2000, 0], [], before_ts=2000),
            _hbase_event("u", b"c", [12, 0], [(2500, b"c1")]),
            _hbase_event("u", b"a", [13, 0], [(2600, b"a2")]),
        ]
        sink.apply_batch(_frame(spark, later), 1)
        assert rows(state()) == {b"a": b"a1", b"b": b"b1"}  # not folded yet
        assert rows(current_view(spark, path)) == {b"a": b"a2", b"c": b"c1"}
        sink.flush(spark)
        assert rows(state()) == {b"a": b"a2", b"c": b"c1"} == rows(current_view(spark, path))
        late = [_hbase_event("u", b"d", [9, 0], [(1500, b"d0")]), _hbase_event("u", b"c", [9, 1], [(1400, b"c0")])]
        sink.apply_batch(_frame(spark, late), 2)  # written before the truncate, delivered after it
        assert rows(current_view(spark, path)) == {b"a": b"a2", b"c": b"c1"}
        sink.flush(spark)
        assert rows(state()) == {b"a": b"a2", b"c": b"c1"} == rows(current_view(spark, path))
        stored = {bytes(r["row_key"]): [p["ts"] for p in r["puts"]] for r in state().collect()}
        assert stored == {b"a": [2600], b"c": [2500]}  # the older versions are gone from the state, not only hidden
    finally:
        sink.close()
