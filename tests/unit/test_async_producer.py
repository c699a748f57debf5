"""AsyncProducer's error handling, with an in-memory double of the librdkafka producer (a port)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from cdcflow.clients.kafka.producer import AsyncProducer, DeliveryFailed, OutRecord, ProducerFenced, ProducerSettings


class FakeMessage:
    """What librdkafka hands a delivery callback: the record's topic and value."""

    def __init__(self, topic: str, value: bytes, offset: int = 0) -> None:
        self._topic, self._value, self._offset = topic, value, offset

    def topic(self) -> str:
        return self._topic

    def value(self) -> bytes:
        return self._value

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return self._offset


class FakeProducer:
    """Acknowledges every record on poll, unless told to fail the next ones."""

    def __init__(self, fail_with: KafkaError | None = None) -> None:
        self.fail_with = fail_with
        self.pending: list[tuple[Callable[[KafkaError | None, Any], None], FakeMessage]] = []
        self.sent: list[bytes] = []
        self.purged = False

    def produce(
        self, topic: str, value: bytes, key: bytes, partition: int = -1, on_delivery: Callable[..., None] | None = None
    ) -> None:  # confluent-kafka's order
        assert on_delivery is not None
        self.sent.append(value)
        self.pending.append((on_delivery, FakeMessage(topic, value, 100 + len(self.sent))))

    def poll(self, timeout: float) -> int:
        callbacks, self.pending = self.pending, []
        for cb, msg in callbacks:
            cb(self.fail_with, msg)
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


def test_a_call_fails_only_after_all_its_records_are_resolved() -> None:
    """The first failure must not answer the call while its other records are still queued."""

    class Staggered(FakeProducer):
        """Fails the first record at once; acknowledges the others only when released."""

        def __init__(self) -> None:
            super().__init__()
            self.release = False
            self.calls = 0

        def poll(self, timeout: float) -> int:
            if not self.pending:
                return 0
            if self.calls == 0:
                self.calls += 1
                (first, msg), self.pending = self.pending[0], self.pending[1:]
                first(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), msg)
                return 1
            return super().poll(timeout) if self.release else 0

    fake = Staggered()
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _c: fake)

    async def scenario() -> None:
        call = asyncio.create_task(producer.send_all([OutRecord("t", b"k", b"%d" % i) for i in range(3)]))
        await asyncio.sleep(0.3)
        assert not call.done(), "answered while two records were still queued"
        fake.release = True
        with pytest.raises(DeliveryFailed):
            await asyncio.wait_for(call, 2)

    try:
        asyncio.run(scenario())
    finally:
        producer.close(timeout_s=1)


def test_concurrent_calls_replace_a_fenced_producer_once() -> None:
    made: list[FakeProducer] = []

    def factory(_config: dict[str, object]) -> FakeProducer:
        made.append(FakeProducer())
        return made[-1]

    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=factory)

    async def scenario() -> None:
        producer.fatal = "fatal producer error: fenced"
        await asyncio.gather(*(producer.send_all([OutRecord("t", b"k", b"v%d" % i)]) for i in range(5)))

    try:
        asyncio.run(scenario())
        assert len(made) == 2 and producer.replacements == 1
        assert sorted(made[1].sent) == [b"v%d" % i for i in range(5)]
    finally:
        producer.close(timeout_s=1)


def test_the_poll_thread_survives_errors() -> None:
    class Flaky(FakeProducer):
        def __init__(self) -> None:
            super().__init__()
            self.failures = 3

        def poll(self, timeout: float) -> int:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("poll broke")
            return super().poll(timeout)

    fake = Flaky()
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _c: fake)
    try:
        asyncio.run(asyncio.wait_for(producer.send_all([OutRecord("t", b"k", b"v")]), 5))
        assert producer.poll_errors == 3
    finally:
        producer.close(timeout_s=1)


def test_purge_fails_what_is_unacknowledged() -> None:
    class Holding(FakeProducer):
        """Never acknowledges by itself; a purge fails everything it holds."""

        def poll(self, timeout: float) -> int:
            return 0

        def purge(self, in_queue: bool, in_flight: bool) -> None:
            self.purged = True
            callbacks, self.pending = self.pending, []
            for cb, msg in callbacks:
                cb(KafkaError(KafkaError._PURGE_QUEUE, "purged"), msg)

    fake = Holding()
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _c: fake)

    async def scenario() -> None:
        call = asyncio.create_task(producer.send_all([OutRecord("t", b"k", b"v1"), OutRecord("t", b"k", b"v2")]))
        await asyncio.sleep(0.1)
        await producer.purge_unacknowledged()
        with pytest.raises(DeliveryFailed, match="purged"):
            await asyncio.wait_for(call, 2)

    try:
        asyncio.run(scenario())
        assert fake.purged and producer.purges == 1
    finally:
        producer.close(timeout_s=1)


def test_a_record_refused_before_sending_fails_the_call_only_after_the_ones_sent_are_resolved() -> None:
    """librdkafka refuses a record at produce() (too large): the records of the call already handed over
    may still reach Kafka, so the call is answered only once they are resolved."""

    class RefusesBig(FakeProducer):
        def __init__(self) -> None:
            super().__init__()
            self.release = False

        def produce(
            self,
            topic: str,
            value: bytes,
            key: bytes,
            partition: int = -1,
            on_delivery: Callable[..., None] | None = None,
        ) -> None:
            if value == b"big":
                raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))
            super().produce(topic, value, key, partition, on_delivery)

        def poll(self, timeout: float) -> int:
            return super().poll(timeout) if self.release else 0

    fake = RefusesBig()
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _c: fake)

    async def scenario() -> None:
        records = [OutRecord("t", b"k", b"v1"), OutRecord("big-topic", b"k", b"big"), OutRecord("t", b"k", b"v3")]
        call = asyncio.create_task(producer.send_all(records))
        await asyncio.sleep(0.3)
        assert not call.done(), "answered while a record it had handed over was still queued"
        fake.release = True
        with pytest.raises(DeliveryFailed) as refused:
            await asyncio.wait_for(call, 2)
        assert refused.value.too_large and refused.value.topic == "big-topic" and refused.value.size == 3

    try:
        asyncio.run(scenario())
        assert fake.sent == [b"v1"], "nothing after the refused record is sent"
    finally:
        producer.close(timeout_s=1)


def test_a_delivery_error_names_the_topic_and_size_of_the_record() -> None:
    too_large = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large")
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _c: FakeProducer(too_large))
    try:
        with pytest.raises(DeliveryFailed) as failed:
            asyncio.run(asyncio.wait_for(producer.send_all([OutRecord("events", b"k", b"12345")]), 5))
        assert (failed.value.topic, failed.value.size, failed.value.too_large) == ("events", 5, True)
    finally:
        producer.close(timeout_s=1)


def test_send_all_locates_the_records_it_sent_when_asked() -> None:
    """Oversize parts: the marker made after them names their partition and offsets."""
    fake = FakeProducer()
    producer = AsyncProducer(ProducerSettings("unused:9092"), factory=lambda _config: fake)
    try:
        parts = [OutRecord("parts", b"id", b"p%d" % i) for i in range(3)]
        assert asyncio.run(producer.send_all(parts, locate=True)) == [(3, 101), (3, 102), (3, 103)]
        assert asyncio.run(producer.send_all([OutRecord("t", b"k", b"v")])) == []
    finally:
        producer.close()
