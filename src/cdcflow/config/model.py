"""The config file's schema and loader: YAML, then CDCFLOW__SECTION__KEY environment overrides."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cdcflow.config.paths import default_stack_home
from cdcflow.config.sinks import SINK_OPTIONS, SinkOptions, sink_options
from cdcflow.errors import ConfigError
from cdcflow.events.json_codec import VALUE_ENCODINGS

ENV_PREFIX = "CDCFLOW__"
# The local stack's components in start order (`down` stops in reverse); cdcflow.dev.stack runs one service each.
COMPONENTS: tuple[str, ...] = (
    "mariadb", "mysql", "kafka", "kafka-cluster", "registry", "hbase", "hbase-cluster", "phoenix", "spark",
)  # fmt: skip
# What `stack up` and `cdcflow run` start unless told otherwise; the Spark standalone cluster is
# for `pipeline submit` against a cluster (the embedded pipeline runs Spark in-process).
DEFAULT_COMPONENTS: tuple[str, ...] = ("mariadb", "kafka", "hbase", "phoenix")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StackConfig(_Strict):
    """The local stack `cdcflow run` starts (the embedded default)."""

    # Where the local stack keeps its services' data and logs; null: ~/.local/state/cdcflow/stack.
    home: Path | None = None
    # Services `cdcflow run` and `stack up` start (any of mariadb, mysql, kafka, hbase, phoenix, spark).
    components: tuple[str, ...] = DEFAULT_COMPONENTS

    @field_validator("components")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(COMPONENTS))
        if unknown:
            raise ValueError(f"unknown component(s) {unknown}; known: {list(COMPONENTS)}")
        return value

    def resolved_home(self) -> Path:
        return self.home or default_stack_home()


class KafkaConfig(_Strict):
    """Where change events go. `bootstrap_servers: null` means the local stack's Kafka."""

    # Kafka brokers (host:port,...); null: the local stack's Kafka.
    bootstrap_servers: str | None = None
    # Compression of the records the captures produce.
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "lz4"
    # How long a producer waits to fill a batch (librdkafka linger.ms).
    linger_ms: int = Field(default=5, ge=0)
    # Schema registry with Confluent's REST API, for Avro output (output.serialization: avro);
    # null: the local stack's (cdcflow stack up registry).
    schema_registry_url: str | None = None
    # How long a record may take to be acknowledged before the capture fails loudly (nothing is checkpointed
    # past it).
    delivery_timeout_ms: int = Field(default=60_000, ge=1000)
    # Passed to librdkafka unchanged: security.protocol, sasl.mechanism, sasl.username, ssl.ca.location, ...
    properties: dict[str, str] = {}


class RouteConfig(_Strict):
    """Which HBase tables go where. Table patterns: `*` wildcards and ${yyyy} ${MM} ${dd} ${yyyyMM} ..."""

    # HBase table pattern this route applies to (`ns:table` or `table`; `*` and date placeholders).
    table: str
    topic: str | None = None  # default: <topic_prefix>.<namespace>.<table>
    # True: the matching tables' changes are not published at all.
    drop: bool = False
    columns: tuple[str, ...] = ("*",)  # "family:qualifier" patterns to keep
    # "family:qualifier" patterns to leave out (applied after `columns`).
    exclude_columns: tuple[str, ...] = ()
    values: dict[str, str] = {}  # value decoding hints: {"cf:name": "utf8", "cf:n*": "long"}
    # hbase.output.format upsert: field names of columns in the row's value ({"cf:name": "name"}); a column
    # named here or in `values` without wildcards is a typed field (by `values`; bytes without a hint), every
    # other column kept is in the value's `cells` map. Default name: family_qualifier.
    fields: dict[str, str] = {}

    @field_validator("values")
    @classmethod
    def _encodings(cls, value: dict[str, str]) -> dict[str, str]:
        bad = {k: v for k, v in value.items() if v not in VALUE_ENCODINGS}
        if bad:
            raise ValueError(f"unknown value encodings {bad}; choose from {list(VALUE_ENCODINGS)}")
        return value


