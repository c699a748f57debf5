"""`cdcflow mysql offsets show | set | reset` against both servers: refused while the capture
runs; a checkpoint moved back (by GTID state, or by binlog file and position) replays what followed, and the
table rebuilt from Kafka still equals SELECT *; reset makes the next start begin at mysql.start."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdcflow.clients.kafka import KafkaEndpoint, end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, repl_endpoint, server_position, source_config
from cdcflow.errors import ConfigError
from cdcflow.sources.mysql import offsets
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cdcflow.cli.main", "mysql", "offsets", *args, "--config",
                           str(config)], capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def wait_unlisted(repl: Any, server_id: int, timeout_s: float = 180) -> None:
    """Until the server no longer lists the stopped capture (it drops a replica once its dump thread notices the
    closed connection). Without REPLICATION MASTER ADMIN, MariaDB lists no replicas and any binlog dump of the
    user counts: the other test lane's captures use the same user, so this may wait for one of them to end."""
    deadline = time.monotonic() + timeout_s
    while offsets.running_capture(repl, server_id) is not None:
        assert time.monotonic() < deadline, "the stopped capture is still listed"
        time.sleep(0.5)


def cli_unlisted(config: Path, repl: Any, server_id: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The command run once no capture is listed, again while it refuses because one is (another lane's
    capture can start between the look and the command)."""
    deadline = time.monotonic() + 180
    while True:
        wait_unlisted(repl, server_id, deadline - time.monotonic())
        done = cli(config, *args)
        if done.returncode == 0 or "is running" not in done.stderr or time.monotonic() > deadline:
            return done
        time.sleep(1)


def test_offsets_show_set_and_reset_replay_exactly(mysql_server: dict[str, Any], kafka: dict[str, Any],
                                                   tmp_path: Path) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    admin, repl = admin_endpoint(mysql_server), repl_endpoint(mysql_server)
    db = unique_name("offs")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, n INT)")
    cfg = source_config(unique_name("offsrc"), [db])
    config = tmp_path / "cdcflow.yaml"
    mysql = {**cfg.model_dump(mode="json"), "host": mysql_server["host"], "port": mysql_server["port"],
             "user": mysql_server["repl_user"], "password": mysql_server["repl_password"]}  # fmt: skip
    config.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap}, "mysql": mysql}))
    topic = f"{cfg.topic_prefix}.{db}.t"

    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        execute(admin, *(f"INSERT INTO {db}.t VALUES ({i}, 0)" for i in range(10)))
        after_inserts = server_position(admin)
        capture.wait_for_checkpoint(after_inserts)
        boundary = capture.capture.stats.checkpoint
        assert boundary is not None
        execute(admin, f"UPDATE {db}.t SET n = n + 1", f"DELETE FROM {db}.t WHERE id < 3")
        capture.wait_for_checkpoint(server_position(admin))
        # while it runs: refused, and the checkpoint is left as it is
        assert offsets.running_capture(repl, cfg.server_id) is not None
        with pytest.raises(offsets.CaptureRunning, match="is running"):  # what `offsets set` and `reset` check
            offsets.refuse_if_running(repl, cfg.server_id, cfg.name)
    finally:
        stopped = capture.stop().checkpoint
    wait_unlisted(repl, cfg.server_id)
    published = sum(end_offsets(bootstrap, topic).values())
    assert published == 10 + 10 + 3

    shown = cli(config, "show")
    # where the capture stopped: at least where the server was after our changes; the other lane's tests may have
    # written to the server since (their transactions move the checkpoint too), so not the server's position now
    assert stopped is not None and stopped.gtid_state is not None
    assert shown.returncode == 0 and f"resumes after GTID state {stopped.gtid_state}" in shown.stdout, shown
    # back to just after the inserts, named by the binlog file and end position of their last transaction
    moved = cli_unlisted(config, repl, cfg.server_id, "set", "--file", boundary.file, "--position", str(boundary.pos))
    assert moved.returncode == 0 and f"resumes after {after_inserts}" in moved.stdout, moved.stdout + moved.stderr
    with pytest.raises(ConfigError, match="not where a transaction ends"):
        offsets.state_at(repl, boundary.file, boundary.pos - 1)
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        capture.wait_for_checkpoint(server_position(admin))
    finally:
        stats = capture.stop()
    assert stats.events == 13  # the update and the delete again, nothing before them
    values = [r.value for r in consume(bootstrap, topic, expected=published + 13) if r.value is not None]
    assert len(values) == published + 13
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    report = compare_tables(source_rows(admin, db, "t"), rebuilt[(db, "t")])
    assert report.clean, report.examples

    assert cli_unlisted(config, repl, cfg.server_id, "reset").returncode == 0
    assert offsets.show(KafkaEndpoint.of(bootstrap, {}), cfg.offsets_topic, cfg.name) is None
    with pytest.raises(ConfigError, match="not a GTID state"):
        offsets.normalized_state(repl, "definitely-not-a-gtid")
