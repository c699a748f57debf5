"""Helpers for tests and benchmarks of the MySQL source: endpoints, a capture in a thread, reading topics."""

from __future__ import annotations

import threading
import uuid
from typing import Any

from cdcflow.clients.kafka import TopicReader
from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import KafkaConfig, MySqlSourceConfig
from cdcflow.sources.mysql.capture import CaptureStats, MySqlCapture


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

    def __init__(self, cfg: MySqlSourceConfig, mariadb: dict[str, Any], bootstrap: str) -> None:
        self.capture = MySqlCapture(cfg, KafkaConfig(bootstrap_servers=bootstrap), repl_endpoint(mariadb), bootstrap)
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

    def stop(self, timeout_s: float = 60.0) -> CaptureStats:
        self.stop_event.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError("capture did not stop")
        if self.error is not None:
            raise self.error
        return self.capture.stats


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
}


class MySqlWorkload:
    """Random transactions over every supported type: inserts, updates (also of primary keys), deletes,
    multi-row statements, rollbacks. The source of truth afterwards is simply SELECT *."""

    def __init__(self, ep: MySqlEndpoint, db: str, seed: int = 1, account_ids: int = 2000) -> None:
        import random

        self.ep, self.db, self.rng = ep, db, random.Random(seed)
        self.account_ids = account_ids
        self.transactions = 0
        self.rollbacks = 0
        self.statements = 0
        self._conn: Any = None

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
        from cdcflow.clients.mysql import connect

        if self._conn is None:
            self._conn = connect(self.ep, autocommit=False)
        conn = self._conn
        with conn.cursor() as cur:
            for _ in range(self.rng.randrange(1, 8)):
                self._statement(cur)
        if self.rng.random() < 0.1:
            conn.rollback()
            self.rollbacks += 1
        else:
            conn.commit()
            self.transactions += 1

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
