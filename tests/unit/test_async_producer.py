"""AsyncProducer's error handling, with an in-memory double of the librdkafka producer (a port)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError

from cdcflow.clients.kafka.producer import AsyncProducer, DeliveryFailed, OutRecord, ProducerFenced, ProducerSettings


class FakeProducer:
    """Acknowledges every record on poll, unless told to fail the next ones."""

    def __init__(self, fail_with: KafkaError | None = None) -> None:
        self.fail_with = fail_with
        self.pending: list[Callable[[KafkaError | None, Any], None]] = []
        self.sent: list[bytes] = []
        self.purged = False

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery: Callable[..., None]) -> None:
        self.sent.append(value)
        self.pending.append(on_delivery)

    def poll(self, timeout: float) -> int:
        callbacks, self.pending = self.pending, []
        for cb in callbacks:
            cb(self.fail_with, None)
        return len(callbacks)

    def purge(self, in_queue: bool, in_flight: bool) -> None:
        self.purged = True

    def flush(self, timeout: float) -> int:
        self.poll(0)
        return 0


def test_a_fatal_error_fails_the_call_and_the_next_call_gets_a_new_producer() -> None:
    made: list[FakeProducer] = []

    def factory(_config: dict[str, object]) -> FakeProducer:
        fatal = KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True) if not made else None
        made.append(FakeProducer(fatal))
        return made[-1]

    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=factory)
    try:
        with pytest.raises(ProducerFenced):
            asyncio.run(producer.send_all([OutRecord("t", b"k", b"v1")]))
        asyncio.run(producer.send_all([OutRecord("t", b"k", b"v2")]))  # no longer fenced
        assert len(made) == 2 and made[0].purged and made[1].sent == [b"v2"]
        assert producer.replacements == 1 and producer.fatal is None
    finally:
        producer.close(timeout_s=1)


def test_a_retriable_delivery_error_fails_the_call_without_replacing_the_producer() -> None:
    made: list[FakeProducer] = []

    def factory(_config: dict[str, object]) -> FakeProducer:
        made.append(FakeProducer(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out")))
        return made[-1]

    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=factory)
    try:
        with pytest.raises(DeliveryFailed):
            asyncio.run(producer.send_all([OutRecord("t", b"k", b"v")]))
        assert len(made) == 1 and producer.fatal is None
    finally:
        producer.close(timeout_s=1)
