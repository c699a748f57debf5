"""Helpers for tests and benchmarks of the MySQL source: endpoints, a capture in a thread, reading topics."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cdcflow.clients.kafka import TopicReader
from cdcflow.clients.mysql import MySqlEndpoint, MySqlTls
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.sources.mysql.capture import MySqlCapture
from cdcflow.sources.mysql.stats import CaptureStats


def admin_endpoint(mariadb: dict[str, Any], database: str | None = None) -> MySqlEndpoint:
    return MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["user"], mariadb["password"], database=database)


def repl_endpoint(mariadb: dict[str, Any]) -> MySqlEndpoint:
    return MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["repl_user"], mariadb["repl_password"])


def source_config(name: str, databases: list[str], **overrides: Any) -> MySqlSourceConfig:
    """A source of its own (offsets, history and topics named after it), so tests never share state."""
    values: dict[str, Any] = {
        "name": name,
        "server_id": 100_000 + uuid.uuid4().int % 1_000_000,
        "topic_prefix": f"cdcflow.{name}",
        "include": tuple(f"{db}.*" for db in databases),
        "offsets_topic": f"{name}-offsets",
        "schema_history_topic": f"{name}-schema-history",
        "dead_letter_topic": f"{name}-dead-letter",
        "xa_topic": f"{name}-xa",
        "checkpoint_interval_ms": 200,
        **overrides,
    }
    return MySqlSourceConfig.model_validate(values)


class CaptureThread:
    """`cdcflow mysql run` in a thread of the test process."""

    def __init__(
        self, cfg: MySqlSourceConfig, mariadb: dict[str, Any], bootstrap: str,
        kafka_properties: dict[str, str] | None = None, registry_url: str | None = None,
    ) -> None:  # fmt: skip
        kafka = KafkaConfig(bootstrap_servers=bootstrap, properties=kafka_properties or {},
                            schema_registry_url=registry_url)  # fmt: skip
        t = cfg.tls
        endpoint = dataclasses.replace(repl_endpoint(mariadb), tls=MySqlTls(t.mode, t.ca_file, t.cert_file, t.key_file))
        self.capture = MySqlCapture(cfg, kafka, endpoint, bootstrap)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"capture-{cfg.name}", daemon=True)

    def _run(self) -> None:
        try:
            self.capture.run(self.stop_event)
        except BaseException as exc:
            self.error = exc

    def start(self, wait_s: float = 60.0) -> CaptureThread:
        """Start, and return once the binlog stream is open (so what the test writes next is captured)."""
        self._thread.start()
        while not self.capture.streaming.wait(0.1):
            if self.error is not None:
                raise self.error
            wait_s -= 0.1
            if wait_s <= 0:
                raise AssertionError("capture did not open its binlog stream")
        return self

    def wait_for_checkpoint(self, gtid_pos: str, timeout_s: float = 60.0) -> None:
        """Until the capture's acknowledged checkpoint reaches `gtid_pos` (`server_position`)."""
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cp = self.capture.stats.checkpoint
            if cp is not None and position_reached(cp.gtid_state, gtid_pos):
                return
            if self.error is not None:
                raise self.error
            time.sleep(0.1)
        raise AssertionError(f"checkpoint {self.capture.stats.checkpoint} did not reach {gtid_pos}")

    def stop(self, timeout_s: float = 60.0) -> CaptureStats:
        self.stop_event.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError("capture did not stop")
        if self.error is not None:
            raise self.error
        return self.capture.stats


def run_and_catch_up(workload: MySqlWorkload, transactions: int, captures: list[CaptureThread]) -> list[CaptureStats]:
    """`transactions` of `workload`, then every capture until it checkpointed the server's end; stopped either
    way. Their stats."""
    try:
        for _ in range(transactions):
            workload.transaction()
        workload.close()
        end = server_position(workload.ep)
        for capture in captures:
            capture.wait_for_checkpoint(end)
    finally:
        stats = [capture.stop() for capture in captures]
    return stats


XA_RBROLLBACK = 1402  # the server's error for an XA branch it rolled back


