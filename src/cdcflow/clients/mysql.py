"""Plain SQL connections (PyMySQL). The only module that imports the driver."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.cursors

from cdcflow.errors import ServiceUnavailable, TerminalError

# A statement refused for a duplicate key (the workloads expect some: a key change onto an existing key).
IntegrityError = pymysql.err.IntegrityError
OperationalError = pymysql.err.OperationalError
# A connection that broke under a statement (server restarted, network): the workloads reconnect.
ConnectionLost = (pymysql.err.OperationalError, pymysql.err.InterfaceError)


@dataclass(frozen=True)
class MySqlTls:
    """TLS to the server, as MySQL's own clients name the modes (`--ssl-mode`).

    preferred: TLS when the server offers it, unverified (PyMySQL's default; MySQL 8 servers make a
    self-signed certificate at first start); disabled; required: TLS or fail, unverified; verify_ca:
    the server's certificate must chain to `ca_file`; verify_identity: and name the host connected to.
    Without TLS, MySQL 8's caching_sha2_password sends the password RSA-encrypted with the server's
    public key instead."""

    mode: str = "preferred"
    ca_file: str | None = None
    cert_file: str | None = None  # a client certificate, for servers that require X509
    key_file: str | None = None

    def pymysql_settings(self) -> dict[str, Any]:
        if self.mode == "disabled":
            return {"ssl_disabled": True}
        client = {"ssl_cert": self.cert_file, "ssl_key": self.key_file} if self.cert_file else {}
        if self.mode == "required":
            return {"ssl": {"check_hostname": False, "verify_mode": False,
                            **({"cert": self.cert_file, "key": self.key_file} if self.cert_file else {})}}  # fmt: skip
        if self.mode == "verify_ca":
            return {"ssl_ca": self.ca_file, "ssl_verify_cert": True, **client}
        if self.mode == "verify_identity":
            return {"ssl_ca": self.ca_file, "ssl_verify_identity": True, **client}
        return client  # preferred


@dataclass(frozen=True)
class MySqlEndpoint:
    host: str
    port: int
    user: str
    password: str
    unix_socket: str | None = None
    database: str | None = None
    tls: MySqlTls = MySqlTls()

    def connection_settings(self) -> dict[str, Any]:
        """The dict python-mysql-replication and PyMySQL take."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password,
                **self.tls.pymysql_settings()}  # fmt: skip


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
            **ep.tls.pymysql_settings(),
        )
    except (pymysql.err.OperationalError, RuntimeError) as exc:
        raise _connect_error(ep, exc) from exc


_ACCESS_DENIED = (1044, 1045, 1227, 1698)
_TLS_FAILED = 2026  # CR_SSL_CONNECTION_ERROR


def _connect_error(ep: MySqlEndpoint, exc: Exception) -> Exception:
    """Wrong credentials, missing privileges and TLS that cannot be set up are terminal (fix the config);
    anything else may pass."""
    code = exc.args[0] if exc.args else None
    where = f"MySQL server at {ep.host}:{ep.port}"
    if code in _ACCESS_DENIED:
        return TerminalError(f"{where} refused user {ep.user!r}: {exc.args[-1]}")
    text = str(exc)
    if code == _TLS_FAILED or "CERTIFICATE_VERIFY_FAILED" in text or ("SSL" in text and ep.tls.mode != "preferred"):
        return TerminalError(f"{where}: TLS failed with mysql.tls.mode={ep.tls.mode} ({text})")
    if isinstance(exc, RuntimeError):  # PyMySQL: e.g. RSA password encryption impossible
        return TerminalError(f"{where}: {text}")
    return ServiceUnavailable(f"{where}: {exc}")


class AccessDenied(TerminalError):
    """The server refused a statement for lack of a privilege."""


