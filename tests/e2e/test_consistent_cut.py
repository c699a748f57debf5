"""A consistent cut across tables from a real MariaDB, against the workload's own account.

The workload moves money between accounts: each transfer updates two rows of `accounts` and inserts a row into
`transfers` in one transaction; some transactions touch one table only, some delete a transfer, and now and then
`transfers` is truncated (a transaction of its own). After each commit it records its GTID (`@@last_gtid`) and
both tables as `SELECT` shows them: the oracle, which no cdcflow code computes.

The capture publishes the changes and a transaction record per transaction (`output.transaction_topic`); a third
of the change records and of the transaction records are produced again (delivered twice); `cdcflow pipeline
run` applies them to a Delta sink with `consistent_cut` in batches of a few dozen records, so transactions are
split across batches and tables; it is SIGKILLed inside a fold once the cut moved, then finishes with
`--available-now`. The cut at the kill and the final cut, read with `at_cut`, equal the oracle at their GTIDs
(every account balance and every transfer: a transfer is seen whole or not at all), and the final cut is the
workload's last transaction.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients import kafka as k
from cdcflow.clients.mysql import connect, execute
from cdcflow.dev.testing import soak_size, unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, server_position, source_config
from cdcflow.pipeline.library import at_cut, consistent_cut
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.cut.reads import ConsistentCut

TRANSACTIONS = 1_000

pytestmark = pytest.mark.skipif(
    not soak_size(0, 1),
    reason="make soak only (about 3 minutes of Spark; tests/integration/test_delta_consistent_cut.py checks the cut "
    "after every batch of generated transactions in make test)",
)
ACCOUNTS = 12

Tables = dict[str, dict[int, tuple[int, ...]]]
COLUMNS = {"accounts": ("balance",), "transfers": ("src", "dst", "amount")}  # after the key, as SELECT * has them


class TransferWorkload:
    def __init__(self, ep: Any, db: str, seed: int) -> None:
        self.db, self.rng = db, random.Random(seed)
        self.conn = connect(ep, autocommit=False)
        self.next_transfer = 0
        self.no_rows = 0  # transactions that changed no row
        self.after: list[tuple[int, Tables]] = []  # (GTID seq, both tables after it)

    def transaction(self) -> None:
        r, cur, db = self.rng, self.conn.cursor(), self.db
        roll = r.random()
        if not self.after:  # the accounts open
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {db}.accounts VALUES " + ", ".join(f"({i}, 1000)" for i in range(ACCOUNTS)))
            cur.execute("COMMIT")
        elif roll < 0.03:
            cur.execute(f"TRUNCATE TABLE {db}.transfers")
        else:
            cur.execute("BEGIN")
            if roll < 0.1:  # interest on every account: one table only
                cur.execute(f"UPDATE {db}.accounts SET balance = balance + 1")
            elif roll < 0.15:
                cur.execute(f"DELETE FROM {db}.transfers ORDER BY id LIMIT 1")
                self.no_rows += 1 if cur.rowcount == 0 else 0  # (nothing to delete: nothing published)
            else:
                a, b = r.sample(range(ACCOUNTS), 2)
                amount = r.randint(1, 50)
                self.next_transfer += 1
                cur.execute(f"UPDATE {db}.accounts SET balance = balance - {amount} WHERE id = {a}")
                cur.execute(f"UPDATE {db}.accounts SET balance = balance + {amount} WHERE id = {b}")
                cur.execute(f"INSERT INTO {db}.transfers VALUES ({self.next_transfer}, {a}, {b}, {amount})")
            cur.execute("COMMIT")
        cur.execute("SELECT @@last_gtid")
        seq = int(str(cur.fetchone()[0]).split("-")[2])
        tables: Tables = {}
        for table in ("accounts", "transfers"):
            cur.execute(f"SELECT * FROM {db}.{table}")
            tables[f"{db}.{table}"] = {int(row[0]): tuple(int(v) for v in row[1:]) for row in cur.fetchall()}
        self.conn.commit()
        self.after.append((seq, tables))

    def at(self, seq: int) -> Tables:
        return next(tables for s, tables in self.after if s == seq)


def _log_at(spark: Any, log_path: str, version: int, seq: int, db: str) -> Tables:
    """Both tables from the change log as it was at `version`, with every change up to position `seq` applied:
    the test's own reading of what the log held when the cut was found."""
    log = spark.read.format("delta").option("versionAsOf", version).load(log_path)
    rows = log.where(f"db = '{db}' AND pos[0] <= {seq}").select("table", "op", "key", "after", "pos").collect()
    changes = sorted({(r["table"], tuple(r["pos"]), r["op"], r["key"], r["after"]) for r in rows}, key=repr)
    out: Tables = {f"{db}.accounts": {}, f"{db}.transfers": {}}
    for table, _pos, op, key, after in sorted(changes, key=lambda c: c[1]):
        rows_now = out[f"{db}.{table}"]
        if op == "t":
            rows_now.clear()
        elif op == "d":
            rows_now.pop(int(json.loads(key)["id"]), None)
        else:
            image = json.loads(after)
            rows_now[int(image["id"])] = tuple(int(image[c]) for c in COLUMNS[table])
    return out


