"""The stack's schema registry against Confluent's own Python client (confluent-kafka's SchemaRegistryClient,
AvroSerializer and AvroDeserializer): what Avro producers and consumers call works, refusals carry
Confluent's error codes, and registered schemas survive a restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from cdcflow.dev.stack import Stack
from cdcflow.dev.testing import unique_name

V1 = {"type": "record", "name": "Value", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
V3_BAD = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": "int"}]}


def test_confluents_client_registers_serializes_and_reads_back(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "stack")
    stack.up(["registry"])
    try:
        url = stack.endpoints("registry")["url"]
        client = SchemaRegistryClient({"url": url})
        subject = unique_name("orders") + "-value"
        first = client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
        assert client.register_schema(subject, Schema(json.dumps(V1), "AVRO")) == first  # idempotent
        assert client.test_compatibility(subject, Schema(json.dumps(V2), "AVRO"))
        second = client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
        assert second != first and client.get_versions(subject) == [1, 2]
        with pytest.raises(SchemaRegistryError) as refused:
            client.register_schema(subject, Schema(json.dumps(V3_BAD), "AVRO"))
        assert refused.value.http_status_code == 409 and "qty" in refused.value.error_message
        with pytest.raises(SchemaRegistryError) as missing:
            client.get_latest_version(unique_name("nothing"))
        assert missing.value.error_code == 40401

        context = SerializationContext(subject.removesuffix("-value"), MessageField.VALUE)
        serialized = AvroSerializer(client, json.dumps(V2), conf={"auto.register.schemas": False,
                                                                  "use.latest.version": True})(
            {"id": 7, "note": "x"}, context)  # fmt: skip
        assert serialized[:1] == b"\x00" and int.from_bytes(serialized[1:5], "big") == second
        assert AvroDeserializer(client)(serialized, context) == {"id": 7, "note": "x"}

        stack.down(["registry"])
        stack.up(["registry"])  # a new process: the schemas are read back from its log
        again = SchemaRegistryClient({"url": stack.endpoints("registry")["url"]})
        assert again.get_latest_version(subject).schema_id == second
        assert json.loads(again.get_schema(first).schema_str) == V1
    finally:
        stack.down()


def test_the_captures_registry_client_retries_an_outage_and_stops_on_a_refusal(tmp_path: Path) -> None:
    """What the capture does with the registry's answers: unreachable is retryable (it resumes from its
    checkpoint), a refused schema is terminal and says the registry's reason."""
    from cdcflow.clients.registry import RegistryRefused, SchemaRegistry
    from cdcflow.dev.stack.ports import free_port
    from cdcflow.errors import RetryableError

    with pytest.raises(RetryableError, match="unreachable"):
        SchemaRegistry(f"http://127.0.0.1:{free_port()}", timeout_s=2).register("t-value", V1)
    stack = Stack(tmp_path / "stack")
    stack.up(["registry"])
    try:
        client = SchemaRegistry(stack.endpoints("registry")["url"])
        subject = unique_name("orders") + "-value"
        first = client.register(subject, V1)
        assert client.register(subject, V1) == first and json.loads(client.schema(first)) == V1
        with pytest.raises(RegistryRefused, match=r"HTTP 409.*qty"):
            client.register(subject, V3_BAD)
    finally:
        stack.down()