@contextlib.contextmanager
def private_server(folder: Path, kind: str) -> Iterator[dict[str, Any]]:
    """A MariaDB or MySQL server of the caller's own under `folder` (its endpoints), stopped afterwards: for a
    test that changes the server's global settings or stops it, which on the shared server would reach the
    captures of the tests running in the other lane."""
    from cdcflow.dev.stack import Stack

    stack = Stack(folder / f"private-{kind}")
    stack.up([kind])
    try:
        yield stack.endpoints(kind)
    finally:
        stack.down()


def server_position(ep: MySqlEndpoint) -> str:
    """Where the server's binlog ends, as a caught-up capture's checkpoint names it: MariaDB's
    @@gtid_binlog_pos, MySQL's @@gtid_executed (normalized as cdcflow writes GTID sets)."""
    from cdcflow.clients.mysql import query
    from cdcflow.sources.mysql.binlog.gtid_set import GtidSet

    if _is_mariadb(ep):
        return str(query(ep, "SELECT @@gtid_binlog_pos")[0][0])
    return str(GtidSet.parse(str(query(ep, "SELECT @@gtid_executed")[0][0])))


def position_reached(checkpoint: str | None, target: str) -> bool:
    """Whether a checkpoint's GTID state (`Checkpoint.gtid_state`) is at or past `target` (`server_position`).
    Not equality: other tests write to the same server meanwhile (`make test` runs two at once), so a caught-up
    capture's checkpoint can be past the position a test read. MariaDB: every domain of the target at or past
    its sequence number; MySQL: the target's GTID set inside the checkpoint's."""
    from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
    from cdcflow.sources.mysql.gtid_state import parse_gtid_state

    if checkpoint is None:  # a capture by file and position, or none yet
        return False
    if ":" in target:  # a MySQL GTID set (uuid:interval)
        return GtidSet.parse(target).issubset(GtidSet.parse(checkpoint))
    reached = parse_gtid_state(checkpoint)

    def seq(gtid: str) -> int:
        return int(gtid.rsplit("-", 1)[1])

    return all(d in reached and seq(reached[d]) >= seq(g) for d, g in parse_gtid_state(target).items())


def _is_mariadb(ep: MySqlEndpoint) -> bool:
    from cdcflow.clients.mysql import query

    return "mariadb" in str(query(ep, "SELECT @@version")[0][0]).lower()


def read_all(bootstrap: str, topics: list[str], expected: int, timeout_s: float = 60.0) -> list[bytes]:
    """Values of every record of `topics` from the beginning, waiting until `expected` arrived."""
    import time

    reader = TopicReader(bootstrap, topics)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            values.extend(r.value for r in reader.poll(1.0) if r.value is not None)
    finally:
        reader.close()
    return values


# -- a randomized workload ---------------------------------------------------------------------------------

WORKLOAD_TABLES = {
    "accounts": """(
        id INT NOT NULL PRIMARY KEY, email VARCHAR(80), balance DECIMAL(14,2), flags SET('a','b','c'),
        status ENUM('new','active','closed'), born DATE, seen DATETIME(6), updated TIMESTAMP(3) NULL, note TEXT,
        avatar BLOB, bits BIT(12), ratio FLOAT, score DOUBLE, ubig BIGINT UNSIGNED, t TIME(2), yr YEAR, doc JSON,
        code BINARY(6), tiny TINYINT, small SMALLINT UNSIGNED, medium MEDIUMINT
    ) DEFAULT CHARSET=utf8mb4""",
    "order_lines": """(
        order_id BIGINT NOT NULL, line SMALLINT UNSIGNED NOT NULL, qty MEDIUMINT, price DECIMAL(10,3),
        sku CHAR(12) CHARACTER SET latin1, shipped_at DATETIME NULL, PRIMARY KEY (order_id, line)
    ) DEFAULT CHARSET=utf8mb4""",
    # Non-transactional: a transaction that writes it and then rolls back (to a savepoint) makes MariaDB
    # write rows into the binlog that did not happen (docs/decisions/0006-mysql-groups-savepoints-xa.md).
    "audit": "(id INT NOT NULL PRIMARY KEY, txn INT, note VARCHAR(40)) ENGINE=MyISAM DEFAULT CHARSET=utf8mb4",
    # Written only by XA transactions (prepared, then committed or rolled back after other transactions).
    "xa_ledger": "(id INT NOT NULL PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(40)) DEFAULT CHARSET=utf8mb4",
}