class HBaseOutputConfig(_Strict):
    """How the HBase peer writes what it receives (docs/debezium.md "HBase sources", decision 0018)."""

    # cdcflow: change-event-v1, the cells of each change (docs/pipeline.md). upsert: each changed row read
    # back from the source after the change and published whole, keyed by the row key's bytes, or a tombstone
    # when the row is gone: what upserting consumers (Flink upsert-kafka, Kafka Connect's JDBC sink,
    # Materialize/RisingWave UPSERT) read as they are. Versions, timestamps and delete types stay in the
    # cdcflow format only.
    format: Literal["cdcflow", "upsert"] = "cdcflow"
    # upsert format: json, or avro (Confluent's wire format; the value schema registered in the schema registry
    # under <topic>-value, kafka.schema_registry_url). The key is the row key's bytes either way.
    serialization: Literal["json", "avro"] = "json"
    # upsert format: reads of a row before it is published as read although it does not show the call's last
    # edit yet (an edit is visible an instant after HBase ships it; a later edit can hide it for good).
    read_attempts: int = Field(default=20, ge=1, le=1000)
    # upsert format: how long one read-back keeps retrying a region it cannot read (offline, moving, its server
    # down) before the call is answered with an error and HBase sends it again (nothing is acknowledged before).
    # Keep it under HBase's replication RPC timeout (hbase.rpc.timeout, 60 s by default).
    read_timeout_s: float = Field(default=20.0, gt=0, le=600)

    @model_validator(mode="after")
    def _upsert_only(self) -> HBaseOutputConfig:
        if self.format == "cdcflow" and self.serialization != "json":
            raise ValueError("hbase.output.serialization avro applies to hbase.output.format: upsert only")
        return self


class PeerTlsConfig(_Strict):
    """TLS on the peer port, for sources with hbase.client.netty.tls.enabled (docs/hbase-capture.md)."""

    cert_file: str  # PEM certificate chain the peer presents
    key_file: str  # PEM private key of that certificate
    ca_file: str | None = None  # set: clients must present a certificate signed by this CA (mutual TLS)


