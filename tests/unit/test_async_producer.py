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
                first, self.pending = self.pending[0], self.pending[1:]
                first(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), None)
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
            for cb in callbacks:
                cb(KafkaError(KafkaError._PURGE_QUEUE, "purged"), None)

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
