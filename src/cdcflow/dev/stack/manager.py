"""`cdcflow stack up/down/status`: start the services, wait until a real client call works, stop them."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdcflow.config.model import COMPONENTS, DEFAULT_COMPONENTS
from cdcflow.dev.stack import ports, process, state_file
from cdcflow.dev.stack.hbase import HBaseService
from cdcflow.dev.stack.hbase_cluster import REGION_SERVERS, HBaseClusterService
from cdcflow.dev.stack.kafka import KafkaService
from cdcflow.dev.stack.kafka_cluster import KafkaClusterService
from cdcflow.dev.stack.mariadb import MariaDBService
from cdcflow.dev.stack.mysql import MySQLService
from cdcflow.dev.stack.phoenix import PhoenixService
from cdcflow.dev.stack.registry import RegistryService
from cdcflow.dev.stack.service import Service
from cdcflow.dev.stack.spark import SparkService
from cdcflow.errors import CdcflowError, StackError

log = logging.getLogger(__name__)


def make_service(name: str, region_servers: int = REGION_SERVERS) -> Service:
    """The component `name`; `region_servers`: how many the production-shaped HBase (`hbase-cluster`) runs."""
    factories: dict[str, type[Service]] = {
        "kafka": KafkaService,
        "kafka-cluster": KafkaClusterService,
        "hbase": HBaseService,
        "hbase-cluster": HBaseClusterService,
        "mariadb": MariaDBService,
        "mysql": MySQLService,
        "phoenix": PhoenixService,
        "registry": RegistryService,
        "spark": SparkService,
    }
    if name not in factories:
        raise StackError(f"unknown component {name!r}; choose from {', '.join(COMPONENTS)}")
    if name == "hbase-cluster":
        return HBaseClusterService(region_servers)
    return factories[name]()


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    running: bool
    healthy: bool
    detail: str
    pid: int | None
    endpoints: dict[str, Any]
    log: str


class Stack:
    def __init__(self, home: Path, region_servers: int = REGION_SERVERS) -> None:
        self.home = home.resolve()
        self.region_servers = region_servers  # of an hbase-cluster this stack starts

    def _names(
        self, names: Sequence[str] | None, with_hosts: bool = False, default: Sequence[str] = DEFAULT_COMPONENTS
    ) -> list[str]:
        wanted = list(names) if names else list(default)
        for n in list(wanted):
            host = make_service(n).runs_in  # also validates the name
            if with_hosts and host and host not in wanted:
                wanted.append(host)
        return [n for n in COMPONENTS if n in wanted]

    def log_path(self, name: str) -> Path:
        return self.home / name / f"{name}.log"

    def up(self, names: Sequence[str] | None = None) -> list[ServiceStatus]:
        """Start what is not running (idempotent) and return once each answers a real call."""
        chosen = self._names(names, with_hosts=True)
        services = {n: make_service(n, self.region_servers) for n in chosen}
        for svc in services.values():
            svc.install()
        current = state_file.load(self.home)
        for name, svc in services.items():
            old = current.get(name)
            if old and process.is_ours(old.pid, old.start_ticks):
                log.info("%s already running (pid %s)", name, old.pid)
                continue
            if svc.runs_in:  # no process of its own: it shares its (already started) host's
                host = current[svc.runs_in]
                current[name] = state_file.ServiceState(
                    name, host.pid, host.start_ticks, {}, svc.endpoints_in(host.endpoints), host.log, time.time()
                )
                state_file.save(self.home, current)
                continue
            svc_home = self.home / name
            svc_home.mkdir(parents=True, exist_ok=True)
            chosen_ports = ports.choose(list(svc.port_names), old.ports if old else {})
            log_file = self.log_path(name)
            pid, endpoints = svc.start(svc_home, chosen_ports, log_file)
            current[name] = state_file.ServiceState(
                name, pid, process.start_ticks(pid), chosen_ports, endpoints, str(log_file), time.time()
            )
            state_file.save(self.home, current)  # saved before waiting, so `down` can always stop it
        for name, svc in services.items():
            self._wait_healthy(svc, current[name])
            svc.prepare(current[name].endpoints)
        return self.status(chosen)

    def _wait_healthy(self, svc: Service, st: state_file.ServiceState) -> None:
        deadline = time.monotonic() + svc.start_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not process.is_ours(st.pid, st.start_ticks):
                raise StackError(f"{svc.name} exited during start-up. Last log lines:\n{process.tail(Path(st.log))}")
            try:
                svc.check(st.endpoints)
                return
            except CdcflowError as exc:
                last = str(exc)
            except Exception as exc:  # a client library's own error while the server starts
                last = f"{type(exc).__name__}: {exc}"
            time.sleep(1.0)
        raise StackError(
            f"{svc.name} did not become healthy within {svc.start_timeout_s:.0f}s ({last}). "
            f"Last log lines:\n{process.tail(Path(st.log))}"
        )

    def down(self, names: Sequence[str] | None = None, grace_s: float | None = None) -> list[str]:
        """Stop the named services (default: all). Returns the names that were running. `grace_s`
        overrides how long each service gets after SIGTERM before SIGKILL (default: its own)."""
        chosen = self._names(names, default=COMPONENTS)
        current = state_file.load(self.home)
        stopped = []
        for name in reversed(chosen):
            st = current.get(name)
            if st is None:
                continue
            if make_service(name).runs_in:
                pass  # its host's process is stopped with the host
            elif st.pid and process.is_ours(st.pid, st.start_ticks):
                log.info("stopping %s (pid %s)", name, st.pid)
                process.stop_group(st.pid, make_service(name).stop_grace_s if grace_s is None else grace_s)
                stopped.append(name)
            # Keep the entry (ports, endpoints) so the next `up` can reuse the same addresses.
            st.pid, st.start_ticks = None, None
            state_file.save(self.home, current)
        return stopped

    def status(self, names: Sequence[str] | None = None) -> list[ServiceStatus]:
        current = state_file.load(self.home)
        out = []
        # The default components, and any other one this stack has started before.
        for name in self._names(names, default=[*DEFAULT_COMPONENTS, *current]):
            st = current.get(name)
            if st is None or st.pid is None:
                out.append(ServiceStatus(name, False, False, "not running", None, {}, str(self.log_path(name))))
                continue
            running = process.is_ours(st.pid, st.start_ticks)
            healthy, detail = False, "process not running"
            if running:
                try:
                    detail = make_service(name).check(st.endpoints)
                    healthy = True
                except Exception as exc:
                    detail = f"unhealthy: {exc}"
            out.append(ServiceStatus(name, running, healthy, detail, st.pid, st.endpoints, st.log))
        return out

    def endpoints(self, name: str) -> dict[str, Any]:
        st = state_file.load(self.home).get(name)
        if st is None or st.pid is None:
            raise StackError(f"{name} is not started in stack {self.home}; run `cdcflow stack up {name}`")
        return st.endpoints