class PeerConfig(_Strict):
    """How cdcflow presents itself to HBase as a replication peer cluster."""

    peer_id: str = Field(default="cdcflow", pattern=r"^[A-Za-z0-9_.]+$")  # HBase refuses '-'
    host: str = "127.0.0.1"  # the address registered in ZooKeeper: HBase region servers connect to it
    bind: str | None = None  # the address to listen on (null: `host`; "0.0.0.0": every interface)
    port: int = Field(default=0, ge=0, le=65535)  # 0: any free port
    # The peer's "cluster": this ZooKeeper parent znode. The source's own ZK is fine.
    znode_parent: str = Field(default="/cdcflow", pattern=r"^/.*[^/]$")
    zk_quorum: str | None = None  # default: the source cluster's ZooKeeper
    # Our session's timeout: after a pause or partition longer than this, ZooKeeper drops our rs znode
    # and we register again on the new session. Shorter: a dead instance is dropped by HBase sooner.
    zk_session_timeout_s: float = Field(default=10.0, ge=4, le=40)
    # Add the peer as a serial peer (HBase keeps each region's order across region moves).
    serial: bool = True
    # Per-peer HBase settings given at `peer add` (replication.source.ratio, ...).
    hbase_config: dict[str, str] = {"replication.source.ratio": "1.0"}
    # Who may replicate to us (empty: anyone who reaches the port). Clusters: the UUIDs of source
    # clusters (the last id of each WAL entry's cluster_ids); networks: CIDRs of client addresses.
    allowed_clusters: tuple[str, ...] = ()
    # CIDRs of client addresses allowed to connect (empty: any).
    allowed_networks: tuple[str, ...] = ()
    # Connections beyond this evict the longest-idle one, or are refused when none is idle.
    max_connections: int = Field(default=1000, ge=1)
    # A connection with no call in flight and no byte for this long is closed (HBase reconnects when
    # it needs to; its own client drops connections idle for 2 minutes).
    idle_timeout_s: float = Field(default=300.0, gt=0)
    handshake_timeout_s: float = Field(default=10.0, gt=0)  # preamble + connection header
    tls: PeerTlsConfig | None = None

    @field_validator("allowed_clusters")
    @classmethod
    def _uuids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import uuid

        try:
            return tuple(str(uuid.UUID(v)) for v in value)
        except ValueError as exc:
            raise ValueError(f"allowed_clusters must be cluster UUIDs: {exc}") from exc

    @field_validator("allowed_networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        import ipaddress

        try:
            return tuple(str(ipaddress.ip_network(v, strict=False)) for v in value)
        except ValueError as exc:
            raise ValueError(f"allowed_networks must be networks like 10.0.0.0/8: {exc}") from exc


class HBaseBackfillConfig(_Strict):
    """`cdcflow hbase backfill`: existing rows of HBase tables as `op: "r"` events (docs/hbase-capture.md)."""

    # Compacted topic holding each backfill's plan and every region's progress (what a rerun resumes).
    progress_topic: str = "cdcflow-hbase-backfill"
    # Where the regions are read, one Spark task each: local cores or a cluster's master URL.
    spark_master: str = "local[2]"
    # Rows per chunk: a chunk is published, acknowledged, then recorded as the region's progress.
    chunk_rows: int = Field(default=2000, ge=1, le=1_000_000)
    progress_every_s: float = Field(default=10.0, gt=0)  # how often the driver logs the progress
    keep_snapshots: bool = False  # keep each table's snapshot and scratch clone when done


class HBaseSourceConfig(_Strict):
    # Name of this source in events (`source.name`) and in offsets and metrics.
    name: str = "hbase"
    zk_quorum: str | None = None  # the source cluster's ZooKeeper; null: the local stack's HBase
    # The source cluster's znode parent (zookeeper.znode.parent).
    znode_parent: str = "/hbase"
    # Topics are <topic_prefix>.<namespace>.<table> unless a route names one.
    topic_prefix: str = "cdcflow"
    # Per-table routing, filtering and value decoding; tables no route matches go to their default topic.
    routes: tuple[RouteConfig, ...] = ()
    # A new peer replays each region server's current WAL from its start. Drop edits whose WAL
    # write time is older than this (epoch ms), or older than the peer's creation (`peer add`).
    skip_edits_before_ms: int | None = None
    # Drop edits older than the peer's creation time (written at `peer add`).
    skip_edits_before_peer_creation: bool = False
    # Memory of calls being received and processed (frames as they arrive, then their decoded events):
    # past it the peer stops reading its sockets and TCP pushes back on HBase. A frame (one call) may not
    # be larger than max_frame_mb, which must fit in the budget. 192: with the process's own ~80 MB the
    # peer stays under 300 MB of RSS whatever the backlog; HBase ships at most 64 MB per call by default
    # (replication.source.size.capacity), more only for a single larger WAL entry.
    max_inflight_mb: int = Field(default=192, ge=1)
    # Largest call (frame) accepted from HBase; must fit in max_inflight_mb.
    max_frame_mb: int = Field(default=192, ge=1)
    # A change event larger than this (or than its topic's max.message.bytes) cannot be one Kafka record:
    # split (default) publishes a marker in the table's topic and the whole event in parts to
    # oversize_topic; refuse answers HBase with an error (its queue waits until the limit is raised).
    max_record_bytes: int = Field(default=8 * 2**20, ge=256 * 1024, le=256 * 2**20)
    # What to do with a change event larger than max_record_bytes: split into parts, or refuse the call.
    oversize: Literal["split", "refuse"] = "split"
    # Where the parts of split oversize events go.
    oversize_topic: str = "cdcflow-hbase-oversize"
    # `after` repeats Put values without a decoding hint as base64 (as `cells` has them): doubles records.
    after_base64: bool = False
    topic_partitions: int = Field(default=-1, ge=-1)  # topics the peer creates; -1: the broker's default
    # How often hbase:meta is read for tables truncated, or deleted and created again (HBase writes nothing to
    # the WAL for them): each is published as an op t event (docs/hbase-capture.md). 0: never.
    table_watch_s: float = Field(default=30.0, ge=0)
    peer: PeerConfig = PeerConfig()
    backfill: HBaseBackfillConfig = HBaseBackfillConfig()
    output: HBaseOutputConfig = HBaseOutputConfig()

    @model_validator(mode="after")
    def _frame_fits_budget(self) -> HBaseSourceConfig:
        if self.max_frame_mb > self.max_inflight_mb:
            raise ValueError(f"max_frame_mb ({self.max_frame_mb}) must not exceed max_inflight_mb "
                             f"({self.max_inflight_mb}): a frame is held in that budget")  # fmt: skip
        return self

    @model_validator(mode="after")
    def _upsert_fields(self) -> HBaseSourceConfig:
        from cdcflow.events.json_codec import ValueHints
        from cdcflow.events.upsert import UpsertColumns

        if self.output.format != "upsert":
            if any(r.fields for r in self.routes):
                raise ValueError("hbase.routes[].fields name the fields of hbase.output.format: upsert only")
            return self
        if not self.peer.serial:
            # Two region servers' calls for one row (after a region move) could then run at once, and the
            # older read could reach Kafka last.
            raise ValueError("hbase.output.format upsert needs hbase.peer.serial: true (each row read in order)")
        for r in self.routes:
            if not r.drop:
                try:
                    UpsertColumns.of(r.fields, ValueHints(r.values))
                except ValueError as exc:
                    raise ValueError(f"route {r.table}: {exc}") from exc
        return self


class MySqlTlsConfig(_Strict):
    """TLS to the MySQL/MariaDB server (MySQL's --ssl-mode names; docs/mysql.md "TLS")."""

    # TLS mode, as MySQL's --ssl-mode: disabled, preferred, required, verify_ca, verify_identity.
    mode: Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"] = "preferred"
    # PEM file of the CA that signed the server's certificate (verify_ca, verify_identity).
    ca_file: str | None = None
    # PEM client certificate (with key_file), for servers that require one.
    cert_file: str | None = None
    # PEM private key of cert_file.
    key_file: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> MySqlTlsConfig:
        if self.mode in ("verify_ca", "verify_identity") and not self.ca_file:
            raise ValueError(f"mysql.tls.mode={self.mode} needs mysql.tls.ca_file (the CA that signed the server)")
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("mysql.tls.cert_file and mysql.tls.key_file go together (a client certificate)")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path and not os.path.isfile(path):
                raise ValueError(f"mysql.tls.{name}: {path} is not a file")
        if self.mode == "disabled" and (self.ca_file or self.cert_file):
            raise ValueError("mysql.tls.mode=disabled with certificate files: choose a mode that uses them")
        return self


class MySqlSnapshotConfig(_Strict):
    """Initial snapshot of selected tables, interleaved with the stream (DBLog-style watermarks)."""

    tables: tuple[str, ...] = ()  # "db.table" patterns; empty: no snapshot
    # Rows per snapshot chunk (one SELECT by primary key range).
    chunk_size: int = Field(default=5000, ge=1)
    # A table cdcflow writes watermarks to (created if missing). The database must be in the binlog.
    watermark_table: str = Field(default="cdcflow.watermarks", pattern=r"^[A-Za-z0-9_$]+\.[A-Za-z0-9_$]+$")
    # Ad-hoc snapshots while the capture runs (Debezium's signal.data.collection): a row inserted into this table
    # (id, type, data; created if missing) with type 'execute-snapshot' and data '{"data-collections": ["db.t"]}'
    # snapshots those tables (again) from their start, chunk by chunk like the tables above
    # (`cdcflow mysql signal snapshot db.t` inserts it). null: no signals.
    signal_table: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_$]+\.[A-Za-z0-9_$]+$")
    # Read a table again, chunk by chunk like the tables above, after a DDL changed its rows without row events
    # (ADD COLUMN with a default, MODIFY/CHANGE/DROP COLUMN, a new primary key, a table renamed into its name), so
    # the sinks hold what the source holds. Sets up the watermark table at the first such DDL (the capture's
    # user then needs CREATE, INSERT and UPDATE on it); false, or without those grants: the capture logs that
    # the table's sinks now differ and what to do (docs/mysql.md, "Schema changes").
    on_ddl: bool = True

    @model_validator(mode="after")
    def _signal_table_is_its_own(self) -> MySqlSnapshotConfig:
        if self.signal_table is not None and self.signal_table == self.watermark_table:
            raise ValueError("mysql.snapshot.signal_table must not be the watermark_table")
        return self


