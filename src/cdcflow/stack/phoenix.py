"""Apache Phoenix on the local HBase, and the jars cdcflow's JVMs need to reach it.

Phoenix has no process of its own here: its server side runs inside the HBase JVM (HBaseService
always puts it on the classpath), and clients use Phoenix's thick JDBC driver inside their own
JVM: the Spark pipeline's, or a small Py4J JVM for `cdcflow verify` and table checks. Why not a
query server (docs/decisions/0004-phoenix-through-jdbc.md): the only released Phoenix Query
Server works with Phoenix 5.1 only, and Avatica's wire format cuts TIMESTAMPs to milliseconds.

`cdcflow stack up phoenix` therefore starts HBase (if needed), makes sure the client jars and
cdcflow's small JVM helper jar (a Spark JDBC dialect that writes UPSERT, and a bulk row reader)
are built, and connects once, which creates Phoenix's SYSTEM tables.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cdcflow.errors import StackError
from cdcflow.stack import maven, versions
from cdcflow.stack.paths import cache_dir
from cdcflow.stack.service import Service

log = logging.getLogger(__name__)
JAVA_SOURCES = Path(__file__).resolve().parent.parent / "phoenix" / "java"
HELPER_JAR = "cdcflow-phoenix-helper.jar"

# What Phoenix's launchers add on Java 11+ (and HBase's, for its shaded netty).
JVM_FLAGS = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    # Phoenix TIMESTAMP/DATE values are instants; cdcflow reads and writes them as UTC wall clock.
    "-Duser.timezone=UTC",
)


def client_jars() -> list[Path]:
    """Phoenix's thick JDBC client (shaded) plus the logging it expects, from Maven Central (cached)."""
    lib = maven.resolve_classpath(
        "phoenix-client.xml",
        {
            "phoenix.version": versions.PHOENIX_VERSION,
            "phoenix.client.hbase": versions.PHOENIX_CLIENT_HBASE,
            "log4j.version": versions.LOG4J_VERSION,
        },
    )
    return sorted(lib.glob("*.jar"))


def _pyspark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")  # located, not imported: only pipeline/ imports pyspark
    if spec is None or not spec.origin:
        raise StackError("pyspark is not installed; it is needed to build cdcflow's Phoenix helper jar")
    return Path(spec.origin).parent / "jars"


def helper_jar() -> Path:
    """cdcflow's JVM helper (PhoenixUpsertDialect + Rows), compiled once per source version."""
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    spark_jars = _pyspark_jars()
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources) + str(spark_jars).encode()).hexdigest()[:12]
    target = cache_dir() / "jars" / f"phoenix-helper-{digest}" / HELPER_JAR
    if target.exists():
        return target
    javac, jar = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar is None:
        raise StackError("javac/jar not found: a JDK 17 is needed once to build cdcflow's Phoenix helper jar")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        classes = Path(tmp) / "classes"
        cmds = [
            [javac, "-nowarn", "--release", "17", "-cp", f"{spark_jars}/*", "-d", str(classes), *map(str, sources)],
            [jar, "cf", str(Path(tmp) / HELPER_JAR), "-C", str(classes), "."],
        ]
        for cmd in cmds:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise StackError(f"building {HELPER_JAR} failed:\n{proc.stdout}{proc.stderr}")
        (Path(tmp) / HELPER_JAR).replace(target)
    log.info("built %s", target)
    return target


def jdbc_url(zk_quorum: str, znode_parent: str = "/hbase") -> str:
    """Phoenix's thick-client URL: ZooKeeper quorum (host:port), then the HBase znode parent."""
    return f"jdbc:phoenix:{zk_quorum}:{znode_parent}"


def check(url: str) -> str:
    """Connect once (creating Phoenix's SYSTEM tables on first use) and count the user tables."""
    from cdcflow.phoenix.jdbc import PhoenixJvm

    with PhoenixJvm.launch(url) as phoenix:
        rows = phoenix.query(
            "SELECT COUNT(DISTINCT TABLE_SCHEM || '.' || TABLE_NAME) FROM SYSTEM.CATALOG WHERE TABLE_TYPE = 'u'"
        )
    return f"Phoenix {versions.PHOENIX_VERSION} answers; {rows[0][0]} table(s)"


class PhoenixService(Service):
    """Phoenix as a stack component: no process of its own; it lives in the HBase JVM."""

    name = "phoenix"
    port_names = ()
    runs_in = "hbase"
    # The first connection creates Phoenix's SYSTEM tables (about 20 s on the reference machine).
    start_timeout_s = 180.0

    def install(self) -> None:
        client_jars()
        helper_jar()

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        raise StackError("phoenix runs inside HBase; the stack manager starts HBase instead")

    def endpoints_in(self, host: dict[str, Any]) -> dict[str, Any]:
        if "phoenix_server" not in host:
            raise StackError(
                "this HBase was started without Phoenix's server jars (an older stack); "
                "restart it: cdcflow stack down hbase && cdcflow stack up phoenix"
            )
        return {"jdbc_url": jdbc_url(host["zk_quorum"], host.get("znode_parent", "/hbase")),
                "version": versions.PHOENIX_VERSION}  # fmt: skip

    def check(self, endpoints: dict[str, Any]) -> str:
        return check(str(endpoints["jdbc_url"]))
