"""A Spark standalone cluster: one master and two workers, from the pyspark install's own
`bin/spark-class` (no separate Spark download), on free local ports.

It is what `cdcflow pipeline submit --master spark://...` runs against in the tests and for a trial
of the cluster mode on one machine. Not in the default stack: `cdcflow stack up spark`.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import urllib.request
from pathlib import Path
from typing import Any

from cdcflow.dev.stack import process
from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError

WORKERS = 2


def pyspark_home() -> Path:
    """The pyspark install: a complete SPARK_HOME (located, not imported: only pipeline/ imports Spark)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise StackError("pyspark is not installed (make install)")
    return Path(spec.origin).parent


class SparkService(Service):
    name = "spark"
    port_names: tuple[str, ...] = (
        "master", "master_ui", *(f"worker{i}{part}" for i in range(1, WORKERS + 1) for part in ("", "_ui")),
    )  # fmt: skip
    start_timeout_s = 120.0
    stop_grace_s = 20.0

    def __init__(self, worker_cores: int = 1, worker_memory: str = "2g") -> None:
        self.worker_cores, self.worker_memory = worker_cores, worker_memory

    def install(self) -> None:
        if not (pyspark_home() / "bin" / "spark-class").exists():
            raise StackError(f"pyspark at {pyspark_home()} has no bin/spark-class; reinstall it (make install)")

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        master = f"spark://127.0.0.1:{ports['master']}"
        # One shell holds the three JVMs in one process group, so `stack down` stops all of them.
        lines = [
            shlex.join([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(ports["master"]), "--webui-port", str(ports["master_ui"])]) + " &",
        ]  # fmt: skip
        for i in range(1, WORKERS + 1):
            work_dir = home / f"worker{i}"
            work_dir.mkdir(parents=True, exist_ok=True)
            lines.append(
                shlex.join([spark_class, "org.apache.spark.deploy.worker.Worker", master, "--host", "127.0.0.1",
                            "--port", str(ports[f"worker{i}"]), "--webui-port", str(ports[f"worker{i}_ui"]),
                            "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                            "--work-dir", str(work_dir)]) + " &"
            )  # fmt: skip
        lines.append("wait")
        env = {
            "SPARK_HOME": str(pyspark_home()),
            "SPARK_LOG_DIR": str(home),
            "SPARK_NO_DAEMONIZE": "1",
            # the master and workers only schedule: Java's C1 compiler is ready sooner and costs less
            "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1",
        }
        pid = process.spawn(["bash", "-c", "\n".join(lines)], log, cwd=home, env=env)
        return pid, {
            "master_url": master,
            "master_ui": f"http://127.0.0.1:{ports['master_ui']}",
            "worker_dirs": [str(home / f"worker{i}") for i in range(1, WORKERS + 1)],
        }

    def check(self, endpoints: dict[str, Any]) -> str:
        """The master's own JSON status: alive, with every worker registered."""
        with urllib.request.urlopen(f"{endpoints['master_ui']}/json/", timeout=3) as answer:
            status = json.load(answer)
        alive = int(status.get("aliveworkers", 0))
        if status.get("status") != "ALIVE" or alive < WORKERS:
            raise StackError(f"master {status.get('status')}, {alive} of {WORKERS} workers registered")
        return f"master {endpoints['master_url']}, {alive} workers, {status.get('cores')} cores"