class OutputConfig(_Strict):
    """How a source writes its change events (docs/debezium.md)."""

    # cdcflow: change-event-v1 (docs/pipeline.md). debezium: Debezium's MySQL/MariaDB connector envelope,
    # key and value representations, read as they are by Debezium-aware tools (Flink, Kafka Connect sinks).
    format: Literal["cdcflow", "debezium"] = "cdcflow"
    # json, or avro: Confluent's wire format (schema id + Avro binary), the schemas registered in the schema
    # registry (kafka.schema_registry_url) under <topic>-key and <topic>-value. Avro: debezium format only.
    serialization: Literal["json", "avro"] = "json"
    # debezium format: wrap key and value as Kafka Connect's JsonConverter does with schemas.enable=true
    # ({"schema": ..., "payload": ...}); off: the bare payload (schemas.enable=false).
    schemas: bool = False
    # debezium format: a tombstone (same key, no value) after each delete, so compacted topics drop the row.
    tombstones: bool = True
    # debezium format: DECIMAL columns as Debezium's decimal.handling.mode: precise (Connect's Decimal, bytes),
    # string (exact text; what Flink's debezium-json reads) or double (lossy).
    decimal_handling: Literal["precise", "string", "double"] = "precise"
    # debezium format: Debezium's datatype.propagate.source.type for DATETIME, TIME, TIMESTAMP and BIGINT UNSIGNED
    # columns (their MySQL type and fractional digits in the field's schema parameters), which readers need to
    # give the exact values back (the cdcflow pipeline needs it); off: Debezium's defaults exactly.
    propagate_source_types: bool = True
    # A topic (one partition, kept) with a record per committed transaction: its GTID, position and change events
    # per table (the debezium format: Debezium's BEGIN/END records, provide.transaction.metadata). A Delta sink's
    # consistent cut reads it (docs/pipeline.md); null: none.
    transaction_topic: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._\-]+$")
    # Heartbeat records (either format): every heartbeat_interval_s, a record keyed by the source's name with
    # its acknowledged position and the time of the newest change it read, busy or idle (Debezium's
    # heartbeat.interval.ms and __debezium-heartbeat topic); null: none. A pipeline sink whose topics match it
    # counts the heartbeats as progress: its lag stays small while the server is idle.
    heartbeat_topic: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._\-]+$")
    # Seconds between two heartbeat records.
    heartbeat_interval_s: float = Field(default=10.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _debezium_only(self) -> OutputConfig:
        debezium_only = self.schemas or self.decimal_handling != "precise"
        if self.format == "cdcflow" and (debezium_only or self.serialization != "json"):
            raise ValueError("output.schemas, output.serialization and output.decimal_handling apply to "
                             "output.format: debezium only")  # fmt: skip
        if self.serialization == "avro" and self.schemas:
            raise ValueError("output.schemas wraps JSON records; with Avro the schema is in the registry: drop it")
        return self


class MySqlSourceConfig(_Strict):
    """A MySQL/MariaDB server read as a replica (binlog) and published to Kafka."""

    # Name of this source in events (`source.name`), offsets and metrics.
    name: str = Field(default="mysql", pattern=r"^[A-Za-z0-9_.\-]+$")
    # null: the local stack's MariaDB (with its replication user)
    host: str | None = None
    # Server port; null: 3306, or the local stack's.
    port: int | None = Field(default=None, ge=1, le=65535)
    # Replication user (needs REPLICATION SLAVE, REPLICATION CLIENT, SELECT; docs/mysql.md).
    user: str | None = None
    # That user's password.
    password: str | None = None
    server_id: int = Field(default=6401, ge=1, le=2**32 - 1)  # must differ from every server and replica
    # Topics are <topic_prefix>.<db>.<table>.
    topic_prefix: str = Field(default="cdcflow.mysql", pattern=r"^[A-Za-z0-9._\-]+$")
    include: tuple[str, ...] = ("*.*",)  # "db.table" patterns (fnmatch)
    # "db.table" patterns never captured (applied after include).
    exclude: tuple[str, ...] = ("mysql.*", "sys.*", "information_schema.*", "performance_schema.*", "cdcflow.*")
    # Tables without a primary key: which columns identify a row ({"db.table": ["a", "b"]}).
    key_columns: dict[str, tuple[str, ...]] = {}
    start: Literal["latest", "earliest"] = "latest"  # where a source with no checkpoint begins
    # Compacted topic holding the capture's checkpoint (binlog position / GTID set).
    offsets_topic: str = "cdcflow-mysql-offsets"
    # Topic holding every table's shape and DDL, for restarts and for the sinks' typed tables.
    schema_history_topic: str = "cdcflow-mysql-schema-history"
    # Where undecodable binlog events go with on_undecodable: dead_letter.
    dead_letter_topic: str = "cdcflow-mysql-dead-letter"
    # Rows of prepared XA transactions wait here (compacted) until XA COMMIT / XA ROLLBACK.
    xa_topic: str = "cdcflow-mysql-xa"
    # A binlog event the decoder cannot read (CRC mismatch, unsupported column type, garbage):
    # stop (default: the capture exits with an error naming table, file, position and GTID) or
    # dead_letter (its raw bytes and position go to dead_letter_topic; the capture goes on without it).
    on_undecodable: Literal["stop", "dead_letter"] = "stop"
    # Rows that must wait for the end of their event group (savepoints in transactions that touch
    # non-transactional tables, prepared XA) are kept in memory up to this size, then in temp files.
    held_memory_mb: int = Field(default=64, ge=1)
    spill_dir: str | None = None  # where those temp files go (null: the system's temp directory)
    # A change event larger than this (or than its topic's max.message.bytes) cannot be one Kafka record:
    # split (default) publishes a marker in the table's topic and the whole event in parts to
    # oversize_topic (docs/mysql.md); stop ends the capture with an error naming the row.
    max_record_bytes: int = Field(default=8 * 2**20, ge=64 * 1024, le=256 * 2**20)
    # What to do with a change event larger than max_record_bytes: split into parts, or stop.
    oversize: Literal["split", "stop"] = "split"
    # Where the parts of split oversize events go.
    oversize_topic: str = "cdcflow-mysql-oversize"
    # Partitions of the topics the capture creates (events are keyed by primary key).
    topic_partitions: int = Field(default=1, ge=1)
    # How often the checkpoint is written (only on transaction boundaries, after Kafka acknowledged).
    checkpoint_interval_ms: int = Field(default=1000, ge=10)
    # Heartbeat period asked of the server while the binlog is idle.
    heartbeat_s: float = Field(default=1.0, gt=0, le=60)
    max_inflight_mb: int = Field(default=256, ge=1)  # bounds memory in large transactions
    snapshot: MySqlSnapshotConfig = MySqlSnapshotConfig()
    tls: MySqlTlsConfig = MySqlTlsConfig()
    output: OutputConfig = OutputConfig()


def _check_topic_pattern(value: str) -> str:
    """Kafka takes a Java regex; Python's `re` accepts the same common syntax, so it catches typos
    here instead of in Spark's stack trace."""
    if not value.strip():
        raise ValueError("a topic pattern must not be empty")
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{value!r} is not a valid topic pattern: {exc}") from exc
    return value


class SinkConfig(_Strict):
    """One sink of the pipeline; its own streaming query, checkpoint and failure handling."""

    # Unique name: the sink's checkpoint directory, metrics label and status entry.
    name: str = Field(pattern=r"^[A-Za-z0-9_\-]+$")
    # Which sink; its options are listed below by type.
    type: Literal["hbase", "delta", "delta_changelog", "console", "parquet", "phoenix"]
    # Per type: cdcflow.config.sinks (HBaseSinkOptions, DeltaStateOptions, ...), checked at load.
    options: dict[str, Any] = {}
    # This sink's own subscribePattern (a Java regex); null: the pipeline's `topics`. The dead-letter
    # query reads the union of all patterns, so malformed records on any of them are kept.
    topics: str | None = None
    # Sinks with the same group share one streaming query: each change is read from Kafka and parsed once for
    # all of them. A sink whose part of a batch fails catches up on its own while the others go on (docs/pipeline.md
    # "Sink groups"). null: the sink's query is its own.
    group: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_\-]+$")

    @field_validator("topics")
    @classmethod
    def _topics_regex(cls, value: str | None) -> str | None:
        return None if value is None else _check_topic_pattern(value)

    @model_validator(mode="after")
    def _options_fit_the_type(self) -> SinkConfig:
        sink_options(self.type, self.options)  # raises with the option's name and the reason
        return self

    @property
    def typed_options(self) -> SinkOptions:
        return sink_options(self.type, self.options)

    @classmethod
    def of(cls, name: str, options: SinkOptions, topics: str | None = None, group: str | None = None) -> SinkConfig:
        """A sink from its typed options (DeltaStateOptions, HBaseSinkOptions, ...): the type follows from them."""
        kinds = [kind for kind, model in SINK_OPTIONS.items() if type(options) is model]
        if not kinds:
            raise ValueError(f"sink {name}: options are one of {', '.join(m.__name__ for m in SINK_OPTIONS.values())}, "
                             f"not {type(options).__name__}")  # fmt: skip
        given = options.model_dump(exclude_unset=True)
        return cls(name=name, type=kinds[0], options=given, topics=topics, group=group)  # type: ignore[arg-type]


