"""The debezium format through the snapshot: rows read in chunks under watermarks (op r) while other
connections update, delete and insert the same rows; the table rebuilt from the Debezium records (with the
format's own readers) equals SELECT *. The snapshot drops a chunk's row when the stream changed that row
inside the chunk's window, comparing the row's identity: in this format the Kafka key is Debezium's key
struct, so each record carries the identity separately (HeldRecord.identity); this test fails if that
comparison misses."""

from __future__ import annotations

import json
import random
import threading
from typing import Any

from cdcflow.clients.kafka import TopicReader
from cdcflow.clients.mysql import connect, execute, query
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, server_position, source_config
from cdcflow.sources.mysql.debezium_fields import field_from_information_schema
from cdcflow.verify.mysql import compare_tables, key_json, source_rows


def test_a_snapshot_under_concurrent_writes_gives_the_table_in_the_debezium_format(
    mariadb: dict[str, Any], kafka: dict[str, Any],
) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("dbzsnap")
    execute(admin, f"CREATE DATABASE {db}",
            f"CREATE TABLE {db}.t (a INT NOT NULL, b VARCHAR(8) NOT NULL, amount DECIMAL(10,2), at DATETIME(3), "
            "day DATE, PRIMARY KEY (b, a))",
            f"INSERT INTO {db}.t SELECT seq, CONCAT('k', seq % 7), seq / 4, '2026-01-02 03:04:05.678', "
            f"'2026-11-27' FROM {db}.seq_1_to_20000")  # fmt: skip
    cfg = source_config(unique_name("dbzsnap"), [db], output={"format": "debezium"},
                        snapshot={"tables": [f"{db}.t"], "chunk_size": 500})  # fmt: skip
    stop = threading.Event()
    writes = {"n": 0}

    def write() -> None:  # random changes to rows the snapshot is reading
        r, conn = random.Random(7), connect(admin, autocommit=True)
        with conn.cursor() as cur:
            while not stop.is_set():
                a = r.randrange(1, 20000)
                b = f"k{a % 7}"
                choice = r.random()
                if choice < 0.6:
                    cur.execute(f"UPDATE {db}.t SET amount = amount + 1, day = '2027-01-01' WHERE a = %s AND b = %s",
                                (a, b))  # fmt: skip
                elif choice < 0.8:
                    cur.execute(f"DELETE FROM {db}.t WHERE a = %s AND b = %s", (a, b))
                else:
                    cur.execute(f"INSERT IGNORE INTO {db}.t VALUES (%s, %s, 1.50, NULL, NULL)", (a + 20000, b))
                writes["n"] += 1
        conn.close()

    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        deadline_rows = 0
        while True:  # until the snapshot is done
            cp = capture.capture.stats.checkpoint
            if cp is not None and cp.snapshot.get(f"{db}.t", {}).get("done"):
                break
            deadline_rows += 1
            assert deadline_rows < 1200, "the snapshot did not finish in 120 s"
            stop.wait(0.1)
    finally:
        stop.set()
        writer.join(10)
    capture.wait_for_checkpoint(server_position(admin))
    stats = capture.stop()
    assert stats.snapshot_rows > 10_000 and writes["n"] > 100, (stats.snapshot_rows, writes)

    rows = query(admin, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES' FROM "
                        "information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
                        "ORDER BY ORDINAL_POSITION", (db,))  # fmt: skip
    fields = [field_from_information_schema(str(n), str(d), str(c), bool(null)) for n, d, c, null in rows]
    reader = TopicReader(bootstrap, [f"{cfg.topic_prefix}.{db}.t"])
    table: dict[str, dict[str, Any]] = {}
    ops = {"c": 0, "u": 0, "d": 0, "r": 0}
    try:
        while batch := reader.poll(3.0):
            for record in batch:
                if record.value is None:
                    continue  # a tombstone after a delete
                event = json.loads(record.value)
                ops[event["op"]] += 1
                image = event["after"] or event["before"]
                row = {f.name: f.reader(binary=False)(image[f.name]) for f in fields}
                if event["op"] == "d":
                    table.pop(key_json(row, ("a", "b")), None)
                else:
                    table[key_json(row, ("a", "b"))] = row
    finally:
        reader.close()
    assert ops["r"] > 10_000 and ops["u"] and ops["d"], ops
    report = compare_tables(source_rows(admin, db, "t"), table)
    assert report.clean, report.summary() + "\n" + "\n".join(report.examples)
