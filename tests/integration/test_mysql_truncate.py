"""TRUNCATE TABLE reaches the table's topic as an op t event at its place in the stream, in every partition,
in the cdcflow and the debezium formats; a truncate of a table the capture does not include does not. And the
shape of a table read before a row event described it (information_schema) is the binlog's."""

from __future__ import annotations

import time
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, generate_latest

from cdcflow.clients.kafka.client import consume, read_to_end
from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import WORKLOAD_TABLES, CaptureThread, admin_endpoint, source_config
from cdcflow.events.json_codec import decode
from cdcflow.sources.mysql.metrics import MySqlCaptureCollector
from cdcflow.sources.mysql.selected_values import describe_table
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows


def test_truncate_is_an_event_in_every_partition_at_its_place(
    mysql_server: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql_server)
    db, other = unique_name("trunc"), unique_name("trunc_other")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE DATABASE {other}")
    cfg = source_config(unique_name("truncsrc"), [db], topic_partitions=3)
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    t = f"{db}.t"
    try:
        execute(
            admin,
            f"CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(10))",
            f"CREATE TABLE {other}.t (id INT PRIMARY KEY)",
            f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
            f"UPDATE {t} SET v = 'bb' WHERE id = 2",
            f"INSERT INTO {other}.t VALUES (1)",
            f"TRUNCATE {other}.t",  # not captured: no event anywhere
            f"/* a client's comment */ TRUNCATE TABLE `{db}`.`t`",
            f"INSERT INTO {t} VALUES (4, 'd'), (1, 'again')",
        )
        # 3 inserts, 1 update, the truncate in each of 3 partitions, 2 inserts
        records = consume(bootstrap, f"{cfg.topic_prefix}.{db}.t", expected=9, timeout_s=60)
    finally:
        capture.stop()
    assert len(records) == 9, [(r.partition, r.offset, r.value) for r in records]
    assert capture.capture.stats.truncates == 1
    events = [(r, decode(r.value or b"")) for r in records]
    truncates = [(r, e) for r, e in events if e.op.value == "t"]
    assert sorted(r.partition for r, _ in truncates) == [0, 1, 2]
    assert all(r.key is None for r, _ in truncates)
    (_, first), *rest = truncates
    assert all(e == first for _, e in rest)  # the same event, once per partition
    assert first.key == b"{}" and first.before is None and first.after is None
    assert (first.source.db, first.source.table) == (db, "t")
    rows = sorted((e.source.pos, e.op.value) for _, e in events if e.op.value != "t")
    # every earlier change is before it, every later one after it
    assert [op for pos, op in rows if pos < first.source.pos] == ["c", "c", "c", "u"]
    assert [op for pos, op in rows if pos > first.source.pos] == ["c", "c"]
    rebuilt, malformed = rebuild([r.value or b"" for r in records])
    assert malformed == 0
    report = compare_tables(source_rows(admin, db, "t"), rebuilt[(db, "t")])
    assert report.clean and report.rows_compared == 2, report.examples