def query(ep: MySqlEndpoint, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = connect(ep)
    try:
        with conn.cursor() as cur:
            try:
                cur.execute(sql, args)
            except pymysql.err.OperationalError as exc:
                if exc.args and exc.args[0] in _ACCESS_DENIED:
                    raise AccessDenied(f"{ep.user}@{ep.host}:{ep.port}: {exc.args[-1]}") from exc
                raise
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


# -- the replication stream -------------------------------------------------------------------------------

COM_BINLOG_DUMP, COM_REGISTER_SLAVE, COM_BINLOG_DUMP_GTID = 0x12, 0x15, 0x1E
_BINLOG_THROUGH_GTID = 0x04  # COM_BINLOG_DUMP_GTID flag: start after the GTID set sent
# Errors that mean "the position asked for is gone or invalid": retrying the same request cannot help.
_TERMINAL_STREAM_ERRORS = {1236: "the requested binlog position or GTID is not available on the server"}


@dataclass(frozen=True)
class StreamStart:
    """Where a binlog stream starts: a MariaDB GTID state or a MySQL GTID set (preferred), else a file and
    position."""

    gtid_state: str | None = None  # "0-1-100,1-2-7": the last transaction already processed, per domain
    # MySQL: every transaction already processed, in MySQL's binary GTID set form (GtidSet.encode)
    mysql_gtids: bytes | None = None
    file: str | None = None
    pos: int = 4


class BinlogStream:
    """One replication connection (COM_BINLOG_DUMP). `read()` returns the bytes of the next event.

    Only the transport lives here; the events are decoded by cdcflow.sources.mysql.binlog (pure code).
    """

    def __init__(
        self, ep: MySqlEndpoint, server_id: int, heartbeat_s: float = 5.0, read_timeout_s: float = 30.0
    ) -> None:
        self.ep = ep
        self.server_id = server_id
        self.heartbeat_s = heartbeat_s
        self.read_timeout_s = read_timeout_s
        self._conn: pymysql.Connection[Any] | None = None
        self.checksum = False

    def open(self, start: StreamStart) -> None:
        try:
            conn = pymysql.connect(
                host=self.ep.host, port=self.ep.port, user=self.ep.user, password=self.ep.password,
                unix_socket=self.ep.unix_socket, connect_timeout=10, read_timeout=int(self.read_timeout_s),
                autocommit=True, charset="utf8mb4", **self.ep.tls.pymysql_settings(),
            )  # fmt: skip
        except (pymysql.err.OperationalError, RuntimeError) as exc:
            raise _connect_error(self.ep, exc) from exc
        self._conn = conn
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@global.binlog_checksum")
                row = cur.fetchone()
                self.checksum = row is not None and str(row[0]).upper() == "CRC32"
                # Tell the server we verify checksums, understand MariaDB GTID events (capability 4),
                # and want a heartbeat when idle, so a dead connection is noticed within read_timeout.
                cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
                cur.execute("SET @mariadb_slave_capability = 4")
                cur.execute("SET @master_heartbeat_period = %s", (int(self.heartbeat_s * 1e9),))
                if start.mysql_gtids is not None:  # names this replica in SHOW REPLICAS and the server's log
                    cur.execute("SET @slave_uuid = %s", (str(uuid.UUID(int=self.server_id)),))
                elif start.gtid_state is not None:
                    cur.execute("SET @slave_connect_state = %s", (start.gtid_state,))
                    cur.execute("SET @slave_gtid_strict_mode = 1")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            host = b"cdcflow"
            user = self.ep.user.encode()
            register = (
                struct.pack("<I", self.server_id) + bytes([len(host)]) + host + bytes([len(user)]) + user
                + b"\x00" + struct.pack("<HII", 0, 0, 0)
            )  # fmt: skip
            raw: Any = conn  # the replication commands are below PyMySQL's public API
            raw._execute_command(COM_REGISTER_SLAVE, register)
            raw._read_ok_packet()
            if start.mysql_gtids is not None:  # MySQL: every transaction not in the set, from the oldest file on
                data = start.mysql_gtids
                dump = struct.pack("<HIIQI", _BINLOG_THROUGH_GTID, self.server_id, 0, 4, len(data)) + data
                raw._execute_command(COM_BINLOG_DUMP_GTID, dump)
                return
            if start.gtid_state is not None:
                dump = struct.pack("<IHI", 4, 0, self.server_id)  # empty file name: position from the GTID state
            else:
                if not start.file:
                    raise TerminalError("a binlog stream needs a GTID state or a file name to start from")
                dump = struct.pack("<IHI", start.pos, 0, self.server_id) + start.file.encode()
            raw._execute_command(COM_BINLOG_DUMP, dump)
        except pymysql.err.MySQLError as exc:
            self.close()
            raise _stream_error(exc) from exc
        except OSError as exc:
            self.close()
            raise ServiceUnavailable(f"binlog stream from {self.ep.host}:{self.ep.port}: {exc}") from exc

    def read(self) -> bytes:
        """The next event's bytes (blocks; heartbeats keep an idle stream alive)."""
        if self._conn is None:
            raise ServiceUnavailable("binlog stream is not open")
        try:
            conn: Any = self._conn
            data = conn._read_packet().get_all_data()
        except pymysql.err.MySQLError as exc:
            self.close()
            raise _stream_error(exc) from exc
        except (OSError, AttributeError) as exc:  # pymysql drops its socket (AttributeError) after errors
            self.close()
            raise ServiceUnavailable(f"binlog stream from {self.ep.host}:{self.ep.port}: {exc!r}") from exc
        if not data or data[0] != 0:
            self.close()
            if data[:1] == b"\xfe":
                raise ServiceUnavailable("the server ended the binlog stream")
            raise ServiceUnavailable(f"unexpected binlog stream packet starting {data[:8].hex()}")
        return bytes(data[1:])

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass


def _stream_error(exc: Exception) -> Exception:
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code in _TERMINAL_STREAM_ERRORS:
        detail = exc.args[1] if len(exc.args) > 1 else exc
        return TerminalError(f"binlog stream: {_TERMINAL_STREAM_ERRORS[code]}: {detail}")
    if code in _ACCESS_DENIED:
        return TerminalError(f"binlog stream: access denied (needs REPLICATION SLAVE): {exc}")
    return ServiceUnavailable(f"binlog stream: {exc}")
