"""The jars a JVM needs to talk to Apache Phoenix: its thick JDBC client and cdcflow's helper jar.

Used by the Spark pipeline's phoenix sink (added to the Spark session), by the Py4J JVM of
`cdcflow verify` (cdcflow.clients.phoenix), and by the stack's Phoenix health check.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from cdcflow.config.paths import cache_dir
from cdcflow.errors import StackError
from cdcflow.jars import maven, versions

log = logging.getLogger(__name__)
JAVA_SOURCES = Path(__file__).resolve().parent.parent / "pipeline" / "sinks" / "phoenix" / "java"
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
    """Spark's own jars, to compile against. Under spark-submit the `pyspark` module comes from
    $SPARK_HOME/python/lib/pyspark.zip, which holds no jars: SPARK_HOME's folder is used then."""
    spec = importlib.util.find_spec("pyspark")  # located, not imported: only pipeline/ imports pyspark
    candidates = [Path(spec.origin).parent / "jars"] if spec is not None and spec.origin else []
    if os.environ.get("SPARK_HOME"):
        candidates.append(Path(os.environ["SPARK_HOME"]) / "jars")
    for folder in candidates:
        if any(folder.glob("spark-sql_*.jar")):
            return folder
    raise StackError(
        f"no Spark jars found (looked in {', '.join(map(str, candidates)) or 'nothing: pyspark is not installed'}); "
        "they are needed to build cdcflow's Phoenix helper jar"
    )


def helper_jar() -> Path:
    """cdcflow's JVM helper (GuardedUpsert + Rows), compiled once per source version."""
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
