"""An idempotent Kafka producer for asyncio: `send_all` resolves only when Kafka acknowledged every record.

librdkafka delivers acknowledgements from `poll()`; a background thread polls and hands each
result to the event loop. Any failed record fails the whole `send_all`, so the caller (the
replication peer) answers HBase with an error and HBase resends: nothing is ever reported as
delivered that Kafka did not acknowledge.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from cdcflow.errors import RetryableError, TerminalError

log = logging.getLogger(__name__)


class DeliveryFailed(RetryableError):
    """Kafka did not acknowledge a record (broker down, timeout, ...)."""

    def __init__(self, message: str, topic: str = "", size: int = 0, too_large: bool = False) -> None:
        super().__init__(message)
        self.topic = topic
        self.size = size
        self.too_large = too_large  # MSG_SIZE_TOO_LARGE: sending it again as it is fails again


class ProducerFenced(TerminalError):
    """The idempotent producer hit a fatal error; the call fails and the next one gets a new producer."""


@dataclass(frozen=True)
class ProducerSettings:
    bootstrap_servers: str
    compression: str = "lz4"  # none | gzip | snappy | lz4 | zstd
    linger_ms: int = 5
    # A record that Kafka has not acknowledged by then fails; HBase then resends the call.
    delivery_timeout_ms: int = 60_000
    max_message_bytes: int = 16 * 1024 * 1024
    # A batch of records to one partition is checked against the topic's max.message.bytes as a whole: kept
    # at most the smallest record limit of the topics written, so records that fit one by one fit together.
    batch_bytes: int = 1_000_000
    # Passed to librdkafka as they are: security.protocol, sasl.*, ssl.*, client.id, ...
    extra: dict[str, str] = field(default_factory=dict)

    def librdkafka_config(self) -> dict[str, object]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": self.compression,
            "linger.ms": self.linger_ms,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "message.max.bytes": self.max_message_bytes,
            "batch.size": self.batch_bytes,
            "queue.buffering.max.kbytes": 1024 * 1024,
            # While a broker is down, retry connections at most every 5 s (and log that often).
            "reconnect.backoff.max.ms": 5000,
            "log_level": 3,
            **self.extra,
        }


class OutRecord(NamedTuple):
    """One record to send (a named tuple: the capture makes one per row)."""

    topic: str
    key: bytes | None
    value: bytes | None  # None: a tombstone (the upsert form's deleted row)
    partition: int = -1  # -1: the partitioner's choice by key


def _new_producer(config: dict[str, object]) -> Producer:
    return Producer(config, logger=logging.getLogger("cdcflow.clients.kafka.librdkafka"))


class BrokerCheck:
    """Whether a producer's brokers answer (a metadata request), for readiness probes: asked at most every
    `every_s`, so a probe polled often costs one request per period, and never longer than `timeout_s`."""

    def __init__(self, producer: Callable[[], Any], every_s: float = 5.0, timeout_s: float = 2.0) -> None:
        self._producer, self._every_s, self._timeout_s = producer, every_s, timeout_s
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._problem: str | None = None

    def problem(self) -> str | None:
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= self._every_s:
                self._checked = now
                try:
                    self._producer().list_topics(timeout=self._timeout_s)
                    self._problem = None
                except Exception as exc:  # KafkaException, or anything a broken handle raises
                    reason = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
                    within = f"within {self._timeout_s:.0f} s"
                    self._problem = f"Kafka does not answer a metadata request {within} ({reason})"
            return self._problem


class AsyncProducer:
    def __init__(self, settings: ProducerSettings, factory: Callable[[dict[str, object]], Any] = _new_producer) -> None:
        self.settings = settings
        self._factory = factory
        self._producer = factory(settings.librdkafka_config())
        self._stop = threading.Event()
        self.poll_errors = 0
        self._poller = self._start_poller()
        self.fatal: str | None = None
        self.replacements = 0
        self.purges = 0
        # One replacement or purge at a time: two calls seeing the same fatal error must not each swap
        # in a producer (the first one's callbacks would never be polled again).
        self._replacing: asyncio.Lock | None = None
        self.brokers = BrokerCheck(lambda: self._producer)  # readiness: asks the producer in use now

    def _start_poller(self) -> threading.Thread:
        poller = threading.Thread(target=self._poll_loop, name="kafka-poll", daemon=True)
        poller.start()
        return poller

    def _poll_loop(self) -> None:
        # Acknowledgements arrive only through poll(): if this thread died, every later call would time out.
        while not self._stop.is_set():
            try:
                self._producer.poll(0.05)
            except Exception:  # a callback or librdkafka error must not end the polling
                self.poll_errors += 1
                if self.poll_errors <= 3 or self.poll_errors % 1000 == 0:
                    log.exception("Kafka producer poll failed (%d so far); polling goes on", self.poll_errors)
                time.sleep(0.05)

    def _lock(self) -> asyncio.Lock:
        if self._replacing is None:
            self._replacing = asyncio.Lock()
        return self._replacing

    def _replace_fenced(self) -> None:
        """A fatal error fences an idempotent producer for good: fail what it still holds (those
        calls are answered with errors and HBase resends them), then continue with a new one."""
        old = self._producer
        log.warning("replacing the Kafka producer after: %s", self.fatal)
        old.purge(in_queue=True, in_flight=True)
        old.flush(5.0)  # delivers the purge errors to their callbacks
        self._producer = self._factory(self.settings.librdkafka_config())
        self.fatal = None
        self.replacements += 1

    async def purge_unacknowledged(self) -> None:
        """Fail every record not yet acknowledged, now, and return once their callbacks ran.

        For a call about to be answered with an error while its records still wait in librdkafka: left
        there, they could reach Kafka after HBase resent the call to another instance and that instance
        delivered newer changes of the same rows. Purged, they never do. Other calls' records fail too
        (HBase resends them: duplicates, never loss, never a stale copy after newer data)."""
        async with self._lock():
            await asyncio.to_thread(self._purge)

    def _purge(self) -> None:
        self.purges += 1
        self._producer.purge(in_queue=True, in_flight=True)
        left: int = self._producer.flush(5.0)  # runs the purge callbacks
        if left:
            log.warning("%d records still unresolved 5 s after a purge", left)

    async def send_all(self, records: Sequence[OutRecord], *, locate: bool = False) -> list[tuple[int, int]]:
        """Send `records` and wait until every one is acknowledged (raising the first failure). With
        `locate`, return where Kafka stored them: (partition, offset) of each, in offset order."""
        if self.fatal:
            async with self._lock():
                if self.fatal:  # not already replaced by the call that held the lock
                    await asyncio.to_thread(self._replace_fenced)
        if not self._poller.is_alive() and not self._stop.is_set():
            log.error("the Kafka poll thread had stopped; starting it again")
            self._poller = self._start_poller()
        if not records:
            return []
        acks = _Acknowledgements(self, asyncio.get_running_loop(), len(records), locate)
        on_delivery = acks.on_delivery
        produce = self._producer.produce
        refused: DeliveryFailed | None = None
        for i, rec in enumerate(records):
            while True:
                try:
                    # Positional (topic, value, key, partition -1 = the partitioner's, callback): no keyword
                    # dict per record (0.3 µs of the 2 µs a record costs here).
                    produce(rec.topic, rec.value, rec.key, rec.partition, on_delivery)
                    break
                except BufferError:
                    await asyncio.sleep(0.01)  # local queue full: wait for acks to drain it
                    produce = self._producer.produce
                except KafkaException as exc:  # refused before sending (larger than message.max.bytes, ...)
                    err: KafkaError = exc.args[0]
                    refused = DeliveryFailed(f"Kafka producer refused a record of {len(rec.value or b'')} bytes "
                                             f"for {rec.topic}: {err.str()}", rec.topic, len(rec.value or b""),
                                             err.code() == KafkaError.MSG_SIZE_TOO_LARGE)  # fmt: skip
                    break
            if refused is not None:
                acks.never_sent(len(records) - i)
                break
        # Wait for every record, not just the first failure: a call must not be answered while some of
        # its records may still reach Kafka (after HBase resent the call elsewhere, they would land late).
        await acks.all_resolved
        if refused is not None:
            raise refused
        if acks.error is not None:
            raise acks.error
        return sorted(acks.located or ())

    def close(self, timeout_s: float = 30.0) -> int:
        """Flush and stop; returns how many records were still unacknowledged."""
        remaining: int = self._producer.flush(timeout_s)
        self._stop.set()
        self._poller.join(timeout=5)
        return remaining


class _Acknowledgements:
    """The outcome of one `send_all`: counts its records down as librdkafka reports them, keeps the
    first error, and wakes the event loop once, when the last is resolved. One shared bound method
    as the delivery callback and one wake-up per call: a future, a closure and a cross-thread
    wake-up per record cost more than the record's own produce."""

    __slots__ = ("_lock", "_loop", "_owner", "_pending", "all_resolved", "error", "located")

    def __init__(self, owner: AsyncProducer, loop: asyncio.AbstractEventLoop, count: int, locate: bool = False) -> None:
        self._owner = owner
        self._loop = loop
        self._pending = count
        # Callbacks run on the poll thread, and on a purge's flush thread too: the count needs a lock.
        self._lock = threading.Lock()
        self.error: Exception | None = None
        self.all_resolved: asyncio.Future[None] = loop.create_future()
        self.located: list[tuple[int, int]] | None = [] if locate else None

    def on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failed(err, msg)
        with self._lock:
            if self.located is not None and err is None:
                self.located.append((msg.partition() or 0, msg.offset() or 0))
            self._pending -= 1
            last = self._pending == 0
        if last:
            self._loop.call_soon_threadsafe(_resolve, self.all_resolved)

    def never_sent(self, count: int) -> None:
        """`count` records were not handed to librdkafka (no callback will come for them)."""
        with self._lock:
            self._pending -= count
            last = self._pending == 0
        if last:
            _resolve(self.all_resolved)

    def _failed(self, err: KafkaError, msg: Message) -> None:
        topic, size = (msg.topic() or "", len(msg.value() or b"")) if msg is not None else ("", 0)
        exc: Exception
        if err.fatal():
            self._owner.fatal = f"fatal producer error: {err.str()}"
            exc = ProducerFenced(self._owner.fatal)
        else:
            too_large = err.code() == KafkaError.MSG_SIZE_TOO_LARGE
            exc = DeliveryFailed(f"delivery of {size} bytes to {topic} failed: {err.str()}", topic, size, too_large)
        with self._lock:
            if self.error is None:
                self.error = exc


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


