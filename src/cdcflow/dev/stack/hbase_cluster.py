"""HBase shaped like production: a ZooKeeper of its own, HDFS (a NameNode and a DataNode), a master and
N region servers (three unless `--region-servers` says otherwise), each its own JVM, WALs on HDFS.
`cdcflow stack up hbase-cluster`; the one-JVM standalone HBase (`hbase`) stays what the tests and `make run` use.

Every jar comes from the classpath the standalone HBase already resolves (hadoop-hdfs holds the NameNode and
DataNode). One shell holds the JVMs in one process group (`stack down` stops them all). Each region server
runs in a loop that starts it again when it dies unless its `down` file exists, so a test can SIGKILL one and
keep it down (`cdcflow.dev.testing.hbase_cluster.RegionServers`).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from cdcflow.clients.hbase import connect
from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.dev.stack import process
from cdcflow.dev.stack.hbase import JDK17_FLAGS, LOG4J2, HBaseService, site_xml
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError

REGION_SERVERS = 3  # the default; `cdcflow stack up --region-servers N`
MAX_REGION_SERVERS = 9
# Extra options for every JVM of the cluster. make test sets Java's C1 compiler only (tests/conftest.py): its short
# run starts seven JVMs for about a minute of work, and C1 took a third less CPU for it (50-58 CPU-s against 78-84,
# the same time); make soak and the benchmarks keep Java's defaults.
JAVA_OPTS_ENV = "CDCFLOW_HBASE_CLUSTER_JAVA_OPTS"


class HBaseClusterService(Service):
    name = "hbase-cluster"
    start_timeout_s = 300.0

    def __init__(self, region_servers: int = REGION_SERVERS) -> None:
        if not 1 <= region_servers <= MAX_REGION_SERVERS:
            raise StackError(f"hbase-cluster runs 1 to {MAX_REGION_SERVERS} region servers, not {region_servers}")
        self.region_servers = region_servers
        self.port_names = (
            "zookeeper", "namenode", "namenode_http", "datanode", "datanode_http", "datanode_ipc", "master",
            *(f"regionserver{i}" for i in range(1, region_servers + 1)),
        )  # fmt: skip
        self.hbase = HBaseService()  # the same jars

    def install(self) -> None:
        self.hbase.install()

    def _java(self, conf: Path, heap_mb: int, main: str, *args: str) -> str:
        return shlex.join([
            "java", f"-Xmx{heap_mb}m", *shlex.split(os.environ.get(JAVA_OPTS_ENV, "")), *JDK17_FLAGS,
            f"-Dlog4j2.configurationFile=file:{conf / 'log4j2.properties'}",
            "-Dhadoop.home.dir=" + str(conf.parent), "-cp", self.hbase.classpath(conf), main, *args,
        ])  # fmt: skip

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        conf, data = home / "conf", home / "data"
        conf.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        hdfs = f"hdfs://127.0.0.1:{ports['namenode']}"
        (conf / "core-site.xml").write_text(site_xml({"fs.defaultFS": hdfs}))
        (conf / "hdfs-site.xml").write_text(site_xml({
            "dfs.namenode.name.dir": str(data / "namenode"), "dfs.datanode.data.dir": str(data / "datanode"),
            "dfs.replication": "1", "dfs.permissions.enabled": "false",
            "dfs.namenode.rpc-address": f"127.0.0.1:{ports['namenode']}",
            "dfs.namenode.http-address": f"127.0.0.1:{ports['namenode_http']}",
            "dfs.datanode.address": f"127.0.0.1:{ports['datanode']}",
            "dfs.datanode.http.address": f"127.0.0.1:{ports['datanode_http']}",
            "dfs.datanode.ipc.address": f"127.0.0.1:{ports['datanode_ipc']}",
            "dfs.datanode.hostname": "127.0.0.1", "dfs.namenode.safemode.extension": "0",
            "dfs.namenode.safemode.min.datanodes": "1",
        }))  # fmt: skip
        (conf / "hbase-site.xml").write_text(site_xml({
            "hbase.cluster.distributed": "true", "hbase.rootdir": f"{hdfs}/hbase", "hbase.tmp.dir": str(data / "tmp"),
            "hbase.zookeeper.quorum": "127.0.0.1", "hbase.zookeeper.property.clientPort": str(ports["zookeeper"]),
            "hbase.master.hostname": "127.0.0.1", "hbase.master.port": str(ports["master"]),
            "hbase.master.info.port": "-1", "hbase.regionserver.hostname": "127.0.0.1",
            "hbase.regionserver.info.port": "-1", "hbase.wal.provider": "filesystem",
            "zookeeper.session.timeout": "20000", "replication.source.maxretriesmultiplier": "10",
            "hbase.server.keyvalue.maxsize": str(64 * 2**20),
            # A split's daughters can merge once the files they share with their parent are compacted away and
            # discharged: every 10 s instead of every 2 minutes.
            "hbase.hfile.compaction.discharger.interval": "10000",
        }))  # fmt: skip
        (conf / "log4j2.properties").write_text(LOG4J2)
        # The NameNode's and DataNode's web servers look for their webapps on the classpath; the hadoop-hdfs jar
        # on Maven Central has none, and nothing here uses their pages: empty ones let them start.
        for app in ("hdfs", "datanode", "static"):
            web_inf = conf / "webapps" / app / "WEB-INF"
            web_inf.mkdir(parents=True, exist_ok=True)
            (web_inf / "web.xml").write_text('<web-app xmlns="http://xmlns.jcp.org/xml/ns/javaee" version="3.1"/>\n')
        (conf / "zoo.cfg").write_text(f"dataDir={data / 'zookeeper'}\nclientPort={ports['zookeeper']}\n"
                                      "clientPortAddress=127.0.0.1\nadmin.enableServer=false\ntickTime=2000\n"
                                      "maxSessionTimeout=60000\n4lw.commands.whitelist=*\n")  # fmt: skip
        if not (data / "namenode" / "current").exists():
            fmt = shlex.split(self._java(conf, 256, "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format",
                                         "-force", "-nonInteractive"))  # fmt: skip
            done = subprocess.run(fmt, capture_output=True, text=True, check=False, cwd=home)
            if done.returncode != 0:
                raise StackError(f"HDFS format failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        once = [
            self._java(conf, 128, "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg")),
            self._java(conf, 256, "org.apache.hadoop.hdfs.server.namenode.NameNode"),
            self._java(conf, 256, "org.apache.hadoop.hdfs.server.datanode.DataNode"),
        ]
        lines = [f"{cmd} &" for cmd in once]
        # The master aborts when the NameNode refuses its first calls (seen on a loaded machine, where the NameNode's
        # JVM took longer to start than the master's retries): it starts once the NameNode's port answers.
        namenode_up = f"(exec 3<>/dev/tcp/127.0.0.1/{ports['namenode']}) 2>/dev/null"
        master = self._java(conf, 512, "org.apache.hadoop.hbase.master.HMaster", "start")
        lines.append(f"(until {namenode_up}; do sleep 0.5; done; exec {master}) &")
        servers = {}
        for i in range(1, self.region_servers + 1):
            port = ports[f"regionserver{i}"]
            java = self._java(conf, 768, "org.apache.hadoop.hbase.regionserver.HRegionServer",
                              f"-Dhbase.regionserver.port={port}", "start")  # fmt: skip
            down, pid_file = home / f"regionserver{i}.down", home / f"regionserver{i}.pid"
            lines.append(f"while :; do if [ -e {shlex.quote(str(down))} ]; then sleep 0.2; continue; fi; {java} & "
                         f"echo $! > {shlex.quote(str(pid_file))}; wait $!; sleep 1; done &")  # fmt: skip
            servers[str(i)] = {"address": f"127.0.0.1:{port}", "pid_file": str(pid_file), "down_file": str(down)}
        lines.append("wait")
        pid = process.spawn(["bash", "-c", "\n".join(lines)], log, cwd=home)
        return pid, {
            "zk_quorum": f"127.0.0.1:{ports['zookeeper']}",
            "znode_parent": "/hbase",
            "master": f"127.0.0.1:{ports['master']}",
            "hdfs": hdfs,
            "regionservers": servers,
        }

    def check(self, endpoints: dict[str, Any]) -> str:
        zk = ZooKeeper(endpoints["zk_quorum"])
        try:
            live = zk.children(f"{endpoints['znode_parent']}/rs")
        finally:
            zk.close()
        wanted = len(endpoints["regionservers"])
        if len(live) < wanted:
            raise StackError(f"{len(live)} of {wanted} region servers registered")
        client = connect(endpoints["zk_quorum"], endpoints["znode_parent"], op_timeout_s=5.0)
        try:
            client.ping()
            return f"master answers; {len(live)} region servers; WALs on {endpoints['hdfs']}"
        finally:
            client.close()
