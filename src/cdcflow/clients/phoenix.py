"""Phoenix over JDBC from Python, through a JVM reached with Py4J. The only module that imports py4j.

Two ways to get the JVM:
- `PhoenixJvm.launch(url)` starts a small JVM of its own (Phoenix client jars + cdcflow's helper
  jar) for the CLI, `cdcflow verify`, the stack's health check and tests;
- `PhoenixConnection(jvm, loader, url)` uses a JVM that already exists, the Spark driver's in the
  pipeline (Spark loaded the jars into `loader`).

Statements are sent as SQL text; results come back in bulk as JSON lines (Rows.java), because
every Py4J call is a socket round trip.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import orjson
from py4j.java_gateway import GatewayParameters, JavaGateway, launch_gateway
from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

from cdcflow.errors import ServiceUnavailable, StackError, TerminalError

log = logging.getLogger(__name__)
DRIVER = "org.apache.phoenix.jdbc.PhoenixDriver"
FETCH_ROWS = 5000

# SQLException classes / messages Phoenix raises for trouble reaching HBase: worth retrying.
_TRANSIENT = (
    "java.net.ConnectException", "ConnectionClosing", "RetriesExhausted", "NotServingRegion",
    "CallTimeout", "SocketTimeout", "ServerNotRunning", "PleaseHold", "RegionServerStopped",
    "MasterNotRunning", "ConnectionLoss", "StaleRegionBoundaryCache",
)  # fmt: skip


class PhoenixError(TerminalError):
    """Phoenix refused a statement (bad SQL, missing table, type mismatch, ...)."""


class PhoenixUnavailable(ServiceUnavailable):
    """Phoenix (HBase / ZooKeeper) could not be reached; retry later."""


def translate(exc: BaseException, sql: str | None = None) -> Exception:
    """A Py4J / Java exception as a cdcflow error with the useful message."""
    where = f" (in: {sql[:300]})" if sql else ""
    if isinstance(exc, Py4JJavaError):
        java = exc.java_exception
        text = str(java.toString()) if java is not None else str(exc)
        cause = java
        chain = [text]
        for _ in range(8):  # walk the cause chain for the root message
            cause = cause.getCause() if cause is not None else None
            if cause is None:
                break
            chain.append(str(cause.toString()))
        joined = " <- ".join(chain)
        if any(marker in joined for marker in _TRANSIENT):
            return PhoenixUnavailable(f"{chain[-1]}{where}")
        return PhoenixError(f"{text}{where}")
    if isinstance(exc, Py4JNetworkError):
        return PhoenixUnavailable(f"the JVM holding the Phoenix connection is gone: {exc}")
    return PhoenixError(f"{type(exc).__name__}: {exc}{where}")


class PhoenixConnection:
    """One Phoenix JDBC connection in a JVM reached through Py4J. Auto-commit is on: each statement
    commits as it goes (Phoenix would otherwise buffer every mutation of the connection)."""

    def __init__(self, jvm: Any, loader: Any, url: str) -> None:
        self.url = url
        self._jvm = jvm
        try:
            driver = loader.loadClass(DRIVER).newInstance()
            props = jvm.java.util.Properties()
            self._conn = driver.connect(url, props)
            self._conn.setAutoCommit(True)
        except (Py4JError, Py4JJavaError) as exc:
            raise translate(exc) from exc

    def execute(self, sql: str) -> int:
        """Run one statement (DDL, UPSERT, DELETE, ...); returns the update count."""
        try:
            stmt = self._conn.createStatement()
            try:
                return int(stmt.executeUpdate(sql))
            finally:
                stmt.close()
        except (Py4JError, Py4JJavaError) as exc:
            raise translate(exc, sql) from exc

    def iter_rows(self, sql: str) -> Iterator[list[Any]]:
        """Rows as lists of JSON-friendly values (DECIMAL, FLOAT, DOUBLE, TIMESTAMP as strings;
        bytes as base64), fetched in chunks."""
        try:
            stmt = self._conn.createStatement()
            try:
                rs = stmt.executeQuery(sql)
                while True:
                    chunk = self._jvm.io.cdcflow.spark.Rows.fetch(rs, FETCH_ROWS)
                    if not chunk:
                        return
                    for line in chunk.splitlines():
                        yield orjson.loads(line)
            finally:
                stmt.close()
        except (Py4JError, Py4JJavaError) as exc:
            raise translate(exc, sql) from exc

    def query(self, sql: str) -> list[list[Any]]:
        return list(self.iter_rows(sql))

    def close(self) -> None:
        try:
            self._conn.close()
        except (Py4JError, Py4JJavaError):
            pass  # the JVM may already be gone


def write_from_executors(
    rows: Any, url: str, sql: str, params: list[int], sql_types: list[int], kinds: list[int], commit_rows: int,
    name: str,
) -> int:  # fmt: skip
    """Run `sql` once per row of the DataFrame `rows` in Spark's executors (GuardedUpsert.java, in
    cdcflow's helper jar on the session's classpath); the number of rows written."""
    return write_tables_from_executors(rows, url, [(sql, params)], -1, sql_types, kinds, commit_rows, name)


def write_tables_from_executors(
    rows: Any, url: str, statements: list[tuple[str, list[int]]], table_column: int, sql_types: list[int],
    kinds: list[int], commit_rows: int, name: str, driver: tuple[str, str] = ("", ""),
) -> int:  # fmt: skip
    """Write every row of the DataFrame `rows` with the statement its int column `table_column` names (an index
    into `statements`: SQL, and the row's column bound to each `?`; -1: every row takes the first), in one Spark
    job (GuardedUpsert.java); the number of rows written. `sql_types` and `kinds` are per column of `rows`.
    `driver`: (scope, epoch) under which the executors keep their Phoenix driver from one call to the next
    (("", ""): a new driver per task)."""
    sc = rows.sparkSession.sparkContext
    gateway, jvm = sc._gateway, sc._jvm

    def ints(values: list[int]) -> Any:
        array = gateway.new_array(jvm.int, len(values))
        for i, v in enumerate(values):
            array[i] = v
        return array

    sqls = gateway.new_array(jvm.java.lang.String, len(statements))
    starts = [0]
    for i, (sql, params) in enumerate(statements):
        sqls[i] = sql
        starts.append(starts[-1] + len(params))
    counter = sc._jsc.sc().longAccumulator(name)
    try:
        jvm.io.cdcflow.spark.GuardedUpsert.writeTables(
            rows._jdf, url, driver[0], driver[1], sqls, ints([p for _, params in statements for p in params]),
            ints(starts), table_column, ints(sql_types), ints(kinds), commit_rows, counter,
        )  # fmt: skip
    except (Py4JError, Py4JJavaError) as exc:
        raise translate(exc, statements[0][0] if len(statements) == 1 else None) from exc
    return int(counter.value())


def release_executor_driver(jvm: Any, scope: str) -> None:
    """Close the Phoenix driver that `jvm` (the Spark driver's, which holds the executors in local mode) keeps
    for `scope`; nothing if it keeps none or is gone."""
    try:
        jvm.io.cdcflow.spark.GuardedUpsert.release(scope)
    except (Py4JError, Py4JJavaError):
        pass  # the JVM is gone, and its drivers with it


class PhoenixJvm:
    """A JVM of cdcflow's own with Phoenix's client, and one connection in it. Use as a context manager."""

    def __init__(self, gateway: JavaGateway, connection: PhoenixConnection) -> None:
        self.gateway = gateway
        self.connection = connection

    @classmethod
    def launch(cls, url: str, heap_mb: int = 512) -> PhoenixJvm:
        from cdcflow.jars import phoenix as phoenix_jars

        jars = [*phoenix_jars.client_jars(), phoenix_jars.helper_jar(), _py4j_jar()]
        port = launch_gateway(
            classpath=os.pathsep.join(map(str, jars)),
            javaopts=[f"-Xmx{heap_mb}m", *phoenix_jars.JVM_FLAGS],
            die_on_exit=True,
            redirect_stdout=open(os.devnull, "w"),  # noqa: SIM115 - owned by the JVM's lifetime
            redirect_stderr=open(os.devnull, "w"),  # noqa: SIM115
        )
        gateway = JavaGateway(gateway_parameters=GatewayParameters(port=port, auto_convert=True))
        try:
            loader = gateway.jvm.java.lang.Thread.currentThread().getContextClassLoader()
            conn = PhoenixConnection(gateway.jvm, loader, url)
        except Exception:
            gateway.shutdown()
            raise
        return cls(gateway, conn)

    def execute(self, sql: str) -> int:
        return self.connection.execute(sql)

    def query(self, sql: str) -> list[list[Any]]:
        return self.connection.query(sql)

    def iter_rows(self, sql: str) -> Iterator[list[Any]]:
        return self.connection.iter_rows(sql)

    def close(self) -> None:
        self.connection.close()
        self.gateway.shutdown()

    def __enter__(self) -> PhoenixJvm:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _py4j_jar() -> str:
    import py4j

    base = os.path.dirname(py4j.__file__)
    for candidate in (
        os.path.join(base, "..", "..", "..", "..", "share", "py4j"),  # pip installs it under <prefix>/share
        os.path.join(base, "..", "pyspark", "jars"),
    ):
        if os.path.isdir(candidate):
            for name in sorted(os.listdir(candidate)):
                if name.startswith("py4j") and name.endswith(".jar"):
                    return os.path.abspath(os.path.join(candidate, name))
    raise StackError("py4j's jar was not found next to the py4j package")