class PipelineConfig(_Strict):
    topics: str = r"cdcflow\..*"  # Kafka subscribePattern (a Java regex)
    checkpoint_dir: Path | None = None  # default: <stack home>/pipeline/checkpoints
    # Where records no sink can read go, with the reason.
    dead_letter_topic: str = "cdcflow-dead-letter"
    # Most Kafka records per micro-batch (Spark's maxOffsetsPerTrigger).
    max_offsets_per_trigger: int = Field(default=200_000, ge=1)
    # Micro-batch interval of the sinks' queries.
    trigger_seconds: float = Field(default=5.0, gt=0)
    master: str | None = "local[2]"  # null: taken from spark-submit (see `cdcflow pipeline submit`)
    # Longest wait before a failed sink query is restarted (doubling from 2 s).
    retry_backoff_max_s: float = Field(default=60.0, gt=0)
    # Extra settings of the pipeline's Spark session, e.g. {"spark.sql.catalogImplementation": "hive"}
    # (the Delta sinks then register their tables and views in that metastore). A spark_catalog given
    # here (or with spark-submit --conf) is kept: cdcflow sets Delta's only when none is.
    spark_conf: dict[str, str] = {}
    # The sinks, each its own query and checkpoint, or its group's (docs/pipeline.md).
    sinks: tuple[SinkConfig, ...] = ()

    @field_validator("topics")
    @classmethod
    def _topics_regex(cls, value: str) -> str:
        return _check_topic_pattern(value)

    @model_validator(mode="after")
    def _sinks_apart(self) -> PipelineConfig:
        names = [s.name for s in self.sinks]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"sink names must be unique (each has its own checkpoint): {', '.join(twice)}")
        # Kafka matches the whole topic name against the pattern (Java's Matcher.matches).
        for pattern in {self.topics, *(s.topics for s in self.sinks if s.topics)}:
            if re.fullmatch(pattern, self.dead_letter_topic):
                raise ValueError(
                    f"topic pattern {pattern!r} matches the dead-letter topic {self.dead_letter_topic!r}: "
                    "dead letters would be read back as events"
                )
        return self


