"""Kafka as production runs it: three KRaft nodes (each broker and controller), every topic replicated three
times with min.insync.replicas=2. `cdcflow stack up kafka-cluster`; the single broker (`kafka`) stays the
default.

One shell holds the three JVMs in one process group (`stack down` stops them all), each in a loop that starts
its node again when it dies, unless the node's `down` file exists: a test SIGKILLs a node (its pid is in
`node<i>.pid`) and keeps it down as long as it wants (`KafkaNodes` in cdcflow.dev.testing.kafka_cluster).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as kafka_client
from cdcflow.dev.stack import process
from cdcflow.dev.stack.kafka import LOG4J2, KafkaService, new_cluster_id, node_properties
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError

NODES = 3


class KafkaClusterService(Service):
    name = "kafka-cluster"
    port_names: tuple[str, ...] = tuple(f"{kind}{i}" for i in range(1, NODES + 1) for kind in ("broker", "controller"))
    start_timeout_s = 150.0

    def __init__(self, heap_mb: int = 384) -> None:
        self.node = KafkaService(heap_mb)  # the same jars and JVM as the single broker

    def install(self) -> None:
        self.node.install()

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        (home / "log4j2.properties").write_text(LOG4J2)
        cluster_id_file = home / "cluster.id"  # every node's log directory is formatted for one cluster
        if not cluster_id_file.exists():
            cluster_id_file.write_text(new_cluster_id())
        cluster_id = cluster_id_file.read_text().strip()
        voters = ",".join(f"{i}@127.0.0.1:{ports[f'controller{i}']}" for i in range(1, NODES + 1))
        loops = []
        for i in range(1, NODES + 1):
            node_home = home / f"node{i}"
            node_home.mkdir(parents=True, exist_ok=True)
            props = node_home / "server.properties"
            data = node_home / "data"
            props.write_text(node_properties(i, ports[f"broker{i}"], ports[f"controller{i}"], voters, data,
                                             replicas=NODES))  # fmt: skip
            self.node.format(home, props, data, cluster_id)
            java = shlex.join(self.node.java(home, "kafka.Kafka", str(props)))
            down, pid_file = shlex.quote(str(home / f"node{i}.down")), shlex.quote(str(home / f"node{i}.pid"))
            # (a node killed is started again after a second, unless its down file says to wait)
            loops.append(f"while :; do if [ -e {down} ]; then sleep 0.2; continue; fi; {java} & echo $! > {pid_file}; "
                         "wait $!; sleep 1; done &")  # fmt: skip
        pid = process.spawn(["bash", "-c", "\n".join([*loops, "wait"])], log, cwd=home)
        return pid, {
            "bootstrap_servers": ",".join(f"127.0.0.1:{ports[f'broker{i}']}" for i in range(1, NODES + 1)),
            "nodes": {
                str(i): {"broker": f"127.0.0.1:{ports[f'broker{i}']}", "pid_file": str(home / f"node{i}.pid"),
                         "down_file": str(home / f"node{i}.down")}
                for i in range(1, NODES + 1)
            },
            "replication_factor": NODES,
            "min_insync_replicas": NODES - 1,
        }  # fmt: skip

    def check(self, endpoints: dict[str, Any]) -> str:
        brokers = kafka_client.ping(endpoints["bootstrap_servers"], timeout_s=3.0)
        if brokers < NODES:
            raise StackError(f"{brokers} of {NODES} brokers answer metadata requests")
        return f"{brokers} brokers answer metadata requests (replication factor {NODES}, min.insync.replicas 2)"
