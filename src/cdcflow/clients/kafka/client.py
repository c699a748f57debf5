"""Thin, typed wrappers over confluent-kafka (librdkafka). The only place that imports it."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import ConfigResource
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic

from cdcflow.errors import CdcflowError, RetryableError, ServiceUnavailable, TerminalError


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


# Settings of `kafka.properties` that every client needs, not only producers: how to reach and
# authenticate to the brokers. (Producer tuning such as linger.ms would only draw warnings elsewhere.)
CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.", "ssl_", "enable.ssl", "client.", "socket.", "broker.",
                       "metadata.", "api.version", "enable.sasl")  # fmt: skip


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where Kafka is and how to talk to it (SASL, TLS, ...): every client cdcflow opens gets the same
    connection settings. A plain "host:port" string is accepted wherever this is."""

    bootstrap_servers: str
    properties: tuple[tuple[str, str], ...] = ()  # librdkafka settings, as in the config's kafka.properties

    @classmethod
    def of(cls, bootstrap_servers: str, properties: Mapping[str, str] | None = None) -> KafkaEndpoint:
        return cls(bootstrap_servers, tuple(sorted((properties or {}).items())))

    def __str__(self) -> str:
        return self.bootstrap_servers

    def connection_properties(self) -> dict[str, str]:
        return {k: v for k, v in self.properties if k.startswith(CONNECTION_PREFIXES)}


KafkaTarget = str | KafkaEndpoint


ClientSettings = dict[str, str | int | float | bool]
T = TypeVar("T")


def client_config(target: KafkaTarget, settings: ClientSettings | None = None) -> ClientSettings:
    """A librdkafka configuration for a consumer or admin client of `target`."""
    endpoint = target if isinstance(target, KafkaEndpoint) else KafkaEndpoint(target)
    return {**(settings or {}), "bootstrap.servers": endpoint.bootstrap_servers, **endpoint.connection_properties()}


def _admin(bootstrap: KafkaTarget) -> AdminClient:
    # log_level 0: while a broker starts, librdkafka would print every refused connection to
    # stderr; the caller gets the failure as an exception instead.
    return AdminClient(client_config(bootstrap, {"socket.connection.setup.timeout.ms": 5000, "log_level": 0}))


def ping(bootstrap: KafkaTarget, timeout_s: float = 5.0) -> int:
    """A real metadata request; returns the number of brokers that answered."""
    try:
        meta = _admin(bootstrap).list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ServiceUnavailable(f"Kafka at {bootstrap}: {exc}") from exc
    if not meta.brokers:
        raise ServiceUnavailable(f"Kafka at {bootstrap}: no broker in metadata")
    return len(meta.brokers)


def list_topics(bootstrap: KafkaTarget, timeout_s: float = 10.0) -> list[str]:
    try:
        return sorted(_admin(bootstrap).list_topics(timeout=timeout_s).topics)
    except KafkaException as exc:
        raise ServiceUnavailable(f"Kafka at {bootstrap}: {exc}") from exc


_ANSWER_MARGIN_S = 5.0

# Answers of a Kafka that is away or busy. librdkafka flags none of its local ones retriable, and an admin
# request that found no controller ends in _TIMED_OUT ("Failed while waiting for controller"): a capture that
# meets a new table during an outage must wait for Kafka, not stop.
_AWAY = frozenset({KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN,
                   KafkaError._RESOLVE, KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_CONTROLLER,
                   KafkaError.BROKER_NOT_AVAILABLE, KafkaError.LEADER_NOT_AVAILABLE})  # fmt: skip


def admin_error(what: str, err: KafkaError) -> CdcflowError:
    """An admin request's failure as retryable (Kafka away or busy) or terminal (refused: authorization,
    invalid settings)."""
    cls = RetryableError if err.retriable() or err.code() in _AWAY else TerminalError
    return cls(f"{what}: {err.str()}")


def create_topic(
    bootstrap: KafkaTarget, name: str, partitions: int = 1, replication: int = -1, timeout_s: float = 30.0,
    config: dict[str, str] | None = None,
) -> None:  # fmt: skip
    """Create `name` (with topic-level `config`); an existing topic is fine (idempotent). `replication` -1: the
    cluster's own default.replication.factor (3 on a production cluster, not 1). Returns once every
    partition's leader serves it (`wait_until_served`), so records produced next cannot meet a partition that
    its broker has not opened yet."""
    admin = _admin(bootstrap)  # must outlive the future: a collected client cancels its requests
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {})
    futures = admin.create_topics([topic], request_timeout=timeout_s)
    try:
        # (a margin over the request's own timeout: librdkafka's answer says more than ours)
        futures[name].result(timeout=timeout_s + _ANSWER_MARGIN_S)
    except concurrent.futures.TimeoutError as exc:  # Kafka unreachable: the caller retries later
        raise ServiceUnavailable(f"create topic {name}: no answer from Kafka in {timeout_s:.0f} s") from exc
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise admin_error(f"create topic {name}", err) from exc
    wait_until_served(admin, name, timeout_s)


