from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdcflow.config import load_config
from cdcflow.errors import ConfigError

BUNDLED = Path(__file__).resolve().parents[2] / "config" / "cdcflow.yaml"


def test_bundled_default_config_is_valid() -> None:
    cfg = load_config(BUNDLED, environ={})
    assert set(cfg.stack.components) == {"kafka", "hbase", "mariadb", "phoenix"}
    assert [s.type for s in cfg.pipeline.sinks] == ["hbase", "delta", "phoenix"]


def test_env_overrides_file(tmp_path: Path) -> None:
    cfg = load_config(BUNDLED, environ={"CDCFLOW__STACK__HOME": str(tmp_path)})
    assert cfg.stack.resolved_home() == tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stack: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "mapping at the top level"),
        ("stack:\n  components: [kafka, oracle]\n", "unknown component"),
        ("stack:\n  colour: blue\n", "stack.colour"),
        ("pipeline:\n  topics: 'cdcflow\\.(x'\n", "not a valid topic pattern"),
        ("pipeline:\n  sinks: [{name: a, type: console, topics: '['}]\n", "not a valid topic pattern"),
        (
            "pipeline:\n  sinks: [{name: a, type: console}, {name: a, type: parquet, options: {path: /x}}]\n",
            "must be unique",
        ),
        ("pipeline:\n  topics: '.*'\n", "matches the dead-letter topic"),
        ("pipeline:\n  sinks: [{name: a, type: console, topics: 'cdcflow-dead.*'}]\n", "dead letters would be"),
        ("pipeline:\n  sinks: [{name: d, type: delta, options: {max_version: 3}}]\n", "max_version"),
        ("mysql:\n  tls: {mode: verify_ca}\n", "needs mysql.tls.ca_file"),
        ("mysql:\n  tls: {mode: required, ca_file: /nonexistent/ca.pem}\n", "is not a file"),
        ("mysql:\n  tls: {mode: required, cert_file: /etc/hostname}\n", "go together"),
        ("mysql:\n  tls: {mode: sometimes}\n", "mysql.tls.mode"),
        ("mysql:\n  output: {format: cdcflow, serialization: avro}\n", "debezium only"),
        ("mysql:\n  output: {schemas: true}\n", "debezium only"),
        ("mysql:\n  output: {format: debezium, serialization: avro, schemas: true}\n", "schema is in the registry"),
        ("mysql:\n  output: {format: debezium, decimal_handling: exact}\n", "mysql.output.decimal_handling"),
        ("mysql:\n  output: {format: protobuf}\n", "mysql.output.format"),
        ("hbase:\n  output: {serialization: avro}\n", "upsert only"),
        ("hbase:\n  routes: [{table: t, fields: {'d:a': a}}]\n", "fields name the fields of hbase.output.format"),
        ("hbase:\n  output: {format: upsert}\n  peer: {serial: false}\n", "needs hbase.peer.serial"),
        ("hbase:\n  output: {format: upsert}\n  routes: [{table: t, fields: {'d:a': row}}]\n", "route t: column d:a"),
        ("hbase:\n  output: {format: upsert}\n  routes: [{table: t, fields: {'da': x}}]\n", "family:qualifier"),
        ("hbase:\n  output: {format: upsert, read_attempts: 0}\n", "read_attempts"),
    ],
)
def test_bad_config_gets_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml", environ={})


def test_each_malformed_record_is_dead_lettered_by_the_first_sink_that_reads_its_topic(tmp_path: Path) -> None:
    from cdcflow.pipeline.runner import owned_topics

    path = tmp_path / "c.yaml"
    path.write_text(
        "pipeline:\n  topics: 'a\\..*'\n  sinks:\n    - {name: one, type: console}\n"
        "    - {name: two, type: console, topics: 'b\\..*|a\\.x'}\n    - {name: three, type: console}\n"
    )
    cfg = load_config(path, environ={}).pipeline
    patterns = [s.topics or cfg.topics for s in cfg.sinks]
    owned = [owned_topics(p, tuple(patterns[:i])) for i, p in enumerate(patterns)]
    topics = ("a.x", "a.y", "b.y", "c.z", "ab.x", "b")
    writers = {t: [i for i, o in enumerate(owned) if re.fullmatch(o, t)] for t in topics}
    # a topic some sink reads: exactly one writer, the first sink reading it; others: none
    assert writers == {"a.x": [0], "a.y": [0], "b.y": [1], "c.z": [], "ab.x": [], "b": []}


def test_the_pipeline_reads_debezium_topics_only_with_their_types(tmp_path: Path) -> None:
    from cdcflow.cli.wiring import debezium_input

    path = tmp_path / "c.yaml"

    def context(output: str, topics: str = "") -> dict[str, object]:
        path.write_text(f"mysql:\n  output: {output}\nkafka:\n  schema_registry_url: http://r:8081\n"
                        f"pipeline:\n  sinks: [{{name: c, type: console{topics}}}]\n")  # fmt: skip
        return debezium_input(load_config(path, environ={}))

    assert context("{format: cdcflow}") == {}
    assert context("{format: debezium, schemas: true}") == {"debezium_topics": ((r"cdcflow\.mysql\..*", "json"),)}
    assert context("{format: debezium, serialization: avro}") == {
        "debezium_topics": ((r"cdcflow\.mysql\..*", "avro"),), "schema_registry_url": "http://r:8081"}  # fmt: skip
    with pytest.raises(ConfigError, match="without their schemas"):
        context("{format: debezium}")
    with pytest.raises(ConfigError, match="propagate_source_types"):
        context("{format: debezium, schemas: true, propagate_source_types: false}")
    assert context("{format: debezium}", ", topics: 'cdcflow\\.hbase\\..*'") == {}  # HBase topics only
    # Debezium heartbeats are transcoded when a sink reads their topic, with or without the change topics
    beats = "{format: debezium, schemas: true, heartbeat_topic: cdcflow.beats}"
    assert context(beats)["debezium_heartbeat_topics"] == ("cdcflow.beats",)
    assert context(beats, ", topics: 'cdcflow\\.beats'") == {
        "debezium_topics": ((r"cdcflow\.mysql\..*", "json"),),
        "debezium_heartbeat_topics": ("cdcflow.beats",),
    }
    assert "debezium_heartbeat_topics" not in context(beats, ", topics: 'cdcflow\\.mysql\\..*'")