class DemoConfig(_Strict):
    """The demo workloads `cdcflow run` writes: into the local HBase (cdcflow.dev.demo.hbase_workload) and, when the
    stack has MariaDB, random transactions into `mysql_database` (cdcflow.dev.testing.mysql)."""

    # Whether `cdcflow run` writes the demo workloads.
    enabled: bool = True
    # HBase tables the demo creates and writes.
    tables: tuple[str, ...] = ("demo_users", "demo_orders", "demo_events")
    # Row keys per demo table the mutations pick from.
    rows_per_table: int = Field(default=2000, ge=1)
    # HBase mutations per second, over all demo tables.
    mutations_per_second: float = Field(default=200, gt=0)
    max_mutations: int | None = Field(default=None, ge=1)  # null: until Ctrl-C
    mysql_database: str | None = Field(default="cdcflow_demo", pattern=r"^[A-Za-z0-9_]+$")  # null: no MySQL demo
    # MariaDB demo transactions per second.
    mysql_transactions_per_second: float = Field(default=20, gt=0)


class MetricsConfig(_Strict):
    """Prometheus endpoints of the processes (docs/operations.md); a null port serves none. The command
    line's --metrics-port overrides the port of the process it starts."""

    host: str = "127.0.0.1"  # the address they listen on; 0.0.0.0 lets a status page on another machine read them
    # Metrics and health port of `cdcflow hbase run` (null: none).
    hbase_port: int | None = Field(default=None, ge=0, le=65535)
    # Metrics and health port of `cdcflow mysql run` (null: none).
    mysql_port: int | None = Field(default=None, ge=0, le=65535)
    # Metrics and health port of `cdcflow pipeline run` (null: none).
    pipeline_port: int | None = Field(default=None, ge=0, le=65535)
    # Metrics port of `cdcflow verify --every` (null: none).
    verify_port: int | None = Field(default=None, ge=0, le=65535)


