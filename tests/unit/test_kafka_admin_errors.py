"""Admin calls against a Kafka that does not answer fail as retryable: a capture that meets a new table while
Kafka is down waits for Kafka and resumes, instead of stopping on a terminal error. A partition still opening
is asked again."""

from __future__ import annotations

import socket
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from cdcflow.clients.kafka.client import create_topic, retry_while_opening, topic_config
from cdcflow.errors import RetryableError, ServiceUnavailable, TerminalError

pytestmark = pytest.mark.unit


@pytest.fixture
def silent_bootstrap() -> str:
    """An address where nothing listens (a port bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_creating_a_topic_on_an_unreachable_kafka_is_retryable(silent_bootstrap: str) -> None:
    # librdkafka answers "Failed while waiting for controller: Local: Timed out", flagged not retriable
    with pytest.raises(RetryableError, match="create topic t: Failed while waiting for controller"):
        create_topic(silent_bootstrap, "t", timeout_s=2)


def test_describing_a_topic_on_an_unreachable_kafka_is_retryable(silent_bootstrap: str) -> None:
    with pytest.raises(RetryableError, match="describe topic t: Failed while waiting for controller"):
        topic_config(silent_bootstrap, "t", "max.message.bytes", timeout_s=2)


def test_a_partition_still_opening_is_asked_again_until_it_answers() -> None:
    # A broker lists a new topic before it opens its partitions: watermarks asked in that moment are refused
    # with NOT_LEADER_FOR_PARTITION (seen from tests polling a topic the capture had just created).
    answers: list[object] = [KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)),
                             KafkaException(KafkaError(KafkaError.LEADER_NOT_AVAILABLE)), 42]  # fmt: skip
    calls = 0

    def watermark() -> int:
        nonlocal calls
        answer = answers[calls]
        calls += 1
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, int)
        return answer

    assert retry_while_opening(watermark, "t[0]", time.monotonic() + 5, pause_s=0) == 42
    assert calls == 3


def test_a_partition_never_served_ends_retryable_and_a_refusal_terminal() -> None:
    def not_leader() -> int:
        raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))

    def refused() -> int:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    with pytest.raises(ServiceUnavailable, match=r"t\[0\]: not served"):
        retry_while_opening(not_leader, "t[0]", time.monotonic() + 0.2, pause_s=0.01)
    with pytest.raises(TerminalError, match=r"t\[0\]"):
        retry_while_opening(refused, "t[0]", time.monotonic() + 5, pause_s=0)
