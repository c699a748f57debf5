"""History and point-in-time reads from a real MariaDB, against the workload's own account.

A randomized workload runs transactions on MariaDB, each at a time it sets itself (`SET timestamp`), and after
each one records its GTID (`@@last_gtid`) and the table as `SELECT` shows it: the oracle, which no cdcflow code
computes. The capture publishes the changes, a share of them is produced to the topic a second time (delivered
twice), and `cdcflow pipeline run` applies them to a Delta sink with history on; the first run is SIGKILLed
inside a fold (its "folding" line logged, its "folded" never). The history and the table as of random GTIDs and
times then equal the oracle.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import SparkSession

from cdcflow.clients import kafka as k
from cdcflow.clients.mysql import connect, execute
from cdcflow.dev.testing import soak_size, unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, server_position, source_config
from cdcflow.dev.testing.pipeline_logs import wait_for_a_fold
from cdcflow.pipeline.library import as_of, history
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.views import current_view

TRANSACTIONS = 1_500
KEYS = 15

pytestmark = pytest.mark.skipif(
    not soak_size(0, 1),
    reason="make soak only (about 4 minutes of Spark; tests/integration/test_delta_history.py "
    "runs the same checks on generated transactions in make test)",
)


class HistoryWorkload:
    """Transactions on `items` (id, v, n), each at a time of its own choosing; after each, its GTID, time and the
    table's rows as MariaDB shows them. Every change changes its row (n is new each time), so each transaction
    that touches a row makes a version of it."""

    def __init__(self, ep: Any, db: str, seed: int) -> None:
        self.db, self.rng = db, random.Random(seed)
        self.conn = connect(ep, autocommit=False)
        self.clock = 1_750_000_000  # seconds
        self.counter = 0
        self.after: list[tuple[int, int, dict[int, tuple[str, int]]]] = []  # (GTID seq, time ms, rows)

    def transaction(self) -> None:
        r, cur = self.rng, self.conn.cursor()
        self.clock += r.choice([0, 0, 1, 2])  # several transactions a second: times repeat
        cur.execute(f"SET timestamp = {self.clock}")
        if self.after and r.random() < 0.02:
            cur.execute(f"TRUNCATE TABLE {self.db}.items")
        else:
            cur.execute("BEGIN")
            for key in r.sample(range(KEYS), r.randint(1, 3)):
                for _ in range(2 if r.random() < 0.1 else 1):  # a row changed twice in one transaction
                    self.counter += 1
                    if r.random() < 0.2:
                        cur.execute(f"DELETE FROM {self.db}.items WHERE id = {key}")
                    cur.execute(
                        f"INSERT INTO {self.db}.items VALUES ({key}, '{r.choice('abc')}', {self.counter}) "
                        f"ON DUPLICATE KEY UPDATE v = VALUES(v), n = VALUES(n)"
                    )
                    if r.random() < 0.15:
                        cur.execute(f"DELETE FROM {self.db}.items WHERE id = {key}")
            cur.execute("COMMIT")
        cur.execute("SELECT @@last_gtid")
        seq = int(str(cur.fetchone()[0]).split("-")[2])
        cur.execute(f"SELECT id, v, n FROM {self.db}.items")
        rows = {int(i): (str(v), int(n)) for i, v, n in cur.fetchall()}
        self.conn.commit()
        assert not self.after or seq > self.after[-1][0]
        self.after.append((seq, self.clock * 1000, rows))

    def versions(self) -> list[tuple[int, str, int, int, int | None]]:
        """(id, v, n, first GTID seq, the GTID seq that ended it or None) of every version, from the tables seen
        after each transaction."""
        out: list[tuple[int, str, int, int, int | None]] = []
        open_: dict[int, tuple[tuple[str, int], int]] = {}
        for seq, _ts, rows in self.after:
            for key in list(open_):
                if rows.get(key) != open_[key][0]:
                    (v, n), since = open_.pop(key)
                    out.append((key, v, n, since, seq))
            for key, row in rows.items():
                if key not in open_:
                    open_[key] = (row, seq)
        out += [(key, v, n, since, None) for key, ((v, n), since) in open_.items()]
        return sorted(out, key=repr)


def _history(spark: SparkSession, path: str) -> list[tuple[int, str, int, int, int | None]]:
    rows = history(spark, path).select("id", "v", "n", "_cdcflow_valid_from_pos", "_cdcflow_valid_to_pos").collect()
    return sorted(
        ((r["id"], r["v"], r["n"], r["_cdcflow_valid_from_pos"][0],
          r["_cdcflow_valid_to_pos"][0] if r["_cdcflow_valid_to_pos"] is not None else None) for r in rows),
        key=repr,
    )  # fmt: skip


def _table(frame: Any) -> dict[int, tuple[str, int]]:
    return {r["id"]: (r["v"], r["n"]) for r in frame.select("id", "v", "n").collect()}


def test_history_and_reads_as_of_gtids_and_times_equal_the_workload_after_duplicates_and_a_kill_in_a_fold(
    mariadb: dict[str, Any], kafka: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_hist")
    admin = admin_endpoint(mariadb)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.items (id INT PRIMARY KEY, v VARCHAR(4), n INT)")
    source = source_config(unique_name("hist"), [db])
    topic = f"{source.topic_prefix}.{db}.items"
    capture = CaptureThread(source, mariadb, bootstrap).start()
    workload = HistoryWorkload(admin, db, seed=54)
    try:
        for _ in range(TRANSACTIONS):
            workload.transaction()
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        capture.stop()
    # delivered twice: a third of the records again, at the end of the topic (after newer changes of their rows)
    records = k.consume(bootstrap, topic, expected=10**9, timeout_s=10)
    again = random.Random(7).sample(records, len(records) // 3)
    k.produce_sync(bootstrap, topic, [(r.key, r.value) for r in again])

    state = tmp_path / "delta"
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump({
        "kafka": {"bootstrap_servers": bootstrap},
        "pipeline": {
            "topics": source.topic_prefix.replace(".", "\\.") + "\\..*",
            "dead_letter_topic": f"{source.name}-dead", "checkpoint_dir": str(tmp_path / "checkpoints"),
            "trigger_seconds": 1, "max_offsets_per_trigger": 150,
            "sinks": [{"name": "hist", "type": "delta", "options": {
                "path": str(state), "schema_history_topic": source.schema_history_topic, "history": True,
                "fold_rows": 100, "fold_time_share": 1.0}}],
        },
    }))  # fmt: skip
    log_path = tmp_path / "pipeline.log"
    command = [sys.executable, "-m", "cdcflow.cli.main", "pipeline", "run", "--config", str(config)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        folding = wait_for_a_fold(proc, log_path, 0, sink="hist")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # driver, JVM and Python workers at once
        proc.wait()
    killed = log_path.read_text(errors="replace")
    assert f"{folding}: folded" not in killed[killed.index(f"{folding}: folding") :], "the kill missed the fold"
    started = time.monotonic()
    done = subprocess.run([*command, "--available-now"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"{len(records)} records, {len(again)} twice; the second run took {time.monotonic() - started:.0f} s")

    spark = build_session("cdcflow-test")
    path = str(state / source.name / db / "items")
    got, expected = _history(spark, path), workload.versions()
    extra, missing = sorted(set(got) - set(expected)), sorted(set(expected) - set(got))
    assert got == expected, f"{len(got)} versions, {len(expected)} expected; extra {extra[:8]}, missing {missing[:8]}"
    assert _table(current_view(spark, path)) == workload.after[-1][2]
    rng = random.Random(11)
    for seq, _ts, rows in rng.sample(workload.after, 25):
        assert _table(as_of(spark, path, gtid=f"0-1-{seq}")) == rows, seq
    for _seq, ts, _rows in rng.sample(workload.after, 25):
        at = ts + rng.randrange(1000)
        then = [rows for _s, t, rows in workload.after if t <= at][-1]
        assert _table(as_of(spark, path, source_time=at)) == then, at
