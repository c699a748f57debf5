"""Plain SQL connections (PyMySQL). The only module that imports the driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.cursors

from cdcflow.errors import ServiceUnavailable


@dataclass(frozen=True)
class MySqlEndpoint:
    host: str
    port: int
    user: str
    password: str
    unix_socket: str | None = None
    database: str | None = None

    def connection_settings(self) -> dict[str, Any]:
        """The dict python-mysql-replication and PyMySQL take."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password}


def connect(ep: MySqlEndpoint, timeout_s: float = 5.0, autocommit: bool = True) -> pymysql.Connection[Any]:
    try:
        return pymysql.connect(
            host=ep.host,
            port=ep.port,
            user=ep.user,
            password=ep.password,
            unix_socket=ep.unix_socket,
            database=ep.database,
            connect_timeout=int(max(1, timeout_s)),
            autocommit=autocommit,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as exc:
        raise ServiceUnavailable(f"MariaDB at {ep.host}:{ep.port}: {exc}") from exc


def query(ep: MySqlEndpoint, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())
    finally:
        conn.close()


def execute(ep: MySqlEndpoint, *statements: str) -> None:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)
    finally:
        conn.close()