class MySqlWorkload:
    """Random transactions over every supported type: inserts, updates (also of primary keys), deletes,
    multi-row statements, rollbacks, savepoints (in transactions that also write a MyISAM table, so
    the binlog holds rows that were rolled back), and XA transactions prepared on another connection and
    committed or rolled back after the next transaction. The source of truth afterwards is SELECT *.

    On MySQL (gtid_mode=ON refuses MyISAM writes inside a transaction) the MyISAM table is written by
    single autocommitted statements between the transactions instead."""

    def __init__(self, ep: MySqlEndpoint, db: str, seed: int = 1, account_ids: int = 2000) -> None:
        import random

        self.ep, self.db, self.rng = ep, db, random.Random(seed)
        self.account_ids = account_ids
        self.transactions = 0
        self.rollbacks = 0
        self.statements = 0
        self.savepoint_rollbacks = 0
        self.xa_commits = 0
        self.xa_rollbacks = 0
        self._conn: Any = None
        self._xa_conn: Any = None
        self._xa_pending: str | None = None
        self._xa_decided: dict[str, bool] = {}  # XA id -> committed (else rolled back), as decided
        self._auto_conn: Any = None  # MySQL: the MyISAM writes, one autocommitted statement each
        self.connection_errors = 0
        self.mysql = not _is_mariadb(ep)

    def create(self) -> None:
        from cdcflow.clients.mysql import execute

        tables = (f"CREATE TABLE IF NOT EXISTS {self.db}.{name} {ddl}" for name, ddl in WORKLOAD_TABLES.items())
        execute(self.ep, f"CREATE DATABASE IF NOT EXISTS {self.db}", *tables)

    def _account_values(self) -> tuple[object, ...]:
        r = self.rng

        def maybe(value: object) -> object:
            return None if r.random() < 0.1 else value

        return (
            maybe(f"user{r.randrange(10**6)}@example.com" + "é" * r.randrange(3)),
            maybe(f"{r.randrange(-10**9, 10**9)}.{r.randrange(100):02d}"),
            maybe(",".join(x for x in "abc" if r.random() < 0.5)),
            maybe(r.choice(["new", "active", "closed"])),
            maybe(f"{r.randrange(1000, 9999)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d}"),
            maybe(f"{r.randrange(1970, 2100)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d} "
                  f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}.{r.randrange(10**6):06d}"),
            maybe(f"{r.randrange(1971, 2037)}-{r.randrange(1, 13):02d}-{r.randrange(1, 29):02d} "
                  f"{r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}.{r.randrange(1000):03d}"),
            maybe("note " * r.randrange(0, 50) + "😀" * r.randrange(2)),
            maybe(bytes(r.randrange(256) for _ in range(r.randrange(0, 64)))),
            maybe(r.randrange(4096)),
            maybe(round(r.uniform(-1e6, 1e6), 3)),
            maybe(r.uniform(-1e12, 1e12)),
            maybe(r.randrange(2**64)),
            maybe(f"{'-' if r.random() < 0.3 else ''}{r.randrange(839)}:{r.randrange(60):02d}:"
                  f"{r.randrange(60):02d}.{r.randrange(100):02d}"),
            maybe(r.choice([0, *range(1901, 2156)])),
            maybe(f'{{"n": {r.randrange(1000)}, "tags": ["x", "y{r.randrange(9)}"], '
                  f'"ok": {str(r.random() < 0.5).lower()}}}'),
            maybe(bytes(r.randrange(256) for _ in range(r.randrange(0, 7)))),
            maybe(r.randrange(-128, 128)),
            maybe(r.randrange(65536)),
            maybe(r.randrange(-(2**23), 2**23)),
        )  # fmt: skip

    ACCOUNT_COLUMNS = ("email, balance, flags, status, born, seen, updated, note, avatar, bits, ratio, score, ubig, t, "
                       "yr, doc, code, tiny, small, medium")  # fmt: skip

    def _statement(self, cur: Any) -> None:
        from cdcflow.clients.mysql import IntegrityError

        r, db = self.rng, self.db
        n = self.account_ids
        kind = r.random()
        cols = self.ACCOUNT_COLUMNS
        try:
            if kind < 0.30:
                rows = [(r.randrange(1, n), *self._account_values()) for _ in range(r.choice([1, 1, 1, 3, 10]))]
                marks = "(" + ",".join(["%s"] * 21) + ")"
                cur.execute(f"INSERT IGNORE INTO {db}.accounts (id, {cols}) VALUES " + ",".join([marks] * len(rows)),
                            [v for row in rows for v in row])  # fmt: skip
            elif kind < 0.55:
                values = self._account_values()
                sets = ", ".join(f"{c.strip()} = %s" for c in cols.split(","))
                if r.random() < 0.8:
                    cur.execute(f"UPDATE {db}.accounts SET {sets} WHERE id = %s", (*values, r.randrange(1, n)))
                else:
                    lo = r.randrange(1, n)
                    cur.execute(f"UPDATE {db}.accounts SET {sets} WHERE id BETWEEN %s AND %s", (*values, lo, lo + 20))
            elif kind < 0.62:  # primary-key change
                cur.execute(f"UPDATE {db}.accounts SET id = %s WHERE id = %s", (r.randrange(1, n), r.randrange(1, n)))
            elif kind < 0.70:
                if r.random() < 0.8:
                    cur.execute(f"DELETE FROM {db}.accounts WHERE id = %s", (r.randrange(1, n),))
                else:
                    lo = r.randrange(1, n)
                    cur.execute(f"DELETE FROM {db}.accounts WHERE id BETWEEN %s AND %s", (lo, lo + 10))
            elif kind < 0.85:
                order = r.randrange(1, 300)
                rows = [(order, line, r.randrange(-1000, 1000), f"{r.randrange(10**7)}.{r.randrange(1000):03d}",
                         f"SKU-{r.randrange(10**6)}", None if r.random() < 0.3 else "2026-05-01 10:00:00")
                        for line in range(1, r.randrange(2, 8))]  # fmt: skip
                cur.execute(f"INSERT INTO {db}.order_lines VALUES " + ",".join(["(%s,%s,%s,%s,%s,%s)"] * len(rows))
                            + " ON DUPLICATE KEY UPDATE qty = VALUES(qty), price = VALUES(price)",
                            [v for row in rows for v in row])  # fmt: skip
            elif kind < 0.92:  # composite key change: move lines to another order
                cur.execute(f"UPDATE {db}.order_lines SET order_id = %s WHERE order_id = %s",
                            (r.randrange(1, 300), r.randrange(1, 300)))  # fmt: skip
            else:
                cur.execute(f"DELETE FROM {db}.order_lines WHERE order_id = %s", (r.randrange(1, 300),))
            self.statements += 1
        except IntegrityError:
            pass  # a key change onto an existing key: the statement fails, the transaction goes on

    def transaction(self) -> None:
        """One random transaction. A lost connection (the server restarted) is dropped and re-opened by the
        next call; whatever the server kept is what SELECT * shows afterwards."""
        from cdcflow.clients.mysql import ConnectionLost
        from cdcflow.errors import ServiceUnavailable

        try:
            self._transaction()
        except (*ConnectionLost, ServiceUnavailable):
            self.connection_errors += 1
            for conn in (self._conn, self._xa_conn, self._auto_conn):
                if conn is not None:
                    with contextlib.suppress(Exception):  # already broken
                        conn.close()
            self._conn = self._xa_conn = self._auto_conn = None

    def _transaction(self) -> None:
        from cdcflow.clients.mysql import connect

        if self._conn is None:
            self._conn = connect(self.ep, autocommit=False)
        conn, r = self._conn, self.rng
        pending = self._xa_pending  # prepared by the previous call: decided after this transaction
        if pending is None and r.random() < 0.08:
            self._xa_prepare()
        if self.mysql and r.random() < 0.25:
            if self._auto_conn is None:
                self._auto_conn = connect(self.ep, autocommit=True)
            with self._auto_conn.cursor() as cur:
                self._audit(cur)
        with conn.cursor() as cur:
            mixed = not self.mysql and r.random() < 0.25
            if mixed and r.random() < 0.5:
                self._audit(cur)
            for _ in range(r.randrange(1, 8)):
                if r.random() < 0.15:  # a savepoint, statements, then back to it (or keep them)
                    cur.execute("SAVEPOINT sp")
                    for _ in range(r.randrange(1, 4)):
                        self._statement(cur)
                    if mixed:
                        self._audit(cur)
                    if r.random() < 0.6:
                        cur.execute("ROLLBACK TO SAVEPOINT sp")
                        self.savepoint_rollbacks += 1
                    else:
                        cur.execute("RELEASE SAVEPOINT sp")
                self._statement(cur)
        if r.random() < 0.1:
            conn.rollback()
            self.rollbacks += 1
        else:
            conn.commit()
            self.transactions += 1
        if pending is not None:  # an XA prepared before this transaction, decided after it
            self._xa_pending = None
            self._xa_finish(pending)

    def _audit(self, cur: Any) -> None:
        r = self.rng
        values = (r.randrange(1, 500), self.transactions, f"n{r.randrange(10**6)}")
        cur.execute(f"INSERT INTO {self.db}.audit VALUES (%s, %s, %s) "
                    "ON DUPLICATE KEY UPDATE txn = VALUES(txn), note = VALUES(note)", values)  # fmt: skip

    def _xa_prepare(self) -> None:
        from cdcflow.clients.mysql import IntegrityError, connect

        if self._xa_conn is None:
            self._xa_conn = connect(self.ep, autocommit=True)
        r, db = self.rng, self.db
        xid = f"{db}-{self.transactions}-{r.randrange(10**9)}"
        with self._xa_conn.cursor() as cur:
            cur.execute(f"XA START '{xid}'")
            for _ in range(r.randrange(1, 4)):
                i = r.randrange(1, 200)
                try:
                    if r.random() < 0.6:
                        values = (i, f"{r.randrange(10**5)}.25", xid)
                        cur.execute(f"INSERT INTO {db}.xa_ledger VALUES (%s, %s, %s) "
                                    "ON DUPLICATE KEY UPDATE amount = amount + VALUES(amount)", values)  # fmt: skip
                    elif r.random() < 0.5:
                        cur.execute(f"UPDATE {db}.xa_ledger SET note = %s WHERE id BETWEEN %s AND %s", (xid, i, i + 5))
                    else:
                        cur.execute(f"DELETE FROM {db}.xa_ledger WHERE id = %s", (i,))
                except IntegrityError:
                    pass
            cur.execute(f"XA END '{xid}'")
            cur.execute(f"XA PREPARE '{xid}'")
        self._xa_pending = xid

    def _xa_finish(self, xid: str) -> None:
        from cdcflow.clients.mysql import connect

        if self._xa_conn is None:  # after a server restart the prepared transaction is still there
            self._xa_conn = connect(self.ep, autocommit=True)
        commit = self.rng.random() < 0.75
        # Remembered: a server killed just after the statement (even one it answered) may have written it to the
        # binlog and still hold the transaction prepared after its restart. MariaDB 10.11 does with XA ROLLBACK,
        # whose undo is not flushed to InnoDB's redo log at once; finishing it the other way then would leave the
        # table and the binlog telling two stories.
        self._xa_decided[xid] = commit
        with self._xa_conn.cursor() as cur:
            cur.execute(f"XA {'COMMIT' if commit else 'ROLLBACK'} '{xid}'")
        if commit:
            self.xa_commits += 1
        else:
            self.xa_rollbacks += 1

    def _finish_prepared(self) -> None:
        """Finish what the server holds prepared for this workload (e.g. across a server restart): as the workload
        decided it before, if it did, else commit."""
        from cdcflow.clients.mysql import OperationalError, connect

        conn = connect(self.ep, autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute("XA RECOVER")
                for _format, _gtrid_len, _bqual_len, data in cur.fetchall():
                    xid = data.decode() if isinstance(data, bytes) else str(data)
                    if xid.startswith(f"{self.db}-"):
                        if self._xa_decided.pop(xid, True):
                            try:
                                cur.execute(f"XA COMMIT '{xid}'")
                                self.xa_commits += 1
                            except OperationalError as exc:
                                # XA_RBROLLBACK: the server rolled the branch back itself (seen once, after a
                                # SIGKILL and restart of MariaDB); the tests compare the tables with the topics.
                                if exc.args[0] != XA_RBROLLBACK:
                                    raise
                                self.xa_rollbacks += 1
                        else:
                            cur.execute(f"XA ROLLBACK '{xid}'")
                            self.xa_rollbacks += 1
        finally:
            conn.close()

    def close(self) -> None:
        self._xa_pending = None
        for conn in (self._conn, self._xa_conn, self._auto_conn):
            if conn is not None:
                conn.close()
        self._conn = self._xa_conn = self._auto_conn = None
        self._finish_prepared()
