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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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
            "queue.buffering.max.kbytes": 1024 * 1024,
            # While a broker is down, retry connections at most every 5 s (and log that often).
            "reconnect.backoff.max.ms": 5000,
            "log_level": 3,
            **self.extra,
        }


@dataclass(frozen=True)
class OutRecord:
    topic: str
    key: bytes
    value: bytes


def _new_producer(config: dict[str, object]) -> Producer:
    return Producer(config, logger=logging.getLogger("cdcflow.clients.kafka.librdkafka"))


class AsyncProducer:
    def __init__(self, settings: ProducerSettings, factory: Callable[[dict[str, object]], Any] = _new_producer) -> None:
        self.settings = settings
        self._factory = factory
        self._producer = factory(settings.librdkafka_config())
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll_loop, name="kafka-poll", daemon=True)
        self._poller.start()
        self.fatal: str | None = None
        self.replacements = 0

    def _poll_loop(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

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

    async def send_all(self, records: Sequence[OutRecord]) -> None:
        if self.fatal:
            await asyncio.to_thread(self._replace_fenced)
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        for rec in records:
            fut: asyncio.Future[None] = loop.create_future()
            futures.append(fut)
            callback = self._callback(loop, fut, rec.topic, len(rec.value))
            while True:
                try:
                    self._producer.produce(rec.topic, value=rec.value, key=rec.key, on_delivery=callback)
                    break
                except BufferError:
                    await asyncio.sleep(0.01)  # local queue full: wait for acks to drain it
                except KafkaException as exc:  # refused before sending (larger than message.max.bytes, ...)
                    err: KafkaError = exc.args[0]
                    raise DeliveryFailed(f"Kafka producer refused a record of {len(rec.value)} bytes for "
                                         f"{rec.topic}: {err.str()}", rec.topic, len(rec.value),
                                         err.code() == KafkaError.MSG_SIZE_TOO_LARGE) from exc  # fmt: skip
        if futures:
            await asyncio.gather(*futures)

    def _callback(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None], topic: str, size: int):  # type: ignore[no-untyped-def]
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            if err is None:
                loop.call_soon_threadsafe(_resolve, fut, None)
                return
            if err.fatal():
                self.fatal = f"fatal producer error: {err.str()}"
                exc: Exception = ProducerFenced(self.fatal)
            else:
                too_large = err.code() == KafkaError.MSG_SIZE_TOO_LARGE
                exc = DeliveryFailed(f"delivery of {size} bytes to {topic} failed: {err.str()}", topic, size, too_large)
            loop.call_soon_threadsafe(_resolve, fut, exc)

        return on_delivery

    def close(self, timeout_s: float = 30.0) -> int:
        """Flush and stop; returns how many records were still unacknowledged."""
        remaining: int = self._producer.flush(timeout_s)
        self._stop.set()
        self._poller.join(timeout=5)
        return remaining


def _resolve(fut: asyncio.Future[None], exc: Exception | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(None)
    else:
        fut.set_exception(exc)


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

    def send(self, topic: str, key: bytes | None, value: bytes | None, on_delivery: DeliveryCallback) -> None:
        """Queue one record (value None: a tombstone)."""
        try:
            self._producer.produce(topic, value, key, on_delivery=on_delivery)
        except KafkaException as exc:  # refused before sending (too large, unknown setting): retrying fails again
            raise TerminalError(f"Kafka producer refused a record of {len(value or b'')} bytes for {topic}: "
                                f"{exc.args[0].str() if exc.args else exc}") from exc  # fmt: skip
        except BufferError:
            while True:
                self._producer.poll(0.05)  # local queue full: let acknowledgements drain it
                try:
                    self._producer.produce(topic, value, key, on_delivery=on_delivery)
                    return
                except BufferError:
                    continue

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