def test_truncate_in_the_debezium_format(mysql_server: dict[str, Any], kafka: dict[str, Any]) -> None:
    """Debezium writes a truncate as op "t" with no key and no images; so does cdcflow's debezium format."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql_server)
    db = unique_name("truncdbz")
    execute(admin, f"CREATE DATABASE {db}")
    cfg = source_config(unique_name("truncdbzsrc"), [db], output={"format": "debezium", "schemas": True})
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        execute(
            admin,
            f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))",
            f"INSERT INTO {db}.t VALUES (1, 'a')",
            f"TRUNCATE TABLE {db}.t",
        )
        # the insert, the truncate (a delete's tombstone would follow only deletes)
        records = consume(bootstrap, f"{cfg.topic_prefix}.{db}.t", expected=2, timeout_s=60)
    finally:
        capture.stop()
    last = records[-1]
    assert last.key is None
    envelope = orjson.loads(last.value or b"")["payload"]
    assert envelope["op"] == "t" and envelope["before"] is None and envelope["after"] is None
    assert envelope["source"]["db"] == db and envelope["source"]["table"] == "t"
    first = orjson.loads(records[0].value or b"")["payload"]
    assert envelope["source"]["cdcflow_pos"] > first["source"]["cdcflow_pos"]


def test_a_table_described_from_information_schema_as_the_binlog_describes_it(
    mysql_server: dict[str, Any], kafka: dict[str, Any]
) -> None:
    """The snapshot describes a table no row event described yet from information_schema (describe_table); the
    typed sinks build their tables from that record, so it must say what a TABLE_MAP says, type by type."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql_server)
    db = unique_name("describe")
    execute(admin, f"CREATE DATABASE {db}")
    for table, ddl in WORKLOAD_TABLES.items():
        execute(admin, f"CREATE TABLE {db}.{table} {ddl}")
    cfg = source_config(unique_name("describesrc"), [db])
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        execute(
            admin,
            f"INSERT INTO {db}.accounts (id) VALUES (1)",
            f"INSERT INTO {db}.order_lines (order_id, line) VALUES (1, 1)",
            f"INSERT INTO {db}.audit (id) VALUES (1)",
            f"INSERT INTO {db}.xa_ledger (id) VALUES (1)",
        )
        from_binlog: dict[str, Any] = {}
        deadline = time.monotonic() + 60
        while len(from_binlog) < len(WORKLOAD_TABLES) and time.monotonic() < deadline:
            records = read_to_end(bootstrap, cfg.schema_history_topic)
            docs = [orjson.loads(r.value or b"") for r in records]
            from_binlog = {d["table"]: d["columns"] for d in docs if d.get("kind") == "table" and d["db"] == db}
            time.sleep(0.5)
    finally:
        capture.stop()
    assert set(from_binlog) == set(WORKLOAD_TABLES)
    for table, columns in from_binlog.items():
        assert describe_table(admin, db, table) == columns, table


def test_a_ddl_on_a_table_without_a_key_is_said_loudly_and_key_columns_let_it_be_read_again(
    mariadb: dict[str, Any], kafka: dict[str, Any]
) -> None:
    """ADD COLUMN ... DEFAULT changes every row without row events; the capture reads the table again. A table
    without a primary key cannot be read in chunks: that is counted, exported per table (the status page
    warns) and logged with what to do; the same table with mysql.key_columns is read again."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("nokey")
    execute(
        admin,
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.bare (a INT, b VARCHAR(10))",
        f"CREATE TABLE {db}.named (a INT, b VARCHAR(10))",  # no index: mysql.key_columns names a
        f"INSERT INTO {db}.bare VALUES (1, 'x'), (2, 'y')",
        f"INSERT INTO {db}.named VALUES (1, 'x'), (2, 'y')",
    )
    cfg = source_config(unique_name("nokeysrc"), [db], key_columns={f"{db}.named": ["a"]})
    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    try:
        execute(admin, f"ALTER TABLE {db}.bare ADD COLUMN c VARCHAR(8) NOT NULL DEFAULT 'new'",
                f"ALTER TABLE {db}.named ADD COLUMN c VARCHAR(8) NOT NULL DEFAULT 'new'")  # fmt: skip
        named = consume(bootstrap, f"{cfg.topic_prefix}.{db}.named", expected=2, timeout_s=90)
        deadline = time.monotonic() + 60
        while capture.capture.stats.ddl_not_followed < 1:
            assert time.monotonic() < deadline, capture.capture.stats
            time.sleep(0.2)
    finally:
        capture.stop()
    stats = capture.capture.stats
    assert stats.ddl_not_followed == 1 and stats.ddl_rereads == 1, stats
    assert list(stats.not_followed) == [f"{db}.bare"] and "mysql.key_columns" in stats.not_followed[f"{db}.bare"]
    # the table with key columns was read again: its rows with the column's default
    assert sorted((orjson.loads(r.value or b"{}")["after"]["a"], orjson.loads(r.value or b"{}")["after"]["c"])
                  for r in named) == [(1, "new"), (2, "new")]  # fmt: skip
    registry = CollectorRegistry()
    registry.register(MySqlCaptureCollector(capture.capture))
    scraped = generate_latest(registry).decode()
    assert f'cdcflow_mysql_table_not_followed{{source="{cfg.name}",table="{db}.bare"}} 1.0' in scraped