# Answers that waiting does not change (anything else, NOT_LEADER_OR_FOLLOWER above all, is a partition
# still opening).
_REFUSED = frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                      KafkaError.SASL_AUTHENTICATION_FAILED, KafkaError._AUTHENTICATION})  # fmt: skip


def wait_until_served(admin: AdminClient, topic: str, timeout_s: float = 30.0) -> int:
    """Wait until the leader of every partition of `topic` answers a ListOffsets request for it; returns how
    many partitions it has.

    Why: a broker lists a new topic in its metadata a moment before it opens the topic's partitions. An
    idempotent producer that sends two requests to a partition in that moment can see the first refused
    (NOT_LEADER_OR_FOLLOWER) and the second written, as the broker has no sequence state for the producer
    yet; the first one's records are then refused as out of order until their delivery timeout (Apache
    Kafka's KAFKA-15591). A partition that answers ListOffsets is open on its leader."""
    deadline = time.monotonic() + timeout_s
    last: object = "topic not in metadata"
    while True:
        try:
            meta = admin.list_topics(topic=topic, timeout=max(1.0, min(10.0, deadline - time.monotonic())))
            found = meta.topics.get(topic)
            if found is not None and found.error is None and found.partitions:
                wanted = {TopicPartition(topic, p): OffsetSpec.latest() for p in found.partitions}  # type: ignore[no-untyped-call]
                answers = admin.list_offsets(wanted, request_timeout=max(1.0, min(10.0, deadline - time.monotonic())))
                for future in answers.values():
                    future.result()
                return len(found.partitions)
            last = found.error if found is not None else "topic not in metadata"
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is not None and err.code() in _REFUSED:
                raise TerminalError(f"topic {topic}: {err.str()}") from exc
            last = err.str() if err is not None else exc
        if time.monotonic() >= deadline:
            raise ServiceUnavailable(f"topic {topic}: its partitions are not served after {timeout_s:.0f} s ({last})")
        time.sleep(0.05)


def produce_sync(
    bootstrap: KafkaTarget, topic: str, records: list[tuple[bytes | None, bytes | None]], timeout_s: float = 30.0
) -> list[tuple[int, int]]:
    """Produce with acks=all and idempotence; return (partition, offset) per record once all are acknowledged.
    A None value is a tombstone (deletes its key from a compacted topic).

    Any delivery failure raises: nothing is reported as sent unless Kafka acknowledged it.
    """
    producer = Producer(client_config(bootstrap, {"enable.idempotence": True, "acks": "all"}))
    results: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[str] = []

    def on_delivery(index: int) -> Callable[[KafkaError | None, Message], None]:
        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"record {index}: {err.str()}")
            else:
                results[index] = (msg.partition() or 0, msg.offset() or 0)

        return cb

    for i, (key, value) in enumerate(records):
        producer.produce(topic, value=value, key=key, on_delivery=on_delivery(i))
    remaining = producer.flush(timeout_s)
    if remaining or errors or any(r is None for r in results):
        raise ServiceUnavailable(f"produce to {topic}: {remaining} unacknowledged, errors: {errors[:5]}")
    return [r for r in results if r is not None]


