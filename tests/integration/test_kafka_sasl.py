"""kafka.properties reach every Kafka client of the MySQL capture, not only its producer: against the stack's
SASL/PLAIN listener the capture reads its checkpoint and XA topic, creates topics and publishes."""

from __future__ import annotations

from typing import Any

import pytest

from cdcflow.clients.kafka import KafkaEndpoint, ping, read_latest
from cdcflow.clients.mysql import connect, execute, query
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, read_all, source_config
from cdcflow.errors import ServiceUnavailable
from cdcflow.sources.mysql.checkpoint import Checkpoint


def sasl_properties(kafka: dict[str, Any]) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": kafka["sasl_username"], "sasl.password": kafka["sasl_password"]}  # fmt: skip


def test_the_sasl_listener_refuses_clients_without_credentials(kafka: dict[str, Any]) -> None:
    with pytest.raises(ServiceUnavailable):
        ping(kafka["sasl_bootstrap_servers"], timeout_s=3)
    assert ping(KafkaEndpoint.of(kafka["sasl_bootstrap_servers"], sasl_properties(kafka))) == 1


def test_mysql_capture_through_sasl_resumes_with_its_xa_rows(mariadb: dict[str, Any], kafka: dict[str, Any]) -> None:
    sasl, props = kafka["sasl_bootstrap_servers"], sasl_properties(kafka)
    admin = admin_endpoint(mariadb)
    db = unique_name("sasl")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    cfg = source_config(unique_name("saslsrc"), [db])
    xa = connect(admin_endpoint(mariadb, database=db), autocommit=True)
    capture = CaptureThread(cfg, mariadb, sasl, kafka_properties=props).start()
    try:
        execute(admin, f"INSERT INTO {db}.t VALUES (1, 'one')")
        with xa.cursor() as cur:
            xid = f"'{db}-1'"
            for sql in (f"XA START {xid}", "INSERT INTO t VALUES (2, 'xa')", f"XA END {xid}", f"XA PREPARE {xid}"):
                cur.execute(sql)
        (gtid_pos,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
        capture.wait_for_checkpoint(gtid_pos)
    finally:
        capture.stop()
    # A new capture reads its checkpoint and the prepared XA rows back over SASL, then publishes them.
    capture = CaptureThread(cfg, mariadb, sasl, kafka_properties=props).start()
    try:
        with xa.cursor() as cur:
            cur.execute(f"XA COMMIT '{db}-1'")
        values = read_all(kafka["bootstrap_servers"], [f"{cfg.topic_prefix}.{db}.t"], expected=2)
    finally:
        stats = capture.stop()
        xa.close()
    assert len(values) == 2 and stats.xa_committed == 1
    stored = read_latest(KafkaEndpoint.of(sasl, props), cfg.offsets_topic, cfg.name.encode())
    assert stored is not None and Checkpoint.from_bytes(stored).xa_prepared == {}
