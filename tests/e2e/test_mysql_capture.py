"""MariaDB -> `cdcflow mysql run` (a real process) -> Kafka; tables rebuilt from the events equal SELECT *.

The fault test kills the capture with SIGKILL three times in the middle of a randomized workload
(savepoints in mixed-engine transactions, XA prepared and decided later), stops Kafka for 14 s with
a 6 s delivery timeout (so deliveries really fail and the capture resumes from its checkpoint), and
then checks every table row by row, and that every checkpoint the capture ever stored stands exactly
on a transaction boundary (MariaDB's own BINLOG_GTID_POS of the stored file/position equals the
stored GTID state). A second test kills and restarts MariaDB itself under a running capture.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from cdcflow.clients.kafka import end_offsets, read_latest
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import execute, query
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing import ServiceHarness, soak_size, unique_name
from cdcflow.dev.testing.mysql import (
    WORKLOAD_TABLES,
    CaptureThread,
    MySqlWorkload,
    admin_endpoint,
    position_reached,
    server_position,
    source_config,
)
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.offsets import state_at
from cdcflow.sources.mysql.resume import BinlogHistoryChanged
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows


class CaptureProcess:
    def __init__(
        self, workdir: Path, mariadb: dict[str, Any], bootstrap: str, name: str, db: str,
        kafka: dict[str, Any] | None = None, **overrides: Any,
    ) -> None:  # fmt: skip
        self.cfg = source_config(name, [db], **overrides)
        self.bootstrap = bootstrap
        self.log = workdir / f"{name}.log"
        self.config_path = workdir / f"{name}.yaml"
        mysql = self.cfg.model_dump(mode="json")
        mysql.update(host=mariadb["host"], port=mariadb["port"], user=mariadb["repl_user"],
                     password=mariadb["repl_password"])  # fmt: skip
        kafka_cfg = {"bootstrap_servers": bootstrap, **(kafka or {})}
        self.config_path.write_text(yaml.safe_dump({"kafka": kafka_cfg, "mysql": mysql}))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        marker = self.log.read_text().count("MySQL source") if self.log.exists() else 0
        out = open(self.log, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cdcflow.cli.main", "mysql", "run", "--config", str(self.config_path)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until it has read its start position
            text = self.log.read_text()
            if text.count("MySQL source") > marker and ("no checkpoint for" in text.split("MySQL source")[-1]
                                                       or "resuming" in text.split("MySQL source")[-1]):  # fmt: skip
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"capture exited:\n{text[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"capture did not start:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout=60)

    def checkpoint(self) -> Checkpoint | None:
        raw = read_latest(self.bootstrap, self.cfg.offsets_topic, self.cfg.name.encode())
        return Checkpoint.from_bytes(raw) if raw else None

    def wait_caught_up(self, gtid_pos: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cp = self.checkpoint()
            if cp is not None and position_reached(cp.gtid_state, gtid_pos):
                return
            time.sleep(1)
        raise AssertionError(
            f"checkpoint did not reach {gtid_pos}; last {self.checkpoint()}\n" + self.log.read_text()[-3000:]
        )


def read_topics(bootstrap: str, topics: list[str]) -> list[bytes]:
    values: list[bytes] = []
    for topic in topics:
        expected = sum(end_offsets(bootstrap, topic).values())
        records = consume(bootstrap, topic, expected=expected, timeout_s=120)
        assert len(records) == expected, f"{topic}: read {len(records)} of {expected}"
        values.extend(r.value for r in records if r.value is not None)
    return values


def check_tables(admin: Any, db: str, values: list[bytes]) -> dict[str, int]:
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    sizes = {}
    for table in WORKLOAD_TABLES:
        source = source_rows(admin, db, table)
        report = compare_tables(source, rebuilt.get((db, table), {}))
        assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
        sizes[table] = len(source)
    return sizes


def check_checkpoints_on_boundaries(admin: Any, bootstrap: str, offsets_topic: str) -> int:
    records = consume(bootstrap, offsets_topic, expected=sum(end_offsets(bootstrap, offsets_topic).values()))
    assert records, "no checkpoint was ever stored"
    mariadb = "mariadb" in str(query(admin, "SELECT @@version")[0][0]).lower()
    for r in records:
        assert r.value is not None
        cp = Checkpoint.from_bytes(r.value)
        # MariaDB's own BINLOG_GTID_POS; on MySQL the same from SHOW BINLOG EVENTS (what `offsets set` uses)
        server_gtid = query(admin, "SELECT BINLOG_GTID_POS(%s, %s)", (cp.file, cp.pos))[0][0] if mariadb \
            else state_at(admin, cp.file, cp.pos)  # fmt: skip
        assert server_gtid == cp.gtid_state, f"checkpoint {orjson.loads(r.value)} is not on a transaction boundary"
    return len(records)


def final_summary(log: str) -> dict[str, int]:
    """The counters of the capture's last "mysql capture stopped: ..." line."""
    line = log.rsplit("mysql capture stopped: ", 1)[1].splitlines()[0]
    m = re.search(r"(\d+) rows rolled back \((\d+) groups.*XA (\d+) prepared/(\d+) committed/(\d+) rolled back", line)
    assert m, line
    keys = ("rolled_back_rows", "rolled_back_groups", "xa_prepared", "xa_committed", "xa_rolled_back")
    return dict(zip(keys, map(int, m.groups()), strict=True))


