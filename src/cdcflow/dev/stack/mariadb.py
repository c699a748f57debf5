"""MariaDB 10.11 from Debian packages, with a private data directory, port and row-based binlog."""

from __future__ import annotations

import getpass
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint, execute, query
from cdcflow.dev.stack import process
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError
from cdcflow.jars import versions

# Credentials of the local dev/test server only; never used for a real database.
ADMIN_USER, ADMIN_PASSWORD = "cdcflow", "cdcflow"
REPL_USER, REPL_PASSWORD = "cdcflow_repl", "cdcflow_repl"


def _binary(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )


# A Unix socket's path holds at most 107 bytes (sun_path); mariadbd and mysqld refuse to start with a longer one.
_MAX_SOCKET_PATH = 107


def socket_path(run: Path) -> Path:
    """The server's socket in its run folder, or, when that path is too long for a Unix socket (a stack home
    deep in a folder tree), a short path in the temp folder named after the run folder."""
    sock = run / "mysqld.sock"
    if len(os.fsencode(sock)) <= _MAX_SOCKET_PATH:
        return sock
    digest = hashlib.sha256(os.fsencode(run.resolve())).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"cdcflow-mysqld-{digest}.sock"


def local_endpoints(port: int, sock: Path) -> dict[str, Any]:
    """What clients of a local MariaDB or MySQL server of the stack use."""
    return {
        "host": "127.0.0.1",
        "port": port,
        "unix_socket": str(sock),
        "user": ADMIN_USER,
        "password": ADMIN_PASSWORD,
        "repl_user": REPL_USER,
        "repl_password": REPL_PASSWORD,
    }


def root_endpoint(endpoints: dict[str, Any]) -> MySqlEndpoint:
    """root on the server's socket (no password: the datadir was initialized for the stack)."""
    return MySqlEndpoint("localhost", 0, "root", "", unix_socket=endpoints["unix_socket"])


class MariaDBService(Service):
    name = "mariadb"
    port_names = ("sql",)
    start_timeout_s = 60.0

    def install(self) -> None:
        if _binary("mariadbd") is None:
            if os.geteuid() != 0:
                raise StackError(f"MariaDB is not installed. Run: sudo apt-get install -y {versions.MARIADB_PACKAGE}")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", versions.MARIADB_PACKAGE]):
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                if proc.returncode != 0:
                    raise StackError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        mariadbd = _binary("mariadbd")
        if mariadbd is None:
            raise StackError("mariadbd not found after installing mariadb-server")
        out = subprocess.run([mariadbd, "--version"], capture_output=True, text=True, check=False).stdout
        if not re.search(rf"\b{re.escape(versions.MARIADB_SERIES)}\.\d+", out):
            raise StackError(f"expected MariaDB {versions.MARIADB_SERIES}.x, found: {out.strip()}")

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        data, run = home / "data", home / "run"
        data.mkdir(parents=True, exist_ok=True)
        run.mkdir(parents=True, exist_ok=True)
        user = getpass.getuser()
        sock = socket_path(run)
        cnf = home / "my.cnf"
        cnf.write_text(
            "\n".join(
                [
                    "[mariadbd]",
                    f"datadir={data}",
                    f"socket={sock}",
                    f"port={ports['sql']}",
                    "bind-address=127.0.0.1",
                    f"pid-file={run / 'mysqld.pid'}",
                    f"user={user}",
                    "server_id=1",
                    f"log_bin={data / 'binlog'}",
                    "binlog_format=ROW",
                    "binlog_row_image=FULL",
                    "binlog_row_metadata=FULL",
                    "gtid_strict_mode=1",
                    "log_slave_updates=ON",  # as a replica (failover tests), its binlog holds what it applies
                    "skip-name-resolve",
                    "innodb_buffer_pool_size=256M",
                    "max_allowed_packet=64M",
                    "character-set-server=utf8mb4",
                    "collation-server=utf8mb4_general_ci",
                ]
            )
            + "\n"
        )
        if not (data / "mysql").is_dir():
            install_db = _binary("mariadb-install-db")
            if install_db is None:
                raise StackError("mariadb-install-db not found")
            proc = subprocess.run(
                [install_db, f"--defaults-file={cnf}", f"--user={user}",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise StackError(f"mariadb-install-db failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        mariadbd = _binary("mariadbd")
        assert mariadbd is not None
        pid = process.spawn([mariadbd, f"--defaults-file={cnf}"], log, cwd=home)
        return pid, local_endpoints(ports["sql"], sock)

    def _root(self, endpoints: dict[str, Any]) -> MySqlEndpoint:
        return root_endpoint(endpoints)

    def check(self, endpoints: dict[str, Any]) -> str:
        rows = query(
            self._root(endpoints),
            "SELECT VERSION(), @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@log_bin",
        )
        version, fmt, image, metadata, log_bin = rows[0]
        if (fmt, image, metadata, int(log_bin)) != ("ROW", "FULL", "FULL", 1):
            raise StackError(f"binlog misconfigured: format={fmt} image={image} metadata={metadata} log_bin={log_bin}")
        return f"{version}, binlog ROW/FULL/FULL"

    def prepare(self, endpoints: dict[str, Any]) -> None:
        a, r = endpoints["user"], endpoints["repl_user"]
        execute(
            self._root(endpoints),
            f"CREATE USER IF NOT EXISTS '{a}'@'127.0.0.1' IDENTIFIED BY '{endpoints['password']}'",
            f"GRANT ALL PRIVILEGES ON *.* TO '{a}'@'127.0.0.1' WITH GRANT OPTION",
            f"CREATE USER IF NOT EXISTS '{r}'@'127.0.0.1' IDENTIFIED BY '{endpoints['repl_password']}'",
            f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT, RELOAD ON *.* TO '{r}'@'127.0.0.1'",
            # the snapshot's watermark table lives in the `cdcflow` database (mysql.snapshot.watermark_table)
            f"GRANT ALL PRIVILEGES ON cdcflow.* TO '{r}'@'127.0.0.1'",
        )