class UiConfig(_Strict):
    """`cdcflow ui`: the status page. It reads what the processes publish (metrics endpoints, the sinks'
    progress files, the verify topic, HBase's peer state), so it can run on another machine."""

    # Address the status page listens on.
    host: str = "127.0.0.1"
    port: int = Field(default=8790, ge=0, le=65535)  # 0: any free port (printed)
    # Metrics URLs to read (http://host:port/metrics); empty: this config's metrics ports on metrics.host.
    targets: tuple[str, ...] = ()
    # How often the page reads the metrics endpoints.
    scrape_seconds: float = Field(default=5.0, gt=0, le=300)
    # How often the slower sources are read: progress files, the verify topic, dead letters, the peer's state.
    state_seconds: float = Field(default=30.0, gt=0, le=3600)
    # How much history the charts keep.
    history_minutes: int = Field(default=60, ge=1, le=24 * 60)
    stalled_after_s: float = Field(default=120.0, gt=0)  # a capture with a backlog and no progress this long


class VerifyConfig(_Strict):
    # Every result of `cdcflow verify` (one-shot or --every) is published here (compacted, keyed by check),
    # where the status page reads the latest of each.
    topic: str = "cdcflow-verify"


class CdcflowConfig(_Strict):
    stack: StackConfig = StackConfig()
    demo: DemoConfig = DemoConfig()
    kafka: KafkaConfig = KafkaConfig()
    hbase: HBaseSourceConfig = HBaseSourceConfig()
    mysql: MySqlSourceConfig = MySqlSourceConfig()
    pipeline: PipelineConfig = PipelineConfig()
    metrics: MetricsConfig = MetricsConfig()
    ui: UiConfig = UiConfig()
    verify: VerifyConfig = VerifyConfig()


def _apply_env(raw: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """CDCFLOW__STACK__HOME=/x sets raw["stack"]["home"] = "/x" (values parsed as YAML scalars)."""
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__") if p]
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {'.'.join(path)} is not a section")
        node[path[-1]] = yaml.safe_load(value)
    return raw


def load_config(path: Path | None, environ: dict[str, str] | None = None) -> CdcflowConfig:
    """Read, override from the environment and validate. Every problem becomes one ConfigError."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config {path} must be a mapping at the top level")
        raw = loaded or {}
    raw = _apply_env(raw, dict(os.environ if environ is None else environ))
    try:
        return CdcflowConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid config{f' {path}' if path else ''}: {problems}") from exc
