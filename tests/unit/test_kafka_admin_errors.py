"""Admin calls against a Kafka that does not answer fail as retryable: a capture that meets a new table while
Kafka is down waits for Kafka and resumes, instead of stopping on a terminal error."""

from __future__ import annotations

import socket

import pytest

from cdcflow.clients.kafka.client import create_topic, topic_config
from cdcflow.errors import RetryableError

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
