"""Produce and consume against the real Kafka broker of the stack."""

from __future__ import annotations

from typing import Any

from cdcflow.clients import kafka as k
from cdcflow.dev.testing import unique_name


def test_produce_then_consume_roundtrip(kafka: dict[str, Any]) -> None:
    bootstrap = kafka["bootstrap_servers"]
    topic = unique_name("it_roundtrip")
    k.create_topic(bootstrap, topic, partitions=3)
    records = [(f"key-{i % 5}".encode(), f"value-{i}".encode()) for i in range(50)]
    acks = k.produce_sync(bootstrap, topic, records)
    assert len(acks) == 50

    got = k.consume(bootstrap, topic, expected=50, timeout_s=60)

    assert sorted((r.key, r.value) for r in got) == sorted(records)
    # Same key, same partition: the property per-row ordering relies on.
    partitions_by_key: dict[bytes | None, set[int]] = {}
    for r in got:
        partitions_by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in partitions_by_key.values())
    # Within a partition, offsets follow production order.
    for partition in {r.partition for r in got}:
        values = [r.value for r in sorted(got, key=lambda r: r.offset) if r.partition == partition]
        assert values == [v for (key, v), (p, _) in zip(records, acks, strict=True) if p == partition]


def test_create_topic_is_idempotent(kafka: dict[str, Any]) -> None:
    topic = unique_name("it_idem")
    k.create_topic(kafka["bootstrap_servers"], topic)
    k.create_topic(kafka["bootstrap_servers"], topic)
    assert topic in k.list_topics(kafka["bootstrap_servers"])


def test_a_created_topic_is_served_by_every_partition_at_once(kafka: dict[str, Any]) -> None:
    """A broker lists a new topic a moment before it opens the topic's partitions; records produced in that
    moment by an idempotent producer can be refused as out of order until their delivery timeout. Right after
    create_topic returns, every partition's leader answers for it (a ListOffsets request, asked once)."""
    bootstrap = kafka["bootstrap_servers"]
    for _ in range(5):
        topic = unique_name("it_served")
        k.create_topic(bootstrap, topic, partitions=8)
        assert k.end_offsets(bootstrap, topic) == dict.fromkeys(range(8), 0)
