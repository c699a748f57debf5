"""Helpers for HBase capture tests: run peer processes, rebuild tables from events, compare."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import Put
from cdcflow.clients.kafka import KafkaRecord, TopicReader, end_offsets, read_at
from cdcflow.dev.testing.order import assert_row_order
from cdcflow.events.json_codec import decode
from cdcflow.events.oversize import reassemble
from cdcflow.pipeline.sinks.hbase.mutations import event_mutations

CellTuple = tuple[bytes, bytes, bytes, int, bytes]


def wait_until_replicated(
    client: HBaseClient, bootstrap: str, table: str, topic: str, region_starts: Sequence[bytes] = (b"",),
    timeout_s: float = 180,
) -> None:  # fmt: skip
    """Everything written to `table` so far is in `topic` once a row written now, last, in each region
    (`region_starts`: each region's first key) is: a serial peer keeps each region's order (not the order
    across regions). The sentinel rows stay in the table. Only records past the topic's end before this call
    count: a sentinel published by an earlier call says nothing about the writes since."""
    sentinels = {start + b"\x00-sentinel" for start in region_starts}
    ends = end_offsets(bootstrap, topic)
    for row in sentinels:
        client.mutate(table, Put(row).add(b"cf", b"sentinel", b"last", 10**13))
    reader = TopicReader(bootstrap, [topic])
    deadline = time.monotonic() + timeout_s
    try:
        while sentinels:
            sentinels -= {r.key for r in reader.poll(0.5) if r.offset >= ends.get(r.partition, 0)}
            assert time.monotonic() < deadline, f"{topic}: replication did not deliver the last writes of {sentinels}"
    finally:
        reader.close()


def scan_cells(client: HBaseClient, table: str) -> set[CellTuple]:
    return {(c.row, c.family, c.qualifier, c.timestamp, c.value) for c in client.scan(table, max_versions=1000)}


@dataclass
class PeerSetup:
    """One cdcflow peer cluster (znode parent + peer id + topic prefix) unique to a test."""

    name: str
    hbase: dict[str, Any]
    kafka: dict[str, Any]
    workdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def config_path(self) -> Path:
        return self.workdir / f"{self.name}.yaml"

    def peer_config(self) -> dict[str, Any]:
        return {"peer_id": self.name, "port": 0, "znode_parent": f"/{self.name}"}

    def write_config(self, kafka: dict[str, Any] | None = None, **hbase_overrides: Any) -> Path:
        cfg = {
            "kafka": {"bootstrap_servers": self.kafka["bootstrap_servers"], **(kafka or {})},
            "hbase": {
                "name": "it",
                "zk_quorum": self.hbase["zk_quorum"],
                "topic_prefix": self.name,
                "peer": self.peer_config(),
                **hbase_overrides,
            },
        }
        self.config_path.write_text(yaml.safe_dump(cfg))
        return self.config_path

    def cli(self, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "cdcflow.cli.main", *args],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise AssertionError(f"cdcflow {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout

    def add_peer(self, *tables: str) -> None:
        self.cli("hbase", "peer", "add", "--config", str(self.config_path), *(f"--table={t}" for t in tables))

    def start(self, index: int = 0, *args: str, open_files: int | None = None) -> subprocess.Popen[bytes]:
        """Start `cdcflow hbase run` (extra CLI `args`; `open_files`: its soft open-files limit)."""
        log = open(self.workdir / f"{self.name}-peer{index}.log", "ab")  # noqa: SIM115 - owned by the process

        def limit_files() -> None:
            if open_files is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

        level = os.environ.get("CDCFLOW_TEST_PEER_LOG_LEVEL", "INFO")  # DEBUG to see every connection
        proc = subprocess.Popen(
            [sys.executable, "-m", "cdcflow.cli.main", "--log-level", level,
             "hbase", "run", "--config", str(self.config_path), *args],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=limit_files,
        )  # fmt: skip
        self.procs.append(proc)
        self.wait_registered(len([p for p in self.procs if p.poll() is None]))
        return proc

    def wait_registered(self, count: int, timeout_s: float = 30) -> None:
        from cdcflow.clients.zookeeper import ZooKeeper

        zk = ZooKeeper(self.hbase["zk_quorum"])
        try:
            deadline = time.monotonic() + timeout_s
            while len(zk.children(f"/{self.name}/rs")) < count:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{count} peer instance(s) did not register; see {self.workdir}")
                time.sleep(0.2)
        finally:
            zk.close()

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def full_logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.workdir.glob(f"{self.name}-peer*.log")))

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(self.workdir.glob(f"{self.name}-peer*.log"))
        )


class Rebuilder:
    """Applies every event of `topic` to `target` (an HBase table) and keeps what it read."""

    def __init__(self, client: HBaseClient, bootstrap: str, topic: str, target: str) -> None:
        self.client = client
        self.bootstrap = bootstrap
        self.oversized = 0
        self.reader = TopicReader(bootstrap, [topic])
        self.target = target
        self.records: list[KafkaRecord] = []

    def pump(self) -> int:
        batch = self.reader.poll(wait_s=2.0)
        for rec in batch:
            assert rec.value is not None
            event = decode(rec.value)
            if event.oversize is not None:  # a marker: the whole change is in parts elsewhere
                event = decode(self.reassemble(event.oversize))
                self.oversized += 1
            for m in event_mutations(event):
                self.client.mutate(self.target, m)
        self.records.extend(batch)
        return len(batch)

    def reassemble(self, info: dict[str, Any]) -> bytes:
        """The whole change, from the parts at the offsets its marker names."""
        found = read_at(self.bootstrap, info["topic"], info["partition"], info["offsets"])
        parts = {json.loads(v or b"{}")["part"]: v or b"" for v in found.values()}
        assert len(parts) == info["parts"], f"marker {info['id']} located {len(parts)} of {info['parts']} parts"
        return reassemble(parts.values())

    def until_equal(self, source: str, timeout_s: float = 180) -> set[CellTuple]:
        deadline = time.monotonic() + timeout_s
        expected = scan_cells(self.client, source)
        while True:
            self.pump()
            got = scan_cells(self.client, self.target)
            if got == expected:
                return got
            if time.monotonic() > deadline:
                missing, extra = expected - got, got - expected
                raise AssertionError(
                    f"rebuilt table differs after {timeout_s}s: {len(missing)} missing, {len(extra)} extra; "
                    f"e.g. missing {sorted(missing)[:3]!r} extra {sorted(extra)[:3]!r}"
                )

    def duplicates(self) -> int:
        seen = set()
        dups = 0
        for r in self.records:
            doc = json.loads(r.value or b"{}")
            ident = (r.key, doc["source"]["region"], tuple(doc["source"]["pos"]))
            dups += ident in seen
            seen.add(ident)
        return dups

    def assert_row_order(self) -> None:
        """See cdcflow.dev.testing.order.assert_row_order."""
        assert_row_order(self.records)

    def close(self) -> None:
        self.reader.close()
