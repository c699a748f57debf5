"""What sinks and the pipeline need to know of the world around them: where Kafka is, the clusters a sink
writes to by default, the topics that are not change events. One typed object, made once at the edge (the
CLI from the config and the local stack; a user's job by hand) and read everywhere else."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdcflow.errors import ConfigError


@dataclass(frozen=True)
class Endpoints:
    """Where the pipeline's sinks find what they need.

    Only `bootstrap_servers` is required; a sink that needs something else and does not have it (in its own
    options or here) says so when it is made."""

    bootstrap_servers: str  # Kafka: the change-event topics, the schema history, dead letters
    # Kafka client settings (SASL, TLS), as the captures use them: `kafka.properties` of the config.
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    # The source HBase cluster's ZooKeeper: the hbase sink's default target, and where the delta sink reads the
    # source families' TTLs from.
    zk_quorum: str | None = None
    phoenix_url: str | None = None  # the phoenix sink's default url (jdbc:phoenix:...)
    # Where sinks keep local data by default: the delta sink's tables under <data_dir>/delta.
    data_dir: str | None = None
    # The MySQL capture's schema history: typed Delta tables and Phoenix tables are built from it.
    mysql_schema_history_topic: str | None = "cdcflow-mysql-schema-history"
    # Topics of the sources' heartbeats: a batch of heartbeats only is progress, not work for the sinks.
    heartbeat_topics: tuple[str, ...] = ()
    # (source name, transaction topic, change topic prefix) of the MySQL sources that write transaction records
    # (mysql.output.transaction_topic): a Delta sink's consistent cut reads them.
    transaction_topics: tuple[tuple[str, str, str], ...] = ()
    # (topic pattern, "json" or "avro") of the sources whose topics are in the debezium format.
    debezium_topics: tuple[tuple[str, str], ...] = ()
    debezium_heartbeat_topics: tuple[str, ...] = ()  # Debezium's heartbeat topics, read as cdcflow's
    schema_registry_url: str | None = None  # for debezium-format topics in Avro
    dead_letter_topic: str = "cdcflow-dead-letter"  # where records no sink can read go, with the reason
    # The pipeline's checkpoint folder: a sink keeps its own small files under <checkpoint_root>/<sink name>.
    checkpoint_root: str | None = None

    def __post_init__(self) -> None:
        if not self.bootstrap_servers or not isinstance(self.bootstrap_servers, str):
            raise ConfigError("Endpoints: bootstrap_servers is required (host:port[,host:port...])")
        if self.phoenix_url is not None and not self.phoenix_url.startswith("jdbc:phoenix:"):
            raise ConfigError(f"Endpoints: phoenix_url must start with jdbc:phoenix:, got {self.phoenix_url!r}")
        for pattern, serialization in self.debezium_topics:
            if serialization not in ("json", "avro"):
                raise ConfigError(f"Endpoints: debezium_topics {pattern!r}: serialization is json or avro, "
                                  f"not {serialization!r}")  # fmt: skip

    @classmethod
    def of(cls, given: Endpoints | Mapping[str, Any]) -> Endpoints:
        """`given` as Endpoints: as it is, or a mapping of the same names (unknown names are an error)."""
        if isinstance(given, Endpoints):
            return given
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - names)
        if unknown:
            raise ConfigError(f"Endpoints: unknown {', '.join(unknown)}; known: {', '.join(sorted(names))}")
        values = dict(given)
        if "bootstrap_servers" not in values:
            raise ConfigError("Endpoints: bootstrap_servers is required (host:port[,host:port...])")
        for name in ("heartbeat_topics", "debezium_heartbeat_topics"):
            if name in values and values[name] is not None:
                values[name] = tuple(values[name])
        if values.get("transaction_topics") is not None:
            values["transaction_topics"] = tuple((str(a), str(b), str(c)) for a, b, c in values["transaction_topics"])
        if values.get("debezium_topics") is not None:
            values["debezium_topics"] = tuple((str(p), str(s)) for p, s in values["debezium_topics"])
        for name in ("data_dir", "checkpoint_root"):
            if values.get(name) is not None:
                values[name] = str(values[name])
        return cls(**{k: v for k, v in values.items() if v is not None or k in _NULLABLE})

    def with_pipeline(self, dead_letter_topic: str, checkpoint_root: str) -> Endpoints:
        return dataclasses.replace(self, dead_letter_topic=dead_letter_topic, checkpoint_root=checkpoint_root)

    def require_zk_quorum(self, sink: str) -> str:
        if not self.zk_quorum:
            raise ConfigError(f"sink {sink}: no HBase cluster to write to: set the sink's zk_quorum, or "
                              "Endpoints.zk_quorum (the source HBase's ZooKeeper)")  # fmt: skip
        return self.zk_quorum


_NULLABLE = {"zk_quorum", "phoenix_url", "data_dir", "mysql_schema_history_topic", "schema_registry_url",
             "checkpoint_root"}  # fmt: skip
