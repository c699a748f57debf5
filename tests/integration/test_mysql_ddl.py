"""Decoding stays right across ALTER TABLE, and every schema change reaches the schema-history topic."""

from __future__ import annotations

from typing import Any

import orjson

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, read_all, source_config
from cdcflow.events.json_codec import decode
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows


def test_add_drop_and_modify_column_mid_stream(mysql_server: dict[str, Any], kafka: dict[str, Any]) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql_server)
    db = unique_name("ddl")
    execute(admin, f"CREATE DATABASE {db}")
    # (decoding across ALTER TABLE only: the re-reads that follow these ALTERs are tested in test_source_lifecycle)
    cfg = source_config(unique_name("ddlsrc"), [db], snapshot={"on_ddl": False})
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    t = f"{db}.t"
    try:
        execute(
            admin,
            f"CREATE TABLE {t} (id INT PRIMARY KEY, a INT, b VARCHAR(10))",
            f"INSERT INTO {t} VALUES (1, 10, 'one'), (2, 20, 'two'), (3, 30, 'three')",
            f"ALTER TABLE {t} ADD COLUMN c DECIMAL(5,2) DEFAULT 1.5 AFTER a",
            f"INSERT INTO {t} VALUES (4, 40, 4.25, 'four')",
            f"UPDATE {t} SET c = 9.99 WHERE id = 1",
            f"ALTER TABLE {t} DROP COLUMN b",
            f"UPDATE {t} SET a = a + 1 WHERE id IN (2, 4)",
            f"ALTER TABLE {t} MODIFY a BIGINT UNSIGNED",
            f"UPDATE {t} SET a = 18446744073709551615 WHERE id = 3",
            f"DELETE FROM {t} WHERE id = 2",
            f"UPDATE {t} SET c = c + 1",  # every row gets an image with the final columns
        )
        values = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.t"], expected=12)
    finally:
        capture.stop()
    events = [decode(v) for v in values]
    images = [(e.op.value, e.after or e.before) for e in events]
    assert images[:3] == [("c", {"id": i, "a": i * 10, "b": b}) for i, b in ((1, "one"), (2, "two"), (3, "three"))]
    assert images[3] == ("c", {"id": 4, "a": 40, "c": "4.25", "b": "four"})
    assert images[4] == ("u", {"id": 1, "a": 10, "c": "9.99", "b": "one"})
    assert events[4].before == {"id": 1, "a": 10, "c": "1.50", "b": "one"}  # the default filled in by ADD COLUMN
    assert images[5:7] == [("u", {"id": 2, "a": 21, "c": "1.50"}), ("u", {"id": 4, "a": 41, "c": "4.25"})]
    assert images[7] == ("u", {"id": 3, "a": 18446744073709551615, "c": "1.50"})
    assert images[8] == ("d", {"id": 2, "a": 21, "c": "1.50"})
    assert len(events) == 12
    rebuilt, _ = rebuild(values)
    report = compare_tables(source_rows(admin, db, "t"), rebuilt[(db, "t")])
    assert report.clean, report.examples

    history = [orjson.loads(r.value or b"") for r in consume(
        bootstrap, cfg.schema_history_topic, expected=sum(end_offsets(bootstrap, cfg.schema_history_topic).values())
    )]  # fmt: skip
    # (every DDL of the server is recorded, like Debezium's default; tests in the other lane alter tables meanwhile)
    ddl = [h["ddl"] for h in history if h["kind"] == "ddl" and db in h["ddl"]]
    assert [d.split()[0:3] for d in ddl] == [["CREATE", "TABLE", t], ["ALTER", "TABLE", t], ["ALTER", "TABLE", t],
                                             ["ALTER", "TABLE", t]]  # fmt: skip
    shapes = [[c["name"] + ":" + c["type"] for c in h["columns"]] for h in history if h["kind"] == "table"]
    assert shapes == [
        ["id:INT", "a:INT", "b:VARCHAR"],
        ["id:INT", "a:INT", "c:DECIMAL", "b:VARCHAR"],
        ["id:INT", "a:INT", "c:DECIMAL"],
        ["id:INT", "a:BIGINT UNSIGNED", "c:DECIMAL"],
    ]
    positions = [h["pos"] for h in history]
    assert positions == sorted(positions)  # history is in binlog order
