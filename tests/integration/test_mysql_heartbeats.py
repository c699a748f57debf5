"""Heartbeat records (`mysql.output.heartbeat_topic`): while the server is idle the capture keeps saying where
it is and that it is caught up, in the cdcflow format and in Debezium's (JSON and Avro)."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cdcflow.clients.kafka import TopicReader
from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, position_reached, server_position, source_config


def heartbeats(bootstrap: str, topic: str, wanted: int, timeout_s: float = 30) -> list[Any]:
    reader = TopicReader(bootstrap, [topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < wanted and time.monotonic() < deadline:
            out.extend((r.key, r.value) for r in reader.poll(1.0))
    finally:
        reader.close()
    return out


def test_heartbeats_carry_the_position_and_move_while_the_server_is_idle(
    mariadb: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any],
) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("beats")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    outputs = {
        "cdcflow": {},
        "debezium-json": {"format": "debezium", "schemas": True},
        "debezium-avro": {"format": "debezium", "serialization": "avro"},
    }
    configs = {kind: source_config(unique_name("beats"), [db], output={
        **output, "heartbeat_topic": unique_name("beats-topic"), "heartbeat_interval_s": 0.5})
        for kind, output in outputs.items()}  # fmt: skip
    captures = {kind: CaptureThread(cfg, mariadb, bootstrap, registry_url=registry["url"]).start()
                for kind, cfg in configs.items()}  # fmt: skip
    try:
        inserted_s = int(time.time())  # the binlog's timestamps are whole seconds
        execute(admin, f"INSERT INTO {db}.t VALUES (1)")
        end = server_position(admin)
        for capture in captures.values():
            capture.wait_for_checkpoint(end)
        started = int(time.time() * 1000)
        time.sleep(3)  # idle: nothing but heartbeats
    finally:
        stats = {kind: capture.stop() for kind, capture in captures.items()}
    final = server_position(admin)
    got = {kind: heartbeats(bootstrap, cfg.output.heartbeat_topic or "", stats[kind].heartbeats)
           for kind, cfg in configs.items()}  # fmt: skip
    assert all(s.heartbeats >= 5 for s in stats.values()), {k: s.heartbeats for k, s in stats.items()}

    cdcflow = [json.loads(v) for _, v in got["cdcflow"]]
    assert len(cdcflow) >= 5 and all(k == configs["cdcflow"].name.encode() for k, _ in got["cdcflow"])
    last = cdcflow[-1]
    # Bounds, not equality: tests in the other lane write to the same server meanwhile.
    assert last["schema"] == "cdcflow.heartbeat/1"
    assert position_reached(last["source"]["gtid_state"], end) and position_reached(final, last["source"]["gtid_state"])
    assert last["ts_ms"] >= started + 2000, (started, last)
    # The source time promises every change up to it is in Kafka: at least the insert's. When no other test
    # wrote meanwhile the server was idle, and then it follows the clock (a sink's lag can read 0); while others
    # write, the server sends no heartbeats and it is the newest event's time.
    idle = final == end
    source_floor = started + 1000 if idle else inserted_s * 1000
    assert last["source"]["ts_ms"] >= source_floor, (idle, started, last)

    dbz = got["debezium-json"]
    key, value = json.loads(dbz[-1][0]), json.loads(dbz[-1][1])
    assert key["payload"] == {"serverName": configs["debezium-json"].name}
    assert key["schema"]["name"] == "io.debezium.connector.common.ServerNameKey"
    assert value["schema"]["name"] == "io.debezium.connector.common.Heartbeat"
    assert value["payload"]["ts_ms"] >= started + 2000
    assert value["payload"]["cdcflow_source_ts_ms"] >= source_floor  # cdcflow's addition: the source time

    topic = configs["debezium-avro"].output.heartbeat_topic or ""
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": registry["url"]}))
    raw_key, raw_value = got["debezium-avro"][-1]
    assert deserialize(raw_key, SerializationContext(topic, MessageField.KEY)) == {
        "serverName": configs["debezium-avro"].name}  # fmt: skip
    avro_value = deserialize(raw_value, SerializationContext(topic, MessageField.VALUE))
    assert avro_value["ts_ms"] >= started + 2000 and avro_value["cdcflow_source_ts_ms"] >= source_floor