# librdkafka's own callback shape (error or None, message), called with no wrapper in between: at
# tens of thousands of records per second every extra Python call per acknowledgement counts.
DeliveryCallback = Callable[[Any, Any], None]


def delivery_error(err: Any) -> str | None:
    """The text of a delivery callback's error argument (None: acknowledged)."""
    if err is None:
        return None
    return f"{err.str()}{' (fatal)' if err.fatal() else ''}"


class SyncProducer:
    """An idempotent producer for a single-threaded loop: `send` queues, `poll` runs the callbacks.

    Callbacks run on the caller's thread inside `poll`/`flush`, so the caller's bookkeeping (which
    transaction is fully acknowledged) needs no locks. A full local queue is waited out in `send`.
    """

    def __init__(self, settings: ProducerSettings, factory: Callable[[dict[str, object]], Any] = _new_producer) -> None:
        self.settings = settings
        self._factory = factory
        self._producer = factory(settings.librdkafka_config())
        self.brokers = BrokerCheck(lambda: self._producer)  # readiness: asks the producer in use now

    def send(self, topic: str, key: bytes | None, value: bytes | None, on_delivery: DeliveryCallback,
             partition: int = -1) -> None:  # fmt: skip
        """Queue one record (value None: a tombstone) to `partition` (-1: the partitioner's choice by key)."""
        where = {"partition": partition} if partition >= 0 else {}
        try:
            self._producer.produce(topic, value, key, on_delivery=on_delivery, **where)
        except KafkaException as exc:  # refused before sending (too large, unknown setting): retrying fails again
            raise TerminalError(f"Kafka producer refused a record of {len(value or b'')} bytes for {topic}: "
                                f"{exc.args[0].str() if exc.args else exc}") from exc  # fmt: skip
        except BufferError:
            while True:
                self._producer.poll(0.05)  # local queue full: let acknowledgements drain it
                try:
                    self._producer.produce(topic, value, key, on_delivery=on_delivery, **where)
                    return
                except BufferError:
                    continue

    def send_located(self, topic: str, key: bytes, values: Sequence[bytes], timeout_s: float = 60.0) -> list[
            tuple[int, int]]:  # fmt: skip
        """Send `values` under one key and wait for their acknowledgements (and those of everything queued
        before them): (partition, offset) of each, in offset order. Raises DeliveryFailed (retryable) unless
        Kafka acknowledged every one."""
        located: list[tuple[int, int]] = []
        failed: list[str] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                failed.append(err.str())
            else:
                located.append((msg.partition() or 0, msg.offset() or 0))

        for value in values:
            self.send(topic, key, value, on_delivery)
        left = self.flush(timeout_s)
        if failed or left or len(located) != len(values):
            raise DeliveryFailed(f"{len(values)} records to {topic}: {len(located)} acknowledged, {left} "
                                 f"still queued after {timeout_s:.0f} s, errors: {failed[:3]}", topic)  # fmt: skip
        return sorted(located)

    def poll(self, timeout_s: float = 0.0) -> None:
        self._producer.poll(timeout_s)

    def pending(self) -> int:
        """Records queued or in flight, not yet acknowledged."""
        return len(self._producer)

    def flush(self, timeout_s: float) -> int:
        remaining: int = self._producer.flush(timeout_s)
        return remaining

    def reset(self) -> None:
        """Drop everything not yet acknowledged (their callbacks report failure) and start a new producer.
        Used before resuming from the last checkpoint, which re-sends whatever was dropped."""
        old = self._producer
        old.purge(in_queue=True, in_flight=True)
        old.flush(5.0)
        self._producer = self._factory(self.settings.librdkafka_config())
