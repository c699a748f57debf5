"""Checks a MariaDB or Oracle MySQL server before capture starts; every problem is reported at once, clearly.

Tested servers: MariaDB 10.11 and MySQL 8.0.31 (docs/mysql.md, "Servers")."""

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
    gtid_executed: str = ""  # MySQL: every transaction the server has (GTID set text)
    gtid_purged: str = ""  # MySQL: those whose binlog files are gone

    @property
    def mysql(self) -> bool:
        return not self.mariadb


def _variables(ep: MySqlEndpoint, names: list[str]) -> dict[str, str]:
    rows = query(
        ep, "SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ",".join(["%s"] * len(names)) + ")", tuple(names)
    )
    return {str(k).lower(): str(v) for k, v in rows}


def preflight(ep: MySqlEndpoint, replica_server_id: int) -> ServerInfo:
    """Raise ConfigError listing every setting that would make capture wrong; else describe the server."""
    v = _variables(ep, [
        "version", "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "server_id",
        "log_bin_compress", "gtid_binlog_pos", "gtid_mode", "enforce_gtid_consistency", "gtid_executed",
        "gtid_purged", "version_comment",
    ])  # fmt: skip
    problems = []
    version = v.get("version", "?")
    mariadb = "mariadb" in version.lower() or "mariadb" in v.get("version_comment", "").lower()
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
    if not mariadb:
        problems.extend(_mysql_problems(version, v))
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
    return ServerInfo(version, mariadb, server_id, v.get("gtid_binlog_pos", ""), collations,
                      gtid_executed=v.get("gtid_executed", ""), gtid_purged=v.get("gtid_purged", ""))  # fmt: skip


def _mysql_problems(version: str, v: dict[str, str]) -> list[str]:
    """What an Oracle MySQL server (or RDS / Aurora MySQL) needs beyond the row settings both servers need."""
    problems = []
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if m is None or (int(m[1]), int(m[2]), int(m[3])) < (8, 0, 14):
        problems.append(f"MySQL {version} is older than 8.0.14 (no binlog_row_metadata); cdcflow reads MySQL 8.0")
    elif (int(m[1]), int(m[2])) > (8, 0):
        problems.append(f"MySQL {version}: cdcflow is tested with MySQL 8.0 (8.0.31); 8.1 and later are not tested "
                        "(8.3 tagged GTIDs are refused when they appear)")  # fmt: skip
    if v.get("gtid_mode", "OFF").upper() != "ON":
        problems.append(f"gtid_mode={v.get('gtid_mode', 'OFF')}, needs gtid_mode=ON: change positions must survive a "
                        "failover, and only GTIDs name a transaction the same way on every server")  # fmt: skip
    if v.get("enforce_gtid_consistency", "OFF").upper() not in ("ON", "1"):
        problems.append("enforce_gtid_consistency is not ON (gtid_mode=ON needs it)")
    return problems
