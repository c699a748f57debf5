"""Signals (`mysql.snapshot.signal_table`, Debezium's source signaling channel): `cdcflow mysql signal snapshot`
asks a running capture, which started at the binlog's end and so never saw the tables' rows, to snapshot them.
The snapshot runs chunk by chunk under concurrent writes, goes on after a restart of the capture from its
checkpoint, and a second signal reads a table again from its start; the topics then rebuild the tables exactly.
Signals it cannot act on are refused, counted and logged, and the capture goes on."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import connect, execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, server_position, source_config
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows

ROWS = 20_000


def wait_until(what: str, check: Callable[[], bool], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def topic_values(bootstrap: str, topic: str) -> list[bytes]:
    expected = sum(end_offsets(bootstrap, topic).values())
    records = consume(bootstrap, topic, expected=expected, timeout_s=120)
    assert len(records) == expected, f"{topic}: read {len(records)} of {expected}"
    return [r.value for r in records if r.value is not None]


def test_signals_snapshot_tables_while_the_capture_runs_across_a_restart(
    mariadb: dict[str, Any], kafka: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("sig")
    execute(admin, f"CREATE DATABASE {db}")
    execute(
        admin_endpoint(mariadb, database=db), f"CREATE TABLE {db}.t (id INT PRIMARY KEY, n INT, name VARCHAR(40))",
        f"CREATE TABLE {db}.u (id INT PRIMARY KEY, v VARCHAR(10))", f"CREATE TABLE {db}.nokey (v INT)",
        f"INSERT INTO {db}.t SELECT seq, seq % 7, CONCAT('n', seq) FROM seq_1_to_{ROWS}",
        f"INSERT INTO {db}.u VALUES (1, 'a'), (2, 'b'), (3, 'c')", f"INSERT INTO {db}.nokey VALUES (1)",
    )  # fmt: skip
    signal_table = f"cdcflow.{unique_name('signals')}"
    cfg = source_config(unique_name("sigsrc"), [db], snapshot={"signal_table": signal_table, "chunk_size": 1000})
    config = tmp_path / "cdcflow.yaml"
    config.write_text(yaml.safe_dump({
        "mysql": {**cfg.model_dump(mode="json"), "host": mariadb["host"], "port": mariadb["port"],
                  "user": mariadb["repl_user"], "password": mariadb["repl_password"]},
        "kafka": {"bootstrap_servers": bootstrap},
    }))  # fmt: skip

    def signal(*args: str) -> str:
        command = [sys.executable, "-m", "cdcflow.cli.main", "mysql", "signal", "snapshot", *args]
        command += ["--config", str(config)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def progress(capture: CaptureThread, table: str) -> dict[str, Any]:
        cp = capture.capture.stats.checkpoint
        return dict(cp.snapshot.get(f"{db}.{table}", {})) if cp else {}

    stop = threading.Event()
    writes = {"n": 0}

    def writer() -> None:
        rng = random.Random(7)
        conn = connect(admin)
        with conn.cursor() as cur:
            while not stop.is_set():
                k, op = rng.randrange(1, ROWS + 500), rng.random()
                if op < 0.5:
                    cur.execute(f"UPDATE {db}.t SET n = n + 1, name = %s WHERE id = %s", (f"w{writes['n']}", k))
                elif op < 0.7:
                    cur.execute(f"DELETE FROM {db}.t WHERE id = %s", (k,))
                else:
                    cur.execute(f"INSERT IGNORE INTO {db}.t VALUES (%s, 1, 'new')", (k,))
                writes["n"] += 1
                time.sleep(0.003)
        conn.close()

    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    thread = threading.Thread(target=writer, daemon=True)
    try:
        thread.start()
        # Two rows the capture cannot act on: refused, counted, and it goes on.
        execute(admin, f"INSERT INTO {signal_table} VALUES ('bad-1', 'pause-snapshot', '{{}}'), "
                       f"('bad-2', 'execute-snapshot', '{{not json')")  # fmt: skip
        assert "signal sig-1 written" in signal(f"{db}.t", f"{db}.u", f"{db}.nokey", "--id", "sig-1")
        wait_until(
            "the refused signals and the snapshot's first chunks",
            lambda: capture.capture.stats.signals_refused == 2 and progress(capture, "t").get("rows", 0) > 4000,
        )
        assert capture.capture.stats.signals == 1 and not progress(capture, "t")["done"]
        assert progress(capture, "t")["signal"] == "sig-1" and "nokey" not in str(capture.capture.progress)
        capture.stop()
        capture = CaptureThread(cfg, mariadb, bootstrap).start()  # resumes the snapshot from its checkpoint
        wait_until(
            "the snapshot to finish after the restart",
            lambda: progress(capture, "t").get("done") is True and progress(capture, "u").get("done") is True,
        )
        first_rows = progress(capture, "t")["rows"]
        signal(f"{db}.t", "--id", "sig-2")  # read again from the start
        wait_until(
            "the second snapshot of t",
            lambda: progress(capture, "t").get("signal") == "sig-2" and progress(capture, "t")["done"] is True,
        )
        assert progress(capture, "u")["signal"] == "sig-1"  # not asked for again
    finally:
        stop.set()
        thread.join(30)
    capture.wait_for_checkpoint(server_position(admin))
    capture.stop()
    assert writes["n"] > 500

    values = {table: topic_values(bootstrap, f"{cfg.topic_prefix}.{db}.{table}") for table in ("t", "u")}
    for table, records in values.items():
        rebuilt, malformed = rebuild(records)
        assert malformed == 0
        report = compare_tables(source_rows(admin, db, table), rebuilt.get((db, table), {}))
        assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
    reads = {table: sum(1 for v in records if b'"op":"r"' in v) for table, records in values.items()}
    assert reads["u"] == 3 and reads["t"] >= first_rows + ROWS * 0.9, (reads, first_rows)
    print(f"signals: t snapshotted twice ({reads['t']} reads) and u once under {writes['n']} concurrent writes, "
          f"one restart mid-snapshot")  # fmt: skip