def _read(frames: dict[str, Any]) -> Tables:
    out: Tables = {}
    for name, frame in frames.items():
        columns = [c for c in frame.columns if not c.startswith("_cdcflow")]
        out[name] = {int(row[0]): tuple(int(v) for v in row[1:]) for row in frame.select(*columns).collect()}
    return out


def test_the_cut_shows_every_table_as_after_one_transaction_under_split_batches_duplicates_and_a_kill(
    mariadb: dict[str, Any], kafka: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_cut")
    admin = admin_endpoint(mariadb)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.accounts (id INT PRIMARY KEY, balance INT)",
            f"CREATE TABLE {db}.transfers (id INT PRIMARY KEY, src INT, dst INT, amount INT)")  # fmt: skip
    name = unique_name("cut")
    source = source_config(name, [db], output={"transaction_topic": f"{name}-transactions"})
    capture = CaptureThread(source, mariadb, bootstrap).start()
    workload = TransferWorkload(admin, db, seed=26)
    try:
        for _ in range(TRANSACTIONS):
            workload.transaction()
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        stats = capture.stop()
    assert stats.transaction_records == TRANSACTIONS - workload.no_rows
    rng = random.Random(7)
    for topic in (f"{source.topic_prefix}.{db}.accounts", f"{source.topic_prefix}.{db}.transfers",
                  f"{name}-transactions"):  # fmt: skip
        records = [r for r in k.consume(bootstrap, topic, expected=10**9, timeout_s=10) if r.value is not None]
        again = rng.sample(records, len(records) // 3)  # delivered twice, after newer records
        k.produce_sync(bootstrap, topic, [(r.key, r.value) for r in again])

    state = tmp_path / "delta"
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": bootstrap},
        "mysql": {"name": name, "topic_prefix": source.topic_prefix,
                  "schema_history_topic": source.schema_history_topic,
                  "output": {"transaction_topic": f"{name}-transactions"}},
        "pipeline": {
            "topics": source.topic_prefix.replace(".", "\\.") + "\\..*",
            "dead_letter_topic": f"{name}-dead", "checkpoint_dir": str(tmp_path / "checkpoints"),
            "trigger_seconds": 1, "max_offsets_per_trigger": 40,
            "sinks": [{"name": "cut", "type": "delta", "options": {
                "path": str(state), "consistent_cut": True, "consistent_cut_interval_s": 0.5,
                "fold_rows": 150, "fold_time_share": 1.0}}],
        },
    }))  # fmt: skip
    log_path = tmp_path / "pipeline.log"
    command = [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "run", "--config", str(config)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    moved = re.compile(r"sink cut: consistent cut of \S+ at \S+")
    fold = re.compile(r"sink cut: (\S+): folding \d+ changes")
    try:
        deadline = time.monotonic() + 300
        while True:  # a fold started after the cut moved twice: the kill lands inside it
            text = log_path.read_text(errors="replace")
            cuts = list(moved.finditer(text))
            if len(cuts) >= 2 and fold.search(text, cuts[1].end()):
                break
            assert proc.poll() is None, f"pipeline exited early:\n{text[-3000:]}"
            assert time.monotonic() < deadline, f"the cut did not move, or no fold started:\n{text[-3000:]}"
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # driver, JVM and Python workers at once
        proc.wait()

    spark = build_session("cdcflow-test")
    first = consistent_cut(spark, str(state))
    seq = first.position[0]
    assert seq < workload.after[-1][0], "the cut reached the end before the kill: nothing was checked mid-run"
    assert _read(at_cut(spark, str(state))) == workload.at(seq), first
    # when the cut was found, the log already held every change up to it (not only by the time of this read)
    assert _log_at(spark, str(state / "_changes"), first.log_version, seq, db) == workload.at(seq), first

    done = subprocess.run([*command, "--available-now"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = consistent_cut(spark, str(state))
    assert (last.position[0], last.gtid) == (workload.after[-1][0], f"0-1-{workload.after[-1][0]}")
    assert _read(at_cut(spark, str(state))) == workload.after[-1][1]
    # any earlier cut reads as the source was then
    for seq, tables in rng.sample(workload.after, 5):
        earlier = ConsistentCut(first.source, f"0-1-{seq}", (seq, first.position[1]), None, None)
        assert _read(at_cut(spark, str(state), cut=earlier)) == tables, seq
    print(f"cut at the kill: {first.gtid} of {workload.after[-1][0]}; final: {last.gtid}")
