"""Kafka access. `client.py` is the only module in cdcflow that imports the Kafka client library."""

from cdcflow.clients.kafka.client import (
    KafkaEndpoint,
    KafkaRecord,
    KafkaTarget,
    TopicReader,
    client_config,
    consume,
    create_store_topic,
    create_topic,
    end_offsets,
    iter_to_end,
    list_topics,
    ping,
    produce_sync,
    read_latest,
    tail,
    topic_config,
)

__all__ = [
    "KafkaEndpoint",
    "KafkaRecord",
    "KafkaTarget",
    "TopicReader",
    "client_config",
    "consume",
    "create_store_topic",
    "create_topic",
    "end_offsets",
    "iter_to_end",
    "list_topics",
    "ping",
    "produce_sync",
    "read_latest",
    "tail",
    "topic_config",
]
