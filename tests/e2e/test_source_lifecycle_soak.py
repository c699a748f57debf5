"""A randomized MariaDB workload that mixes row changes with the DDL the sinks must follow (TRUNCATE, columns
added with defaults, dropped, re-added and retyped, DECIMAL widened, the online-migration RENAME swap), with
the capture and a `cdcflow pipeline run` process into Delta and Phoenix running, the pipeline SIGKILLed at
random. At the end `cdcflow verify mysql-delta` and `cdcflow verify mysql-phoenix` (the CLI) report no
differences for any table."""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients.mysql import execute, query
from cdcflow.dev.testing import ServiceHarness, soak_size, unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, server_position, source_config

from .test_mysql_phoenix import PipelineProcess, cli, write_config

TABLES = ("items", "orders")


class DdlWorkload:
    """Row changes and DDL on two tables, one statement group at a time, all decided by `rng`."""

    def __init__(self, ep: Any, db: str, rng: random.Random) -> None:
        self.ep, self.db, self.rng = ep, db, rng
        self.extra: list[str] = []  # columns added to items so far (and not dropped)
        self.added = 0
        self.wide_price = False
        self.ddl: dict[str, int] = {}

    def create(self) -> None:
        execute(
            self.ep, f"CREATE DATABASE {self.db}",
            f"CREATE TABLE {self.db}.items (id INT PRIMARY KEY, a INT, b VARCHAR(20), price DECIMAL(8,2))",
            f"CREATE TABLE {self.db}.orders (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        )  # fmt: skip

    def step(self) -> None:
        if self.rng.random() < 0.12:
            self._ddl()
        else:
            self._rows()

    def _rows(self) -> None:
        rng, db = self.rng, self.db
        statements = []
        for _ in range(rng.randint(1, 4)):
            i = rng.randint(1, 60)
            kind = rng.random()
            if kind < 0.5:
                price = round(rng.uniform(0, 999), 4 if self.wide_price else 2)
                statements.append(f"REPLACE INTO {db}.items (id, a, b, price) VALUES ({i}, {rng.randint(0, 10**6)}, "
                                  f"'b{rng.randint(0, 99)}', {price})")  # fmt: skip
            elif kind < 0.7:
                statements.append(f"UPDATE {db}.items SET a = a + 1 WHERE id = {i}")
            elif kind < 0.8:
                statements.append(f"DELETE FROM {db}.items WHERE id = {i}")
            else:
                statements.append(f"REPLACE INTO {db}.orders VALUES ({i}, 'v{rng.randint(0, 999)}', {i})")
        execute(self.ep, *statements)

    def _ddl(self) -> None:
        rng, db = self.rng, self.db
        choices = ["add", "truncate", "swap"]
        if self.extra:
            choices += ["drop", "modify"]
        if not self.wide_price:
            choices.append("widen")
        kind = rng.choice(choices)
        self.ddl[kind] = self.ddl.get(kind, 0) + 1
        if kind == "add":
            self.added += 1
            name = f"c{self.added % 3}"  # names come back after a drop: a re-added column must not show old values
            if name in self.extra:
                return
            self.extra.append(name)
            execute(self.ep, f"ALTER TABLE {db}.items ADD COLUMN {name} INT NOT NULL DEFAULT {self.added}")
        elif kind == "drop":
            name = self.extra.pop(rng.randrange(len(self.extra)))
            execute(self.ep, f"ALTER TABLE {db}.items DROP COLUMN {name}")
        elif kind == "modify":
            name = rng.choice(self.extra)
            execute(self.ep, f"ALTER TABLE {db}.items MODIFY {name} BIGINT NOT NULL DEFAULT 7")
        elif kind == "widen":
            self.wide_price = True
            execute(self.ep, f"ALTER TABLE {db}.items MODIFY price DECIMAL(12,4)")
        elif kind == "truncate":
            execute(self.ep, f"TRUNCATE TABLE {db}.{rng.choice(TABLES)}")
        else:  # the online-migration swap of orders, with a copy that differs
            execute(
                self.ep,
                f"CREATE TABLE {db}._orders_gho LIKE {db}.orders",
                f"INSERT INTO {db}._orders_gho SELECT id, v, n + 1 FROM {db}.orders",
                f"RENAME TABLE {db}.orders TO {db}._orders_del, {db}._orders_gho TO {db}.orders",
                f"DROP TABLE {db}._orders_del",
            )  # fmt: skip


@pytest.mark.skipif(
    soak_size(0, 1) == 0,
    reason="make soak only (several minutes): make test follows each of these DDLs once, with verify, in "
    "tests/e2e/test_source_lifecycle.py",
)
def test_a_random_mix_of_rows_and_ddl_with_pipeline_kills_ends_equal(
    mariadb: dict[str, Any], kafka: dict[str, Any], hbase: dict[str, Any], services: ServiceHarness, tmp_path: Path
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    rng = random.Random(50)
    db = unique_name("soak_ddl")
    workload = DdlWorkload(admin, db, rng)
    workload.create()
    source = source_config(unique_name("soakddl"), [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    config_path = write_config(tmp_path, bootstrap, hbase["zk_quorum"], mariadb, source, phoenix_url,
                               max_offsets_per_trigger=500)  # fmt: skip
    config = yaml.safe_load(config_path.read_text())
    config["mysql"]["name"] = source.name
    config["pipeline"]["sinks"].append({"name": "delta", "type": "delta", "options": {
        "path": str(tmp_path / "delta"), "register_in_catalog": False, "fold_interval_s": 5}})  # fmt: skip
    config_path.write_text(yaml.safe_dump(config))
    pipeline = PipelineProcess(config_path, tmp_path / "pipeline.log")
    pipeline.start()
    steps = soak_size(0, 1500)
    kills = sorted(rng.sample(range(steps // 5, steps), 3))
    try:
        for i in range(steps):
            workload.step()
            if kills and i == kills[0]:
                kills.pop(0)
                pipeline.kill()
                time.sleep(rng.uniform(0, 2))
                pipeline.start()
            time.sleep(0.01)
        target = server_position(admin)
        capture.wait_for_checkpoint(target, timeout_s=300)
        deadline = time.monotonic() + 600
        while capture.capture.snapshot is not None and capture.capture.snapshot.active:
            assert time.monotonic() < deadline, capture.capture.snapshot.progress
            time.sleep(1)
        capture.wait_for_checkpoint(server_position(admin), timeout_s=300)
    finally:
        capture.stop()
        pipeline.kill()
    pipeline.start("--available-now")
    assert pipeline.wait(900) == 0, pipeline.log.read_text()[-4000:]
    tables = [f"{db}.{t}" for t in TABLES]
    for kind in ("mysql-delta", "mysql-phoenix"):
        result = cli(config_path, "verify", kind, *tables)
        assert result.returncode == 0, result.stdout + result.stderr
        found = re.findall(rf"^{kind} ({db}\.\w+): no differences: (\d+) rows compared", result.stdout, re.M)
        assert len(found) == len(tables), result.stdout
    stats = capture.capture.stats
    assert stats.ddl_rereads > 5 and stats.truncates > 2 and stats.ddl_not_followed == 0, stats
    rows = query(admin, f"SELECT COUNT(*) FROM {db}.items")[0][0]
    print(f"ddl soak: {steps} steps, DDL {workload.ddl}, {stats.truncates} tables emptied, {stats.ddl_rereads} "
          f"re-reads, items has {rows} rows")  # fmt: skip
