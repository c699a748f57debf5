"""HBase 2.6 standalone: master, region server and embedded ZooKeeper in one JVM, local filesystem.

Phoenix's server side (its coprocessors) is always on the classpath: it stays passive until a
Phoenix client first connects, and having it there means `cdcflow stack up phoenix` never has to
restart a running HBase.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from cdcflow.clients.hbase import connect
from cdcflow.dev.stack import process
from cdcflow.dev.stack.service import Service
from cdcflow.jars import maven, versions

# What HBase's bin/hbase adds on JDK 11+ (add_jdk11_jvm_flags in 2.6).
JDK17_FLAGS = [
    "-XX:+UseG1GC",
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
]  # fmt: skip

LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{ISO8601} %-5p [%t] %c{2}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.zk.name = org.apache.zookeeper
logger.zk.level = WARN
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = WARN
logger.hbase.name = org.apache.hadoop.hbase
logger.hbase.level = INFO
logger.metrics.name = org.apache.hadoop.hbase.metrics
logger.metrics.level = WARN
"""


def site_xml(props: dict[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n" for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class HBaseService(Service):
    name = "hbase"
    port_names = ("zookeeper", "master", "regionserver")
    start_timeout_s = 180.0

    # 3 GB: one JVM holds master, region server and ZooKeeper, and the test suite and `make run`
    # keep many tables' memstores (plus 5 MB cells) in it; 1 GB ran out of heap under load.
    def __init__(self, heap_mb: int = 3072) -> None:
        self.heap_mb = heap_mb
        self._lib: Path | None = None
        self._phoenix: list[Path] = []

    def install(self) -> None:
        self._lib = maven.resolve_classpath(
            "hbase.xml", {"hbase.version": versions.HBASE_VERSION, "log4j.version": versions.LOG4J_VERSION}
        )
        phoenix = maven.resolve_classpath(
            "phoenix-server.xml",
            {"phoenix.version": versions.PHOENIX_VERSION, "phoenix.hbase.compat": versions.PHOENIX_HBASE_COMPAT},
        )
        # Only the jars HBase does not already have (in any version): HBase's own versions win.
        self._phoenix = maven.jars_not_in(phoenix, self._lib)

    def classpath(self, conf: Path) -> str:
        """`conf` (the site files) first, then HBase's jars and the Phoenix server jars HBase lacks."""
        assert self._lib is not None, "install() first"
        return ":".join([maven.classpath(conf, self._lib), *map(str, self._phoenix)])

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        assert self._lib is not None, "install() first"
        conf = home / "conf"
        data = home / "data"
        conf.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        props = {
            "hbase.cluster.distributed": "false",
            "hbase.rootdir": f"file://{data / 'hbase'}",
            "hbase.tmp.dir": str(data / "tmp"),
            "hbase.zookeeper.property.dataDir": str(data / "zookeeper"),
            # The local filesystem has no hflush/hsync; without this the WAL refuses to start.
            "hbase.unsafe.stream.capability.enforce": "false",
            "hbase.zookeeper.quorum": "127.0.0.1",
            "hbase.zookeeper.property.clientPort": str(ports["zookeeper"]),
            "hbase.master.hostname": "127.0.0.1",
            "hbase.master.port": str(ports["master"]),
            "hbase.master.info.port": "-1",
            "hbase.regionserver.hostname": "127.0.0.1",
            "hbase.regionserver.port": str(ports["regionserver"]),
            "hbase.regionserver.info.port": "-1",
            # Let clients (and the replication source) fail over fast in tests and the demo.
            "zookeeper.session.timeout": "30000",
            # Replication retries back off by 1 s x a multiplier that grows to this cap (HBase's
            # default 300 makes a sink outage cost up to 5 minutes of back-off; 10 s is enough here).
            "replication.source.maxretriesmultiplier": "10",
            # HBase refuses cells over 10 MB by default; the oversize tests write a 20 MB one.
            "hbase.server.keyvalue.maxsize": str(64 * 2**20),
        }
        (conf / "hbase-site.xml").write_text(site_xml(props))
        (conf / "log4j2.properties").write_text(LOG4J2)
        cmd = [
            "java", f"-Xmx{self.heap_mb}m", *JDK17_FLAGS,
            f"-Dlog4j2.configurationFile=file:{conf / 'log4j2.properties'}",
            "-cp", self.classpath(conf),
            "org.apache.hadoop.hbase.master.HMaster", "start",
        ]  # fmt: skip
        pid = process.spawn(cmd, log, cwd=home)
        return pid, {
            "zk_quorum": f"127.0.0.1:{ports['zookeeper']}",
            "znode_parent": "/hbase",
            "master": f"127.0.0.1:{ports['master']}",
            "regionserver": f"127.0.0.1:{ports['regionserver']}",
            "phoenix_server": versions.PHOENIX_VERSION,
        }

    def check(self, endpoints: dict[str, Any]) -> str:
        client = connect(endpoints["zk_quorum"], endpoints["znode_parent"], op_timeout_s=5.0)
        try:
            client.ping()
            return f"master answers; {len(client.list_tables())} user table(s)"
        finally:
            client.close()
