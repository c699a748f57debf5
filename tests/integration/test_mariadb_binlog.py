"""MariaDB of the stack writes row events with full metadata to its binlog."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import WriteRowsEvent

from cdcflow.clients.mysql import MySqlEndpoint, execute, query
from cdcflow.dev.testing import unique_name


def test_inserted_rows_appear_in_the_binlog(mariadb: dict[str, Any]) -> None:
    admin = MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["user"], mariadb["password"])
    db = unique_name("it_db")
    execute(
        admin,
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.people (id BIGINT PRIMARY KEY, name VARCHAR(40), score DECIMAL(8,2), "
        "seen DATETIME(6) NULL)",
    )
    (gtid_before,) = query(admin, "SELECT @@gtid_current_pos")[0]
    rows = [
        (1, "ann", Decimal("1.50"), dt.datetime(2026, 1, 2, 3, 4, 5, 123456)),
        (2, "bo\u00e9", Decimal("-20.00"), None),
        (3, "cy", Decimal("0.01"), dt.datetime(1999, 12, 31, 23, 59, 59)),
    ]
    conn_ep = MySqlEndpoint(admin.host, admin.port, admin.user, admin.password, database=db)
    from cdcflow.clients.mysql import connect

    conn = connect(conn_ep, autocommit=False)
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO people VALUES (%s, %s, %s, %s)", rows)
    conn.commit()
    conn.close()

    repl = MySqlEndpoint(admin.host, admin.port, mariadb["repl_user"], mariadb["repl_password"])
    stream = BinLogStreamReader(
        connection_settings=repl.connection_settings(),
        server_id=random.randint(1000, 2**31),
        auto_position=gtid_before,
        is_mariadb=True,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=[db],
    )
    seen = []
    try:
        for event in stream:
            assert event.table == "people"
            seen.extend(r["values"] for r in event.rows)
    finally:
        stream.close()

    assert seen == [{"id": i, "name": n, "score": s, "seen": t} for i, n, s, t in rows]
