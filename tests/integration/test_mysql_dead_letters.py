"""An event the decoder cannot handle stops the capture with an error that names it (default), or, with
`on_undecodable: dead_letter`, goes to the dead-letter topic with its raw bytes and position while the
capture goes on with everything else."""

from __future__ import annotations

import base64
import time
from typing import Any

import orjson
import pytest

from cdcflow.clients.kafka import end_offsets, read_latest
from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import (
    CaptureThread,
    admin_endpoint,
    position_reached,
    read_all,
    server_position,
    source_config,
)
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.undecodable import UndecodableEvent

# A column each server can have that the decoder refuses, and the error it gives
UNSUPPORTED = {
    "mariadb": ("VARCHAR(200) COMPRESSED", "compressed columns are not supported"),
    "mysql": ("VARCHAR(200) CHARACTER SET armscii8", "character set armscii8 is not supported"),
}
WRITE_ROWS = {"mariadb": 23, "mysql": 30}  # MariaDB writes v1 rows events, MySQL v2


def test_unsupported_column_is_dead_lettered_and_capture_continues(
    mysql_server: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    mariadb, (column, error) = mysql_server, UNSUPPORTED[mysql_server["flavor"]]
    admin = admin_endpoint(mariadb)
    db = unique_name("dlq")
    execute(admin, f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.squeezed (id INT PRIMARY KEY, body {column})",
            f"CREATE TABLE {db}.plain (id INT PRIMARY KEY, v VARCHAR(10))")  # fmt: skip
    cfg = source_config(unique_name("dlqsrc"), [db], on_undecodable="dead_letter")
    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    try:
        execute(admin, f"INSERT INTO {db}.squeezed VALUES (1, REPEAT('x', 150))",
                f"INSERT INTO {db}.plain VALUES (1, 'after')")  # fmt: skip
        plain = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.plain"], expected=1)
        dead = read_all(bootstrap, [cfg.dead_letter_topic], expected=2)
    finally:
        stats = capture.stop()
    assert len(plain) == 1 and orjson.loads(plain[0])["after"] == {"id": 1, "v": "after"}
    records = [orjson.loads(d) for d in dead]
    assert len(records) == 2 and stats.dead_letters == 2
    assert error in records[0]["error"]
    assert {r["table"] for r in records} == {f"{db}.squeezed"}
    assert "could not be decoded" in records[1]["error"]
    for r in records:
        raw = base64.b64decode(r["raw_event"])
        assert r["file"].startswith("binlog.") and r["gtid"] and r["end_pos"] == int.from_bytes(raw[13:17], "little")
        assert len(raw) == int.from_bytes(raw[9:13], "little")  # the whole event, as read from the binlog
    assert {base64.b64decode(r["raw_event"])[4] for r in records} == {19, WRITE_ROWS[mysql_server["flavor"]]}


def test_by_default_an_undecodable_event_stops_the_capture_naming_where(
    mysql_server: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    mariadb, (column, error) = mysql_server, UNSUPPORTED[mysql_server["flavor"]]
    admin = admin_endpoint(mariadb)
    db = unique_name("undec")
    execute(admin, f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.squeezed (id INT PRIMARY KEY, body {column})",
            f"CREATE TABLE {db}.plain (id INT PRIMARY KEY, v VARCHAR(10))")  # fmt: skip
    cfg = source_config(unique_name("undecsrc"), [db])
    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    execute(admin, f"INSERT INTO {db}.plain VALUES (1, 'before')")
    before_bad = server_position(admin)
    execute(admin, f"INSERT INTO {db}.squeezed VALUES (1, REPEAT('x', 150))")
    with_bad = server_position(admin)
    execute(admin, f"INSERT INTO {db}.plain VALUES (2, 'after')")
    deadline = time.monotonic() + 30
    while capture.error is None and time.monotonic() < deadline:  # the capture ends on its own
        time.sleep(0.1)
    with pytest.raises(UndecodableEvent) as failure:
        capture.stop()  # re-raises the capture thread's error
    message = str(failure.value)
    assert f"of table {db}.squeezed" in message and "binlog." in message and "(GTID none open)" not in message
    assert error in message and "on_undecodable is 'stop'" in message
    assert capture.capture.stats.restarts == 0  # terminal: not retried as if the server were unavailable
    stored = read_latest(bootstrap, cfg.offsets_topic, cfg.name.encode())
    # At the last transaction before the bad event, not past it. Bounds, not equality: the other lane's tests write
    # to the same server, so its transactions may come between the positions read here.
    assert stored is not None
    gtid_state = Checkpoint.from_bytes(stored).gtid_state
    assert position_reached(gtid_state, before_bad) and not position_reached(gtid_state, with_bad), gtid_state
    plain = f"{cfg.topic_prefix}.{db}.plain"
    assert sum(end_offsets(bootstrap, plain).values()) == 1  # nothing after it was published
