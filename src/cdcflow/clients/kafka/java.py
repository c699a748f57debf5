"""`kafka.properties` (librdkafka's names) as the Java Kafka client's settings, for Spark's Kafka source and
sink, so the pipeline connects the way the captures do. Pure."""

from __future__ import annotations

from collections.abc import Mapping

from cdcflow.errors import ConfigError

_SAME = ("security.protocol", "client.id", "ssl.endpoint.identification.algorithm")
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_IGNORED_PREFIXES = ("queue.", "linger.", "batch.", "compression.", "message.", "enable.idempotence", "acks",
                     "retries", "retry.", "delivery.", "request.", "log_level", "socket.", "reconnect.")  # fmt: skip


def java_client_options(properties: Mapping[str, str]) -> dict[str, str]:
    """Java client settings (without Spark's "kafka." prefix). Producer tuning is left out; a connection
    setting with no Java equivalent here is refused, so a secured cluster never gets a plain connection."""
    out: dict[str, str] = {}
    for key in _SAME:
        if key in properties:
            out[key] = properties[key]
    mechanism = properties.get("sasl.mechanism") or properties.get("sasl.mechanisms")
    if mechanism:
        out["sasl.mechanism"] = mechanism
        if "sasl.username" in properties:
            module = _LOGIN_MODULES.get(mechanism.upper())
            if module is None:
                raise ConfigError(f"kafka.properties: sasl.mechanism {mechanism} with sasl.username has no Java "
                                  f"login module here; use one of {', '.join(_LOGIN_MODULES)}")  # fmt: skip
            user, password = properties["sasl.username"], properties.get("sasl.password", "")
            out["sasl.jaas.config"] = f'{module} required username="{_quoted(user)}" password="{_quoted(password)}";'
    if "ssl.ca.location" in properties:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = properties["ssl.ca.location"]
    known = {*_SAME, "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"}
    unknown = sorted(k for k in properties if k not in known and not k.startswith(_IGNORED_PREFIXES))
    if unknown:
        raise ConfigError(f"kafka.properties: {', '.join(unknown)} cannot be passed to the pipeline's Java Kafka "
                          "client by cdcflow yet (supported: security.protocol, SASL PLAIN/SCRAM username and "
                          "password, ssl.ca.location)")  # fmt: skip
    return out


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