def consume(
    bootstrap: KafkaTarget, topic: str, *, expected: int, timeout_s: float = 30.0, group: str | None = None
) -> list[KafkaRecord]:
    """Read `topic` from the beginning until `expected` records arrived or `timeout_s` passed."""
    consumer = Consumer(
        client_config(
            bootstrap,
            {
                "group.id": group or f"cdcflow-read-{time.time_ns()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    out: list[KafkaRecord] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    continue  # end of partition, or a topic its producer has not created yet
                raise ServiceUnavailable(f"consume {topic}: {err.str()}")
            out.append(KafkaRecord(topic, msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def partition_replicas(bootstrap: KafkaTarget, topic: str, timeout_s: float = 10.0) -> dict[int, tuple[int, list[int]]]:
    """partition -> (its leader's node id, -1 when none; the node ids of its replicas), from the metadata."""
    try:
        meta = _admin(bootstrap).list_topics(topic=topic, timeout=timeout_s).topics[topic]
    except (KafkaException, KeyError) as exc:
        raise ServiceUnavailable(f"Kafka at {bootstrap}: no metadata for {topic}: {exc}") from exc
    return {p: (int(m.leader), [int(r) for r in m.replicas]) for p, m in sorted(meta.partitions.items())}


def elect_preferred_leaders(bootstrap: KafkaTarget, topic: str, timeout_s: float = 30.0) -> None:
    """Kafka's preferred-leader election for every partition of `topic` (a partition already led by its
    preferred replica is fine)."""
    admin = _admin(bootstrap)
    partitions = [TopicPartition(topic, p) for p in partition_replicas(bootstrap, topic)]
    # (no request_timeout: confluent-kafka 2.16's elect_leaders fails to parse its timeout arguments, SystemError)
    future = admin.elect_leaders(ElectionType.PREFERRED, partitions)
    try:
        results = future.result(timeout=timeout_s)
    except KafkaException as exc:
        raise ServiceUnavailable(f"leader election for {topic}: {exc}") from exc
    for tp, failed in results.items():
        error: KafkaError | None = failed.args[0] if failed is not None else None
        if error is not None and error.code() != KafkaError.ELECTION_NOT_NEEDED:
            raise ServiceUnavailable(f"leader election for {tp.topic}[{tp.partition}]: {error.str()}")


def partition_count(bootstrap: KafkaTarget, topic: str, timeout_s: float = 30.0) -> int:
    """How many partitions `topic` has, from the cluster's metadata (asked again until a topic created a moment
    ago shows them, or `timeout_s` passed: ServiceUnavailable)."""
    deadline = time.monotonic() + timeout_s
    last: object = "no metadata"
    while True:
        try:
            meta = _admin(bootstrap).list_topics(topic=topic, timeout=min(10.0, timeout_s)).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                return len(meta.partitions)
            last = meta.error if meta is not None else "topic not in metadata"
        except KafkaException as exc:
            last = exc
        if time.monotonic() > deadline:
            raise ServiceUnavailable(f"Kafka at {bootstrap}: the partitions of {topic} are not known ({last})")
        time.sleep(0.2)


def end_offsets(bootstrap: KafkaTarget, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """Partition → high watermark (the offset the next record will get); {} if the topic is absent. A
    partition whose leader is still opening it (a topic created a moment ago) is asked again until
    `timeout_s` passed (then ServiceUnavailable)."""
    consumer = Consumer(client_config(bootstrap, {"group.id": f"cdcflow-offsets-{time.time_ns()}"}))
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        deadline = time.monotonic() + timeout_s

        def high_watermark(partition: int) -> int:
            tp = TopicPartition(topic, partition)
            return retry_while_opening(lambda: consumer.get_watermark_offsets(tp, timeout=timeout_s)[1],
                                       f"{topic}[{partition}]", deadline)  # fmt: skip

        return {p: high_watermark(p) for p in meta.partitions}
    finally:
        consumer.close()


def retry_while_opening(call: Callable[[], T], what: str, deadline: float, pause_s: float = 0.05) -> T:
    """`call()`, asked again while Kafka answers that the partition is not served yet (NOT_LEADER_OR_FOLLOWER
    from a broker that lists a new topic before it opens its partitions, or any other answer but a refusal),
    until `deadline` (time.monotonic()): then ServiceUnavailable. A refusal (authorization) is terminal."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is not None and err.code() in _REFUSED:
                raise TerminalError(f"{what}: {err.str()}") from exc
            if time.monotonic() >= deadline:
                raise ServiceUnavailable(f"{what}: not served ({err.str() if err is not None else exc})") from exc
        time.sleep(pause_s)


def partition_offsets(bootstrap: KafkaTarget, topic: str, partitions: list[int], edge: str | None,
                      timestamp_ms: int | None = None, timeout_s: float = 10.0) -> dict[int, int]:  # fmt: skip
    """Per partition: its first offset (`edge` "earliest"), its high watermark ("latest"), or the first
    offset whose record is at or after `timestamp_ms` (the high watermark if none is). A partition still opening
    is asked again until `timeout_s` passed (`retry_while_opening`)."""
    consumer = Consumer(client_config(bootstrap, {"group.id": f"cdcflow-offsets-{time.time_ns()}"}))
    try:
        deadline = time.monotonic() + timeout_s

        def watermarks(partition: int) -> tuple[int, int]:
            tp = TopicPartition(topic, partition)
            return retry_while_opening(lambda: consumer.get_watermark_offsets(tp, timeout=timeout_s),
                                       f"{topic}[{partition}]", deadline)  # fmt: skip

        marks = {p: watermarks(p) for p in partitions}
        if timestamp_ms is None:
            return {p: low if edge == "earliest" else high for p, (low, high) in marks.items()}
        found = consumer.offsets_for_times([TopicPartition(topic, p, timestamp_ms) for p in partitions],
                                           timeout=timeout_s)  # fmt: skip
        return {tp.partition: tp.offset if tp.offset >= 0 else marks[tp.partition][1] for tp in found}
    finally:
        consumer.close()


def tail(bootstrap: KafkaTarget, topic: str, n: int, timeout_s: float = 10.0) -> list[KafkaRecord]:
    """The last `n` records of each partition of `topic`, oldest first per partition ([] if absent)."""
    return list(iter_to_end(bootstrap, topic, timeout_s, last=n))


def read_to_end(bootstrap: KafkaTarget, topic: str, timeout_s: float = 30.0) -> list[KafkaRecord]:
    """Every record of `topic` from its start to its end now ([] if the topic does not exist)."""
    return list(iter_to_end(bootstrap, topic, timeout_s))


def iter_to_end(
    bootstrap: KafkaTarget, topic: str, timeout_s: float = 30.0, last: int | None = None
) -> Iterator[KafkaRecord]:
    """`read_to_end` one record at a time (a store topic may hold many records before compaction);
    with `last`, only the last that many records of each partition."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": f"cdcflow-scan-{time.time_ns()}", "enable.auto.commit": False})
    )
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        except KafkaException as exc:
            raise ServiceUnavailable(f"read {topic}: {exc}") from exc
        if meta is None or meta.error is not None:
            return
        ends: dict[int, int] = {}
        starts = []
        for p in meta.partitions:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            except KafkaException as exc:
                raise ServiceUnavailable(f"read {topic}: {exc}") from exc
            if high > low:
                ends[p] = high
                starts.append(TopicPartition(topic, p, low if last is None else max(low, high - last)))
        if not starts:
            return
        consumer.assign(starts)
        overdue = f"reading {topic} to its end took more than {timeout_s:.0f} s"
        for msg in _polled(consumer, timeout_s, overdue, f"read {topic}", eof_ends=False):
            part, offset = msg.partition() or 0, msg.offset() or 0
            yield KafkaRecord(topic, part, offset, msg.key(), msg.value())
            if part in ends and offset + 1 >= ends[part]:
                del ends[part]
            if not ends:
                return
    finally:
        consumer.close()


def _messages(consumer: Consumer, topic: str, partition: int, timeout_s: float, what: str) -> Iterator[Message]:
    """The messages of the one partition `consumer` is assigned, until its end (a partition EOF, when the client
    reports it) or the caller stops; ServiceUnavailable when reading `what` takes more than `timeout_s`."""
    overdue = f"reading {what} of {topic} partition {partition} took more than {timeout_s:.0f} s"
    return _polled(consumer, timeout_s, overdue, f"read {topic} partition {partition}", eof_ends=True)


def _polled(consumer: Consumer, timeout_s: float, overdue: str, failed: str, eof_ends: bool) -> Iterator[Message]:
    """`consumer`'s messages as they come until the caller stops (or, with `eof_ends`, a partition EOF); the
    one poll loop of this module. ServiceUnavailable(`overdue`) after `timeout_s`, ServiceUnavailable(`failed`:
    the error) on a client error."""
    deadline = time.monotonic() + timeout_s
    while True:
        if time.monotonic() > deadline:
            raise ServiceUnavailable(overdue)
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                if eof_ends:
                    return  # nothing more to come
                continue
            raise ServiceUnavailable(f"{failed}: {err.str()}")
        yield msg


def read_from(bootstrap: KafkaTarget, topic: str, partition: int, offset: int, max_records: int,
              timeout_s: float = 30.0) -> list[KafkaRecord]:  # fmt: skip
    """The records of one partition from `offset` (or its oldest, if retention removed that one) to its end now, at
    most `max_records` ([] if the topic or partition does not exist yet)."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": f"cdcflow-read-from-{time.time_ns()}", "enable.auto.commit": False})
    )
    try:
        try:
            meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if meta is None or meta.error is not None or partition not in meta.partitions:
                return []
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
        except KafkaException as exc:
            raise ServiceUnavailable(f"read {topic} partition {partition}: {exc}") from exc
        start = max(offset, low)
        end = min(high, start + max_records)
        out: list[KafkaRecord] = []
        if start >= end:
            return out
        consumer.assign([TopicPartition(topic, partition, start)])
        for msg in _messages(consumer, topic, partition, timeout_s, f"from {start} to {end}"):
            at = msg.offset() or 0
            out.append(KafkaRecord(topic, partition, at, msg.key(), msg.value()))
            if at + 1 >= end:
                break
        return out
    finally:
        consumer.close()


def read_at(
    bootstrap: KafkaTarget, topic: str, partition: int, offsets: list[int], timeout_s: float = 60.0
) -> dict[int, bytes | None]:
    """The values at `offsets` of one partition, those Kafka still has (retention may have removed some:
    they are missing from the answer). ServiceUnavailable when Kafka does not answer in `timeout_s`."""
    settings: ClientSettings = {"group.id": f"cdcflow-read-at-{time.time_ns()}", "enable.auto.commit": False,
                                "fetch.message.max.bytes": 32 * 1024 * 1024}  # fmt: skip
    consumer = Consumer(client_config(bootstrap, settings))
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
        except KafkaException as exc:
            raise ServiceUnavailable(f"read {topic} partition {partition}: {exc}") from exc
        wanted = {o for o in offsets if low <= o < high}
        found: dict[int, bytes | None] = {}
        if not wanted:
            return found
        last = max(wanted)
        consumer.assign([TopicPartition(topic, partition, min(wanted))])
        for msg in _messages(consumer, topic, partition, timeout_s, f"offsets {min(wanted)}..{last}"):
            offset = msg.offset() or 0
            if offset in wanted:
                found[offset] = msg.value()
            if offset >= last or len(found) == len(wanted):
                break
        return found
    finally:
        consumer.close()


class TopicReader:
    """Reads topics from the beginning, incrementally: each `poll` returns what arrived since."""

    def __init__(self, bootstrap: KafkaTarget, topics: list[str]) -> None:
        self._consumer = Consumer(
            client_config(
                bootstrap,
                {
                    "group.id": f"cdcflow-reader-{time.time_ns()}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "fetch.message.max.bytes": 32 * 1024 * 1024,
                    "topic.metadata.refresh.interval.ms": 1000,
                },
            )
        )
        self._consumer.subscribe(topics)

    def poll(self, wait_s: float = 1.0, max_records: int = 100_000) -> list[KafkaRecord]:
        out: list[KafkaRecord] = []
        deadline = time.monotonic() + wait_s
        while len(out) < max_records:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            msg = self._consumer.poll(min(left, 0.2))
            if msg is None:
                if out:
                    break  # drained what was there
                continue
            err = msg.error()
            if err is not None:
                if err.code() in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                    continue
                raise ServiceUnavailable(f"read: {err.str()}")
            out.append(KafkaRecord(msg.topic() or "", msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value()))
        return out

    def close(self) -> None:
        self._consumer.close()


def read_latest(bootstrap: KafkaTarget, topic: str, key: bytes, timeout_s: float = 30.0) -> bytes | None:
    """The newest value of `key` in `topic` (a compacted store such as the offsets topic), read to its end.

    None if the topic or the key does not exist. A tombstone (null value) also reads as None.
    """
    latest: bytes | None = None
    for rec in iter_to_end(bootstrap, topic, timeout_s):
        if rec.key == key:
            latest = rec.value
    return latest


def create_store_topic(bootstrap: KafkaTarget, name: str, compact: bool, timeout_s: float = 30.0) -> None:
    """A single-partition topic that keeps its records: log-compacted (checkpoints: the newest value
    per key survives) or kept forever (schema history: every record matters). Existing is fine."""
    config = {"cleanup.policy": "compact"} if compact else {"retention.ms": "-1", "retention.bytes": "-1"}
    create_topic(bootstrap, name, partitions=1, timeout_s=timeout_s, config=config)


def topic_config(bootstrap: KafkaTarget, topic: str, name: str, timeout_s: float = 30.0) -> str | None:
    """One effective configuration value of `topic` (its own or the broker's default). A topic created a
    moment ago may be unknown to the broker answering for a short while: asked again, then retryable."""
    admin = _admin(bootstrap)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            future = admin.describe_configs([resource], request_timeout=timeout_s)[resource]
            configs = future.result(timeout=timeout_s + _ANSWER_MARGIN_S)
        except concurrent.futures.TimeoutError as exc:
            raise ServiceUnavailable(f"describe topic {topic}: no answer from Kafka in {timeout_s:.0f} s") from exc
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                if time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                raise ServiceUnavailable(f"describe topic {topic}: {err.str()}") from exc
            raise admin_error(f"describe topic {topic}", err) from exc
        entry = configs.get(name)
        return None if entry is None else entry.value
