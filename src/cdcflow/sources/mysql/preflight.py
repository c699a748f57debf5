"""Checks a MySQL/MariaDB server before capture starts; every problem is reported at once, clearly."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdcflow.clients.mysql import MySqlEndpoint, query
from cdcflow.errors import ConfigError


@dataclass(frozen=True)
class ServerInfo:
    version: str
    mariadb: bool
    server_id: int
    gtid_binlog_pos: str  # MariaDB: the newest GTID per domain in the binlog ("" if none)
    collations: dict[int, str]


def _variables(ep: MySqlEndpoint, names: list[str]) -> dict[str, str]:
    rows = query(
        ep, "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ",".join(["%s"] * len(names)) + ")", tuple(names)
    )
    return {str(k).lower(): str(v) for k, v in rows}


def preflight(ep: MySqlEndpoint, replica_server_id: int) -> ServerInfo:
    """Raise ConfigError listing every setting that would make capture wrong; else describe the server."""
    v = _variables(ep, [
        "version", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
        "log_bin_compress", "binlog_transaction_compression", "gtid_binlog_pos",
    ])  # fmt: skip
    problems = []
    version = v.get("version", "?")
    mariadb = "mariadb" in version.lower()
    if v.get("log_bin", "OFF").upper() not in ("ON", "1"):
        problems.append("the binary log is off: start the server with log_bin")
    for name, wanted in (("binlog_format", "ROW"), ("binlog_row_image", "FULL"), ("binlog_row_metadata", "FULL")):
        got = v.get(name)
        if got is None:
            problems.append(f"{name} is not available on {version}: cdcflow needs MariaDB >= 10.5 or MySQL >= 8.0.14")
        elif got.upper() != wanted:
            problems.append(f"{name}={got}, needs {name}={wanted} (set it in the server's config file and restart)")
    if v.get("log_bin_compress", "OFF").upper() in ("ON", "1"):
        problems.append("log_bin_compress=ON: compressed binlog events are not supported; turn it off")
    if v.get("binlog_transaction_compression", "OFF").upper() in ("ON", "1"):
        problems.append("binlog_transaction_compression=ON: compressed transactions are not supported; turn it off")
    if not mariadb:
        problems.append(f"server {version} is MySQL: cdcflow is tested against MariaDB 10.11 only so far")
    server_id = int(v.get("server_id", "0") or 0)
    if server_id == replica_server_id:
        problems.append(f"mysql.server_id={replica_server_id} equals the server's own server_id; choose another")
    m = re.match(r"(\d+)\.(\d+)", version)
    if mariadb and m and (int(m[1]), int(m[2])) < (10, 5):
        problems.append(f"MariaDB {version} is older than 10.5 (no binlog_row_metadata)")
    if problems:
        raise ConfigError(f"MySQL source {ep.host}:{ep.port} cannot be captured:\n  - " + "\n  - ".join(problems))
    collations = {
        int(i): str(cs)
        for i, cs in query(ep, "SELECT ID, CHARACTER_SET_NAME FROM information_schema.COLLATIONS WHERE ID IS NOT NULL")
    }
    return ServerInfo(version, mariadb, server_id, v.get("gtid_binlog_pos", ""), collations)
