"""Oracle MySQL 8.0: what its binlog holds that MariaDB's does not, read by the capture from a
real mysqld and rebuilt from Kafka equal to SELECT *.

MySQL writes savepoints, XA and DDL differently from MariaDB (decision 0015): a ROLLBACK TO SAVEPOINT
removes the undone rows from the binlog itself, XA transactions are marked by their first statement
(XA START / XA COMMIT / XA ROLLBACK) instead of GTID flags, compressed transactions arrive as one
TRANSACTION_PAYLOAD event, and JSON columns are MySQL's binary JSON.
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import orjson
import pytest

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import MySqlEndpoint, connect, execute
from cdcflow.dev.testing import ServiceHarness, unique_name
from cdcflow.dev.testing.mysql import (
    CaptureThread,
    admin_endpoint,
    position_reached,
    private_server,
    repl_endpoint,
    server_position,
    source_config,
)
from cdcflow.errors import ConfigError
from cdcflow.sources.mysql.preflight import preflight
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows

JSON_DOCS = [
    '{"a": 1, "b": [1, 2.5, "x"], "n": null, "t": true, "f": false}',
    '{"longer key": {"nested": [-32768, 65535, 70000, -70000, 4294967296, 18446744073709551615]}, "k": "é😀"}',
    '[]', '{}', '"a \\\\"quoted\\\\" \\\\n string"', '3.5', '1e20', '0.000012345', '-9223372036854775808', 'null',
]  # fmt: skip


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def all_values(bootstrap: str, topics: list[str]) -> list[bytes]:
    out: list[bytes] = []
    for topic in topics:
        expected = sum(end_offsets(bootstrap, topic).values())
        out += [r.value for r in consume(bootstrap, topic, expected=expected, timeout_s=60) if r.value is not None]
    return out


def test_preflight_accepts_mysql_8_and_lists_what_it_needs(mysql: dict[str, Any], tmp_path: Path) -> None:
    info = preflight(repl_endpoint(mysql), replica_server_id=6501)
    assert info.mysql and info.version.startswith("8.0.") and ":" in info.gtid_executed
    # On a server of this test's own: on the shared one, another lane's capture would read events written
    # meanwhile without column names or with partial row images.
    with private_server(tmp_path, "mysql") as own:
        execute(admin_endpoint(own), "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
                "SET GLOBAL binlog_row_image = 'MINIMAL'")  # fmt: skip
        with pytest.raises(ConfigError) as err:
            preflight(repl_endpoint(own), replica_server_id=6501)
    text = str(err.value)
    assert "binlog_row_metadata=MINIMAL, needs binlog_row_metadata=FULL" in text
    assert "binlog_row_image=MINIMAL, needs binlog_row_image=FULL" in text


def test_mysql_savepoints_xa_ddl_json_and_compressed_transactions_rebuild_exactly(
    mysql: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql)
    db = unique_name("my8")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.inno (id INT PRIMARY KEY, v VARCHAR(20), j JSON)",
            f"CREATE TABLE {db}.myi (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=MyISAM")  # fmt: skip
    cfg = source_config(unique_name("my8src"), [db])
    conn, other, xa = (connect(admin_endpoint(mysql, database=db), autocommit=True) for _ in range(3))
    capture = CaptureThread(cfg, mysql, bootstrap).start()
    try:
        # JSON documents of every binary JSON type, half of them in compressed transactions
        for i, doc in enumerate(JSON_DOCS):
            compressed = "ON" if i % 2 else "OFF"
            run(conn, f"SET SESSION binlog_transaction_compression = {compressed}",
                f"INSERT INTO inno VALUES ({100 + i}, 'json', '{doc}')")  # fmt: skip
        run(conn, "SET SESSION binlog_transaction_compression = ON", "BEGIN",
            *(f"INSERT INTO inno VALUES ({200 + i}, 'batch', JSON_OBJECT('i', {i}, 'pad', REPEAT('p', {i * 50})))"
              for i in range(300)),
            "UPDATE inno SET j = JSON_ARRAY(j, 1) WHERE id BETWEEN 200 AND 250", "DELETE FROM inno WHERE id > 290",
            "COMMIT", "SET SESSION binlog_transaction_compression = OFF")  # fmt: skip
        # Partial JSON updates (the after image holds diffs), plain and compressed, with other columns changing too
        partial = [
            "JSON_SET(j, '$.a', 2)", "JSON_SET(j, '$.\"new key\"', JSON_ARRAY(1, 'x'))",
            "JSON_REPLACE(j, '$.b[1]', 9.25)", "JSON_REMOVE(j, '$.n')", "JSON_REMOVE(j, '$.b[0]')",
            "JSON_SET(j, '$.t', 'a longer string than before')",
            "JSON_SET(j, '$.b[5]', 'appended')", "JSON_SET(j, '$.zz', CAST('2024-01-02' AS DATE), '$.a', -1)",
            "JSON_REPLACE(j, '$.\"new key\"[1]', 'y')",
        ]  # fmt: skip
        run(conn, "SET SESSION binlog_row_value_options = 'PARTIAL_JSON'")
        for i, expr in enumerate(partial):
            run(conn, f"SET SESSION binlog_transaction_compression = {'ON' if i % 2 else 'OFF'}",
                f"UPDATE inno SET j = {expr}, v = 'p{i}' WHERE id = 100")  # fmt: skip
        run(conn, "UPDATE inno SET j = JSON_SET(j, '$.pad', 'q') WHERE id BETWEEN 260 AND 289",
            "SET SESSION binlog_row_value_options = ''",
            "SET SESSION binlog_transaction_compression = OFF")  # fmt: skip
        # Savepoints: MySQL drops the undone rows from the binlog and logs the SAVEPOINT statements.
        run(conn, "BEGIN", "INSERT INTO inno VALUES (1, 'a', NULL)", "SAVEPOINT s1",
            "INSERT INTO inno VALUES (2, 'rolled back', NULL)", "UPDATE inno SET v = 'rolled back' WHERE id = 1",
            "ROLLBACK TO s1", "INSERT INTO inno VALUES (3, 'after', '[1]')", "SAVEPOINT s2",
            "UPDATE inno SET v = 'committed' WHERE id = 1", "RELEASE SAVEPOINT s2", "COMMIT")  # fmt: skip
        run(conn, "BEGIN", "INSERT INTO inno VALUES (4, 'rolled back', NULL)", "ROLLBACK")
        run(conn, "BEGIN", "INSERT INTO myi VALUES (1, 'kept')", "ROLLBACK")  # MyISAM: logged as committed
        # DDL between rows; a key change
        run(conn, "ALTER TABLE inno ADD COLUMN extra INT NULL", "UPDATE inno SET extra = id % 3",
            "UPDATE inno SET id = 5, extra = 7 WHERE id = 3")  # fmt: skip
        # XA: committed and rolled back with an ordinary transaction between; one phase
        run(xa, f"XA START '{db}-x1'", "INSERT INTO inno VALUES (40, 'xa', NULL, 1)",
            "UPDATE inno SET v = 'xa' WHERE id = 1", f"XA END '{db}-x1'", f"XA PREPARE '{db}-x1'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (41, 'between', NULL, NULL)")
        run(xa, f"XA COMMIT '{db}-x1'")
        run(xa, f"XA START '{db}-x2'", "INSERT INTO inno VALUES (42, 'xa rolled back', NULL, NULL)",
            "DELETE FROM inno WHERE id = 41", f"XA END '{db}-x2'", f"XA PREPARE '{db}-x2'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (43, 'between', NULL, NULL)")
        run(xa, f"XA ROLLBACK '{db}-x2'")
        run(xa, f"XA START '{db}-x3'", "INSERT INTO inno VALUES (44, 'one phase', NULL, NULL)", f"XA END '{db}-x3'",
            f"XA COMMIT '{db}-x3' ONE PHASE")  # fmt: skip
        # Prepared before a restart, committed after it
        run(xa, f"XA START '{db}-x4'", "INSERT INTO inno VALUES (50, 'prepared', NULL, NULL)",
            "DELETE FROM inno WHERE id = 43", f"XA END '{db}-x4'", f"XA PREPARE '{db}-x4'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (51, 'after prepare', '{\"z\": 1}', NULL)")
        position = server_position(admin)
        capture.wait_for_checkpoint(position)
    finally:
        first = capture.stop()
    assert first.checkpoint is not None and position_reached(first.checkpoint.gtid_state, position)
    assert first.xa_waiting == 1 and first.xa_committed == 1 and first.xa_rolled_back == 1, first
    assert first.ddl == 1
    topics = [f"{cfg.topic_prefix}.{db}.{t}" for t in ("inno", "myi")]
    before_restart = sum(sum(end_offsets(bootstrap, t).values()) for t in topics)

    capture = CaptureThread(cfg, mysql, bootstrap).start()
    try:
        run(xa, f"XA COMMIT '{db}-x4'")
        run(other, "UPDATE inno SET v = 'last' WHERE id = 50")
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        second = capture.stop()
        for c in (conn, other, xa):
            c.close()
    assert second.xa_committed == 1 and second.xa_waiting == 0 and second.xa_unknown == 0
    assert second.events == 3  # x4's two rows and the update: nothing from before the restart again

    values = all_values(bootstrap, topics)
    assert len(values) == before_restart + 3
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    for table in ("inno", "myi"):
        report = compare_tables(source_rows(admin, db, table), rebuilt.get((db, table), {}))
        assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
    events = [orjson.loads(v) for v in values]
    positions = collections.Counter(
        (e["source"]["table"], orjson.dumps(e["key"]), tuple(e["source"]["pos"])) for e in events
    )
    assert max(positions.values()) == 1, "an event was published twice"
    assert not any("rolled back" in str((e.get("after") or {}).get("v")) for e in events)
    # positions count the executed GTID set: one more per transaction
    inserts = {e["after"]["id"]: e["source"]["pos"][0] for e in events if e["op"] == "c"}
    assert [inserts[100 + i] - inserts[100] for i in range(len(JSON_DOCS))] == list(range(len(JSON_DOCS)))
    # the partial updates were really written as diffs, and decoded into whole documents
    assert first.partial_json_rows == len(partial) + 30, first
    docs = {e["after"]["id"]: e["after"]["j"] for e in events if e["op"] == "c" and 100 <= e["after"]["id"] < 120}
    assert [orjson.loads(docs[100 + i]) for i in range(len(JSON_DOCS))] == [orjson.loads(d.replace("\\\\", "\\"))
                                                                           for d in JSON_DOCS]  # fmt: skip


def test_invisible_columns_and_generated_invisible_primary_keys(mysql: dict[str, Any], kafka: dict[str, Any]) -> None:
    """MySQL 8.0.23+ INVISIBLE columns, and tables given a generated invisible primary key (`my_row_id`,
    `sql_generate_invisible_primary_key=ON`, 8.0.30+): the binlog carries them, so the events do, keyed by
    the invisible key; the schema history marks them invisible; rebuilt tables equal the rows with them."""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql)
    db = unique_name("invis")
    execute(admin, f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.hidden (id INT PRIMARY KEY, secret VARCHAR(10) INVISIBLE, v INT)")  # fmt: skip
    cfg = source_config(unique_name("invsrc"), [db])
    capture = CaptureThread(cfg, mysql, bootstrap).start()
    try:
        execute(admin, "SET SESSION sql_generate_invisible_primary_key = ON",
                f"CREATE TABLE {db}.nokey (name VARCHAR(20), n INT)",
                f"INSERT INTO {db}.nokey VALUES ('a', 1), ('a', 1), ('b', 2)",  # two identical visible rows
                f"UPDATE {db}.nokey SET n = 5 WHERE name = 'b'", f"DELETE FROM {db}.nokey WHERE name = 'a' LIMIT 1",
                f"INSERT INTO {db}.hidden (id, secret, v) VALUES (1, 's1', 10), (2, 's2', 20)",
                f"UPDATE {db}.hidden SET secret = 'changed' WHERE id = 2")  # fmt: skip
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        capture.stop()
    values = all_values(bootstrap, [f"{cfg.topic_prefix}.{db}.hidden", f"{cfg.topic_prefix}.{db}.nokey"])
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    for table in ("hidden", "nokey"):
        report = compare_tables(source_rows(admin, db, table), rebuilt[(db, table)])
        assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
    assert len(rebuilt[(db, "nokey")]) == 2 and all('"my_row_id"' in k for k in rebuilt[(db, "nokey")])
    history = [orjson.loads(v) for v in all_values(bootstrap, [cfg.schema_history_topic])]
    columns = {(h["table"], c["name"]): c for h in history if h["kind"] == "table" for c in h["columns"]}
    assert columns[("hidden", "secret")].get("invisible") and not columns[("hidden", "v")].get("invisible")
    assert columns[("nokey", "my_row_id")]["key"] and columns[("nokey", "my_row_id")].get("invisible")


def test_tls_modes_and_rsa_password_exchange(mysql: dict[str, Any], kafka: dict[str, Any],
                                             services: ServiceHarness) -> None:  # fmt: skip
    """mysql.tls: the capture verifies the server's certificate against its CA (verify_ca) and streams; a
    host name the certificate does not carry (verify_identity) is a clear terminal error; without TLS, a
    user MySQL never saw (nothing cached for caching_sha2_password) logs in through the server's RSA key."""
    from dataclasses import replace

    from cdcflow.clients.mysql import MySqlTls, query
    from cdcflow.errors import TerminalError

    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql)
    ca = services.stack.home / "mysql" / "data" / "ca.pem"  # made by mysqld at its first start
    db = unique_name("tls")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    cfg = source_config(unique_name("tlssrc"), [db], tls={"mode": "verify_ca", "ca_file": str(ca)})
    capture = CaptureThread(cfg, mysql, bootstrap).start()
    try:
        execute(admin, f"INSERT INTO {db}.t VALUES (1, 'tls')")
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        stats = capture.stop()
    assert stats.events == 1
    verified = replace(repl_endpoint(mysql), tls=MySqlTls("verify_ca", str(ca)))
    assert query(verified, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1].startswith("TLS")
    with pytest.raises(TerminalError, match=r"TLS failed with mysql\.tls\.mode=verify_identity"):
        query(replace(verified, tls=MySqlTls("verify_identity", str(ca))), "SELECT 1")
    # a fresh caching_sha2_password user, no TLS: the password is RSA-encrypted with the server's public key
    user = unique_name("rsa")[:30]
    execute(admin, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED WITH caching_sha2_password BY 'pw-{user}'")
    plain = MySqlEndpoint(mysql["host"], mysql["port"], user, f"pw-{user}", tls=MySqlTls("disabled"))
    assert query(plain, "SHOW SESSION STATUS LIKE 'Ssl_version'")[0][1] == ""
    assert query(plain, "SELECT CURRENT_USER()")[0][0] == f"{user}@127.0.0.1"
