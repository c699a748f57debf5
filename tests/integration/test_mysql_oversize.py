"""A row too large for one Kafka record (a 20 MB LONGBLOB) must neither stop the capture nor vanish: a
marker in the table's topic, the whole event in parts in the oversize topic, and the transactions after
it arrive as usual."""

from __future__ import annotations

import base64
import os
import time
from typing import Any

import orjson

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import connect, execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, read_all, source_config
from cdcflow.events.oversize import reassemble


def test_a_20_mb_row_is_published_as_marker_and_parts_and_capture_goes_on(
    mysql_server: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql_server)
    db = unique_name("big")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.blobs (id INT PRIMARY KEY, body LONGBLOB, note TEXT)",
            f"CREATE TABLE {db}.small (id INT PRIMARY KEY, v VARCHAR(10))")  # fmt: skip
    cfg = source_config(unique_name("bigsrc"), [db], oversize_topic=unique_name("oversize"))
    payload = os.urandom(20 * 2**20)
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        conn = connect(admin_endpoint(mysql_server, database=db), autocommit=True)
        with conn.cursor() as cur:
            cur.execute("INSERT INTO blobs VALUES (1, %s, 'twenty megabytes')", (payload,))
        conn.close()
        written = time.monotonic()
        for i in range(5):
            execute(admin, f"INSERT INTO {db}.small VALUES ({i}, 'after')")
        small = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.small"], expected=5, timeout_s=60)
        arrived = time.monotonic() - written
    finally:
        stats = capture.stop()
    assert len(small) == 5 and arrived < 60
    assert stats.oversize == 1 and stats.restarts == 0
    (marker_value,) = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.blobs"], expected=1)
    marker = orjson.loads(marker_value)
    assert marker["after"] == {"id": 1, "body": None, "note": "twenty megabytes"}
    info = marker["oversize"]
    assert info["columns"] == ["after.body"] and info["topic"] == cfg.oversize_topic
    parts = consume(bootstrap, cfg.oversize_topic, expected=sum(end_offsets(bootstrap, cfg.oversize_topic).values()))
    assert len(parts) == info["parts"] and {p.key for p in parts} == {info["id"].encode()}
    # the marker says where its parts are (the pipeline reads them there)
    assert [(info["partition"], o) for o in info["offsets"]] == sorted((p.partition, p.offset) for p in parts)
    full = orjson.loads(reassemble(p.value or b"" for p in parts))
    assert base64.b64decode(full["after"]["body"]) == payload and full["source"]["pos"] == marker["source"]["pos"]