def run_workload(workload: MySqlWorkload, stop: threading.Event, tps: float = 40) -> threading.Thread:
    def loop() -> None:
        while not stop.is_set():
            workload.transaction()
            time.sleep(1 / tps)
        workload.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


SOAK_ONLY = pytest.mark.skipif(soak_size(0, 1) == 0, reason="make soak only (keeps make test under 20 minutes)")


@pytest.mark.parametrize("server", ["mariadb", pytest.param("mysql", marks=SOAK_ONLY)])
def test_randomized_workload_survives_sigkills_and_kafka_outage(
    server: str, services: ServiceHarness, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # A Kafka of its own, so stopping it disturbs no other test (`make test` runs two at once).
    kafka = Stack(tmp_path / "private-kafka")
    request.addfinalizer(lambda: kafka.down(grace_s=3.0))
    kafka.up(["kafka"])
    bootstrap = kafka.endpoints("kafka")["bootstrap_servers"]
    mariadb = services.endpoints(server)
    admin = admin_endpoint(mariadb)
    db = unique_name("e2e_mysql")
    workload = MySqlWorkload(admin, db, seed=5)
    workload.create()
    capture = CaptureProcess(tmp_path, mariadb, bootstrap, unique_name("faults"), db,
                             kafka={"delivery_timeout_ms": 6_000})  # fmt: skip
    capture.start()
    stop = threading.Event()
    thread = run_workload(workload, stop)
    rng = random.Random(11)
    try:
        for _ in range(3):
            time.sleep(rng.uniform(3, 6))  # at 40 transactions/s each kill lands mid-workload
            capture.kill()
            time.sleep(rng.uniform(0, 2))
            capture.start()
        time.sleep(3)
        logged = len(capture.log.read_bytes())
        kafka.down(["kafka"])
        try:
            # A table first seen while Kafka is down: its schema-history record is among the records that time
            # out and are purged; the resumed stream must send it again (it once counted it as sent).
            execute(admin, f"CREATE TABLE {db}.late (id INT PRIMARY KEY, v VARCHAR(10))",
                    f"INSERT INTO {db}.late VALUES (1, 'during'), (2, 'outage')")  # fmt: skip
            # Queued records fail after delivery.timeout.ms; the stream ends once every record queued before is
            # resolved (the `late` table's schema among them), and the capture says it resumes from its checkpoint.
            deadline = time.monotonic() + 60
            while b"resuming from the last acknowledged checkpoint" not in capture.log.read_bytes()[logged:]:
                assert time.monotonic() < deadline, capture.log.read_text()[-3000:]
                time.sleep(0.5)
            time.sleep(2)  # a resumed stream's records time out too
        finally:
            kafka.up(["kafka"])
        assert kafka.endpoints("kafka")["bootstrap_servers"] == bootstrap
        time.sleep(5)
    finally:
        stop.set()
        thread.join(60)
    capture.wait_caught_up(server_position(admin))
    assert capture.stop() == 0
    log = capture.log.read_text()
    values = read_topics(bootstrap, [capture.cfg.topic_prefix + f".{db}.{t}" for t in WORKLOAD_TABLES])
    sizes = check_tables(admin, db, values)
    checkpoints = check_checkpoints_on_boundaries(admin, bootstrap, capture.cfg.offsets_topic)
    assert workload.transactions > 500 and all(sizes.values())
    late, _ = rebuild(read_topics(bootstrap, [f"{capture.cfg.topic_prefix}.{db}.late"]))
    assert compare_tables(source_rows(admin, db, "late"), late[(db, "late")]).clean
    history = [orjson.loads(v) for v in read_topics(bootstrap, [capture.cfg.schema_history_topic])]
    assert any(h["kind"] == "table" and h["table"] == "late" for h in history), "schema of `late` lost"
    # The paths this test claims to force: deliveries that timed out during the outage, and rows the server
    # wrote to the binlog that an XA ROLLBACK (and on MariaDB a ROLLBACK (TO SAVEPOINT)) undid, dropped by
    # the capture. (MySQL removes rows a ROLLBACK TO SAVEPOINT undid from the binlog itself: decision 0015.)
    assert "Message timed out" in log and "resuming from the last acknowledged checkpoint" in log
    last = final_summary(log)
    assert last["xa_committed"] > 0 and last["xa_rolled_back"] > 0, last
    assert last["rolled_back_rows"] > 0 if server == "mariadb" else workload.savepoint_rollbacks > 0, last
    print(f"faults: {workload.transactions} transactions ({workload.rollbacks} rolled back, "
          f"{workload.savepoint_rollbacks} to a savepoint, XA {workload.xa_commits} committed/"
          f"{workload.xa_rollbacks} rolled back), {len(values)} events, rows {sizes}, {checkpoints} checkpoints all "
          f"on boundaries, restarts: {log.count('resuming')}, last capture: {last}")  # fmt: skip


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_one_large_transaction_in_bounded_memory(
    mariadb: dict[str, Any], kafka: dict[str, Any], tmp_path: Path
) -> None:
    """300k rows of ~600 bytes in one transaction (~200 MB of events): the capture streams them with
    max_inflight_mb=16 and its peak memory stays far below the transaction's size. (Kept at full size:
    a smaller transaction would not show the bound over the process's own ~60 MB; it takes ~25 s.)"""
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("bigtxn")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.big (id INT PRIMARY KEY, pad VARCHAR(600))")
    capture = CaptureProcess(tmp_path, mariadb, bootstrap, unique_name("big"), db, max_inflight_mb=16)
    capture.start()
    rows = 300_000
    execute(
        admin_endpoint(mariadb, database=db),
        f"INSERT INTO {db}.big SELECT seq, REPEAT(CHAR(65 + seq % 26), 550) FROM seq_1_to_{rows}",
    )
    (gtid_pos,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    capture.wait_caught_up(gtid_pos, timeout_s=300)
    assert capture.proc is not None
    peak = peak_rss_mb(capture.proc.pid)
    assert capture.stop() == 0
    topic = f"{capture.cfg.topic_prefix}.{db}.big"
    sizes = end_offsets(bootstrap, topic)
    assert sum(sizes.values()) >= rows
    values = read_topics(bootstrap, [topic])
    event_mb = sum(len(v) for v in values) / 2**20
    rebuilt, _ = rebuild(values)
    report = compare_tables(source_rows(admin, db, "big"), rebuilt[(db, "big")])
    assert report.clean, report.examples
    print(f"large transaction: {rows} rows, {event_mb:.0f} MB of events, capture peak RSS {peak:.0f} MB")
    assert peak < event_mb / 2, f"peak RSS {peak:.0f} MB for {event_mb:.0f} MB of events"


@pytest.mark.parametrize("server", ["mariadb", pytest.param("mysql", marks=SOAK_ONLY)])
def test_snapshot_of_a_million_rows_while_writing_then_streaming(
    server: str, kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path
) -> None:
    """1M rows (120k outside `make soak`) snapshotted in chunks while random writes hit the same table; the
    capture is killed once mid-snapshot and resumes from its last acknowledged chunk; streaming goes on after."""
    bootstrap = kafka["bootstrap_servers"]
    mariadb = services.endpoints(server)
    admin = admin_endpoint(mariadb)
    db = unique_name("snap")
    total = soak_size(120_000, 1_000_000)
    execute(
        admin,
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.big (id INT PRIMARY KEY, n INT, name VARCHAR(40), amount DECIMAL(10,2), at DATETIME(3))",
    )
    numbers = (f"seq_1_to_{total}" if server == "mariadb"  # MySQL has no sequence tables: a recursive CTE
               else f"(WITH RECURSIVE s (seq) AS (SELECT 1 UNION ALL SELECT seq + 1 FROM s WHERE seq < {total}) "
                    "SELECT seq FROM s) AS numbers")  # fmt: skip
    execute(admin_endpoint(mariadb, database=db), f"SET SESSION cte_max_recursion_depth = {total + 1}"
            if server == "mysql" else "SELECT 1",
            f"INSERT INTO {db}.big SELECT seq, seq % 1000, CONCAT('name-', seq), seq / 100, "
            f"'2026-01-01 00:00:00.123' + INTERVAL seq SECOND FROM {numbers}")  # fmt: skip
    capture = CaptureProcess(tmp_path, mariadb, bootstrap, unique_name("snapsrc"), db,
                             snapshot={"tables": [f"{db}.big"], "chunk_size": 10_000})  # fmt: skip
    stop = threading.Event()
    writes = {"n": 0}

    def writer() -> None:
        from cdcflow.clients.mysql import connect

        rng = random.Random(3)
        conn = connect(admin)
        with conn.cursor() as cur:
            while not stop.is_set():
                k = rng.randrange(1, total + 5000)
                op = rng.random()
                if op < 0.5:
                    cur.execute(f"UPDATE {db}.big SET n = n + 1, name = %s WHERE id = %s", (f"w{writes['n']}", k))
                elif op < 0.7:
                    cur.execute(f"DELETE FROM {db}.big WHERE id = %s", (k,))
                elif op < 0.9:
                    cur.execute(f"INSERT IGNORE INTO {db}.big VALUES (%s, 1, 'new', 1.5, '2026-06-01 00:00:00')", (k,))
                else:  # move a row to another key
                    cur.execute(
                        f"UPDATE IGNORE {db}.big SET id = %s WHERE id = %s", (rng.randrange(1, total + 5000), k)
                    )
                writes["n"] += 1
                time.sleep(0.002)
        conn.close()

    capture.start()
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 300
        while True:  # kill once a good part of the snapshot is acknowledged
            cp = capture.checkpoint()
            done_rows = cp.snapshot.get(f"{db}.big", {}).get("rows", 0) if cp else 0
            if done_rows > total * 0.3:
                break
            assert time.monotonic() < deadline, f"snapshot too slow: {done_rows}\n{capture.log.read_text()[-3000:]}"
            time.sleep(1)
        capture.kill()
        capture.start()
        deadline = time.monotonic() + 600
        while True:
            cp = capture.checkpoint()
            if cp is not None and cp.snapshot.get(f"{db}.big", {}).get("done"):
                break
            assert time.monotonic() < deadline, f"snapshot did not finish\n{capture.log.read_text()[-3000:]}"
            time.sleep(2)
        time.sleep(3)  # streaming goes on after the snapshot
    finally:
        stop.set()
        thread.join(30)
    capture.wait_caught_up(server_position(admin))
    assert capture.stop() == 0
    values = read_topics(bootstrap, [capture.cfg.topic_prefix + f".{db}.big"])
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    source = source_rows(admin, db, "big")
    report = compare_tables(source, rebuilt[(db, "big")])
    assert report.clean, report.summary() + "\n" + "\n".join(report.examples)
    reads = sum(1 for v in values if b'"op":"r"' in v)
    assert reads >= total * 0.9 and writes["n"] > 1000
    print(f"snapshot: {len(source)} rows equal; {reads} snapshot reads, {len(values) - reads} stream events, "
          f"{writes['n']} concurrent writes, one SIGKILL mid-snapshot")  # fmt: skip


@pytest.mark.parametrize("server", ["mariadb", pytest.param("mysql", marks=SOAK_ONLY)])
def test_server_killed_and_restarted_under_a_running_capture(
    server: str, kafka: dict[str, Any], tmp_path: Path
) -> None:
    """mariadbd / mysqld gets SIGKILL mid-workload and stays down longer than the capture's read timeout (10 s);
    the capture keeps retrying, resumes from its checkpoint when the server is back, and nothing is lost."""
    bootstrap = kafka["bootstrap_servers"]
    private = Stack(tmp_path / "private-stack")
    private.up([server])
    try:
        mariadb = private.endpoints(server)
        admin = admin_endpoint(mariadb)
        db = unique_name("restart")
        workload = MySqlWorkload(admin, db, seed=7, account_ids=500)
        workload.create()
        capture = CaptureProcess(tmp_path, mariadb, bootstrap, unique_name("mdbrestart"), db)
        capture.start()
        stop = threading.Event()
        thread = run_workload(workload, stop, tps=20)
        try:
            time.sleep(4)
            (pid,) = [s.pid for s in private.status([server])]
            assert pid
            at_kill = workload.transactions
            os.kill(pid, signal.SIGKILL)
            time.sleep(15)
            private.up([server])
            assert private.endpoints(server)["port"] == mariadb["port"]
            at_restart = workload.transactions
            time.sleep(5)
        finally:
            stop.set()
            thread.join(60)
        capture.wait_caught_up(server_position(admin))
        assert capture.stop() == 0
        log = capture.log.read_text()
        # Every interruption names the server that went away.
        interruptions = [line for line in log.splitlines() if "capture interrupted" in line]
        assert interruptions and all(f":{mariadb['port']}: " in line for line in interruptions), interruptions
        values = read_topics(bootstrap, [capture.cfg.topic_prefix + f".{db}.{t}" for t in WORKLOAD_TABLES])
        sizes = check_tables(admin, db, values)
        checkpoints = check_checkpoints_on_boundaries(admin, bootstrap, capture.cfg.offsets_topic)
        # transactions before the kill and after the restart (a count, e.g. > 100, depends on the machine's speed:
        # 85 in all on a slow one), and the workload saw the server gone
        assert at_kill > 0 and workload.transactions > at_restart and workload.connection_errors > 0
        print(f"{server} restart: {workload.transactions} transactions, {workload.connection_errors} connection "
              f"errors in the workload, rows {sizes}, {checkpoints} checkpoints on boundaries")  # fmt: skip
        # RESET MASTER starts a new history with lower sequence numbers: resuming there must be refused loudly.
        execute(admin, "RESET MASTER", f"INSERT INTO {db}.audit VALUES (100000, 1, 'new history')")
        again = CaptureThread(capture.cfg, mariadb, bootstrap)
        with pytest.raises(BinlogHistoryChanged, match="binlog history is not the one"):
            again.start()
    finally:
        private.down()


def test_positions_keep_increasing_after_a_failover_to_a_replica(kafka: dict[str, Any], tmp_path: Path) -> None:
    """The capture follows a primary, then (same name, same checkpoint) a replica whose binlog files are
    numbered lower. Resuming by GTID, the replica's events continue the primary's positions: for every
    row, positions only increase, and the rebuilt table equals the replica's SELECT *."""
    bootstrap = kafka["bootstrap_servers"]
    primary, replica = Stack(tmp_path / "primary"), Stack(tmp_path / "replica")
    primary.up(["mariadb"])
    replica.up(["mariadb"])
    try:
        p_ep, r_ep = primary.endpoints("mariadb"), replica.endpoints("mariadb")
        p_admin, r_admin = admin_endpoint(p_ep), admin_endpoint(r_ep)
        execute(p_admin, *(["FLUSH BINARY LOGS"] * 4))  # the primary's files now number higher than the replica's
        (start,) = query(p_admin, "SELECT @@gtid_binlog_pos")[0]
        execute(r_admin, "RESET MASTER", "SET GLOBAL server_id = 2", f"SET GLOBAL gtid_slave_pos = '{start}'",
                f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={p_ep['port']}, "
                f"MASTER_USER='{p_ep['repl_user']}', MASTER_PASSWORD='{p_ep['repl_password']}', "
                "MASTER_USE_GTID=slave_pos", "START SLAVE")  # fmt: skip
        db = unique_name("failover")
        cfg = source_config(unique_name("failsrc"), [db])
        execute(p_admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, n INT)")
        capture = CaptureThread(cfg, p_ep, bootstrap).start()
        for n in range(3):
            execute(p_admin, *(f"INSERT INTO {db}.t VALUES ({i}, {n}) ON DUPLICATE KEY UPDATE n = {n}"
                               for i in range(20)))  # fmt: skip
        (on_primary,) = query(p_admin, "SELECT @@gtid_binlog_pos")[0]
        capture.wait_for_checkpoint(on_primary)
        capture.stop()
        assert query(r_admin, "SELECT MASTER_GTID_WAIT(%s, 30)", (on_primary,))[0][0] == 0
        execute(r_admin, "STOP SLAVE", "RESET SLAVE ALL")  # the replica is the primary now
        capture = CaptureThread(cfg, r_ep, bootstrap).start()
        for n in range(3, 5):
            execute(r_admin, *(f"UPDATE {db}.t SET n = {n} WHERE id = {i}" for i in range(20)))
        execute(r_admin, f"DELETE FROM {db}.t WHERE id < 5")
        (on_replica,) = query(r_admin, "SELECT @@gtid_binlog_pos")[0]
        capture.wait_for_checkpoint(on_replica)
        capture.stop()
        values = read_topics(bootstrap, [f"{cfg.topic_prefix}.{db}.t"])
        events = [orjson.loads(v) for v in values]
        by_key: dict[str, list[list[int]]] = {}
        for e in events:
            by_key.setdefault(orjson.dumps(e["key"]).decode(), []).append(e["source"]["pos"])
        assert len(by_key) == 20 and all(p == sorted(p) and len(set(map(tuple, p))) == len(p) for p in by_key.values())
        files = [e["source"]["file"] for e in events]
        assert files != sorted(files)  # binlog file numbers went down at the failover: [file, offset] would too
        rebuilt, _ = rebuild(values)
        report = compare_tables(source_rows(r_admin, db, "t"), rebuilt[(db, "t")])
        assert report.clean, report.examples
    finally:
        replica.down()
        primary.down()


def test_mysql_failover_to_a_gtid_replica_continues_positions_and_a_lagging_server_is_refused(
    mysql: dict[str, Any], kafka: dict[str, Any], tmp_path: Path
) -> None:
    """MySQL 8: a capture follows a primary, then (same name, same checkpoint) its GTID replica,
    promoted. The promoted server writes under its own server UUID, so the checkpoint's GTID set holds two
    UUIDs and the new transactions' numbers restart at 1; positions (the size of the executed set) still
    only increase for every row, and the rebuilt table equals the new primary's SELECT *. Pointed back at
    the old primary, which lacks the new transactions, the capture refuses to start."""
    from cdcflow.sources.mysql.binlog.gtid_set import GtidSet

    bootstrap = kafka["bootstrap_servers"]
    replica = Stack(tmp_path / "replica")  # the primary is the session's MySQL
    replica.up(["mysql"])
    try:
        p_ep, r_ep = mysql, replica.endpoints("mysql")
        p_admin, r_admin = admin_endpoint(p_ep), admin_endpoint(r_ep)
        execute(p_admin, *(["FLUSH BINARY LOGS"] * 4))  # the primary's files now number higher than the replica's
        start = server_position(p_admin)
        execute(r_admin, "SET GLOBAL server_id = 2", "RESET MASTER", f"SET GLOBAL gtid_purged = '{start}'",
                f"CHANGE REPLICATION SOURCE TO SOURCE_HOST='127.0.0.1', SOURCE_PORT={p_ep['port']}, "
                f"SOURCE_USER='{p_ep['repl_user']}', SOURCE_PASSWORD='{p_ep['repl_password']}', "
                "SOURCE_AUTO_POSITION=1, GET_SOURCE_PUBLIC_KEY=1", "START REPLICA")  # fmt: skip
        db = unique_name("myfailover")
        cfg = source_config(unique_name("myfailsrc"), [db])
        execute(p_admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, n INT)")
        capture = CaptureThread(cfg, p_ep, bootstrap).start()
        for n in range(3):
            execute(p_admin, *(f"INSERT INTO {db}.t VALUES ({i}, {n}) ON DUPLICATE KEY UPDATE n = {n}"
                               for i in range(20)))  # fmt: skip
        on_primary = server_position(p_admin)
        capture.wait_for_checkpoint(on_primary)
        capture.stop()
        assert query(r_admin, "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, 30)", (on_primary,))[0][0] == 0
        execute(r_admin, "STOP REPLICA", "RESET REPLICA ALL")  # the replica is the primary now
        capture = CaptureThread(cfg, r_ep, bootstrap).start()
        for n in range(3, 5):
            execute(r_admin, *(f"UPDATE {db}.t SET n = {n} WHERE id = {i}" for i in range(20)))
        execute(r_admin, f"DELETE FROM {db}.t WHERE id < 5")
        on_replica = server_position(r_admin)
        capture.wait_for_checkpoint(on_replica)
        capture.stop()
        assert len(GtidSet.parse(on_replica).intervals) == 2  # the old primary's UUID and the new one's
        values = read_topics(bootstrap, [f"{cfg.topic_prefix}.{db}.t"])
        events = [orjson.loads(v) for v in values]
        by_key: dict[str, list[list[int]]] = {}
        for e in events:
            by_key.setdefault(orjson.dumps(e["key"]).decode(), []).append(e["source"]["pos"])
        assert len(by_key) == 20 and all(p == sorted(p) and len(set(map(tuple, p))) == len(p) for p in by_key.values())
        files = [e["source"]["file"] for e in events]
        assert files != sorted(files)  # binlog file numbers went down at the failover: [file, offset] would too
        rebuilt, _ = rebuild(values)
        report = compare_tables(source_rows(r_admin, db, "t"), rebuilt[(db, "t")])
        assert report.clean, report.examples
        # Back to the old primary: it never saw the new primary's transactions.
        with pytest.raises(BinlogHistoryChanged, match="has executed only"):
            CaptureThread(cfg, p_ep, bootstrap).start()
    finally:
        replica.down()
