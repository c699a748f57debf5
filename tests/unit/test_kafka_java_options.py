"""kafka.properties for Spark's Java Kafka client: the same cluster, the same credentials, or a clear refusal."""

from __future__ import annotations

import pytest

from cdcflow.clients.kafka.client import KafkaEndpoint, client_config
from cdcflow.clients.kafka.java import java_client_options
from cdcflow.errors import ConfigError

pytestmark = pytest.mark.unit


def test_sasl_and_tls_settings_map_to_the_java_client() -> None:
    options = java_client_options({
        "security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u",
        "sasl.password": 'p"w', "ssl.ca.location": "/etc/ca.pem", "linger.ms": "20",
    })  # fmt: skip
    assert options == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
                            'password="p\\"w";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem",
    }  # fmt: skip
    assert java_client_options({}) == {}


def test_connection_settings_without_a_java_equivalent_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.key\.location"):
        java_client_options({"security.protocol": "SSL", "ssl.key.location": "/k.pem"})
    with pytest.raises(ConfigError, match="GSSAPI"):
        java_client_options({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})


def test_consumers_and_admin_clients_get_the_connection_settings_only() -> None:
    endpoint = KafkaEndpoint.of("b:9092", {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u",
                                           "linger.ms": "5"})  # fmt: skip
    config = client_config(endpoint, {"group.id": "g"})
    assert config == {"group.id": "g", "bootstrap.servers": "b:9092", "security.protocol": "SASL_PLAINTEXT",
                      "sasl.username": "u"}  # fmt: skip
    assert client_config("b:9092") == {"bootstrap.servers": "b:9092"}
