"""Each sink type's options, typed and validated when the config is loaded (a typo such as
`max_version` is an error naming the known options, not a silent default).

`table_map` keys have one syntax in every sink: "db.table" (HBase: "namespace.table"), or
"<source name>/db.table" to map one source's table when two sources have tables of the same
name; the source-specific entry wins.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cdcflow.events.json_codec import VALUE_ENCODINGS

TABLE_MAP_KEY = re.compile(r"^(?:(?P<source>[A-Za-z0-9_.\-]+)/)?(?P<db>[^./:]+)\.(?P<table>[^/:]+)$")


class SinkOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_table_map(value: dict[str, str], option: str = "table_map") -> dict[str, str]:
    bad = [k for k in value if not TABLE_MAP_KEY.match(k)]
    if bad:
        hints = []
        for k in bad:
            if ":" in k and "/" not in k:
                hints.append(f"{k!r} (write {k.replace(':', '.', 1)!r})")
            elif "." not in k:
                hints.append(f"{k!r} (write 'default.{k}' for HBase's default namespace)")
            else:
                hints.append(repr(k))
        raise ValueError(
            f"{option} keys are 'db.table' or '<source name>/db.table' (HBase: 'namespace.table'): " + ", ".join(hints)
        )
    return value


class _Mapped(SinkOptions):
    # Targets chosen per source table: {"db.table" or "<source name>/db.table" (HBase: "namespace.table"):
    # target}: an HBase table, a Delta state path, a Phoenix "SCHEMA.TABLE"; unmapped tables get the default.
    table_map: dict[str, str] = {}
    # A source table dropped or renamed away (MySQL): empty its target too (the source has no rows) or keep the
    # rows it had (a history the source no longer has). Truncates, and a table refilled or rekeyed, always apply.
    on_drop: Literal["empty", "keep"] = "empty"

    @field_validator("table_map")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_table_map(value)


class HBaseSinkOptions(_Mapped):
    zk_quorum: str | None = None  # the target cluster's ZooKeeper; null: the source's
    table_suffix: str = "_copy"  # target "<table><suffix>" unless table_map says otherwise
    # A target table that does not exist is created with the families its events carry (and any
    # listed here), so a table created at the source while the pipeline runs does not stop the sink.
    create_tables: bool = True
    # Column families a table created by the sink gets besides the ones its events carry.
    create_families: tuple[str, ...] = ()
    create_max_versions: int = Field(default=1, ge=1)  # VERSIONS of the families it creates
    # The target's families get their source family's TTL (at creation, and again within a minute of a change),
    # so cells expire in the copy as in the source (expiry writes nothing to the WAL a peer could ship).
    follow_ttl: bool = True


class TableHistory(SinkOptions):
    """History of one MySQL table in a Delta sink (`history_tables`)."""

    enabled: bool = True
    # Columns whose changes start a new version; a change of other columns only updates the version it falls in
    # (SCD type 2 with TRACK HISTORY ON). Null: every column.
    track_history_on: tuple[str, ...] | None = None

    @field_validator("track_history_on")
    @classmethod
    def _columns(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("track_history_on lists at least one column (null: every column)")
        return value


class DeltaStateOptions(_Mapped):
    path: str | None = None  # tables at <path>/<source name>/<db>/<table>; null: <stack home>/pipeline/delta
    max_versions: int = Field(default=1, ge=1)  # versions per column readers see (puts, verify)
    # Unmasked versions kept per column, so a version Delete arriving in a later batch reveals the
    # one below it (docs/pipeline.md, "Exactness"). At least max_versions; null: max(max_versions, 8).
    retained_versions: int | None = Field(default=None, ge=1)
    typed_columns: dict[str, str] = {}  # {"cf:qualifier": encoding}: decoded copies of visible values
    # MySQL tables: "typed" (the source's columns and types, from the schema history) or "json"
    # (key and row image as JSON text, the layout before typed tables existed).
    mysql_layout: Literal["typed", "json"] = "typed"
    schema_history_topic: str | None = None  # null: the MySQL capture's (mysql.schema_history_topic)
    # Merge-on-read (decision 0014): every batch appends to the change log; a table's changes are
    # folded into its state table once `fold_rows` are pending or the oldest is `fold_interval_s` old.
    log_path: str | None = None  # null: <path>/_changes
    # Fold a table once this many of its changes are pending.
    fold_rows: int = Field(default=200_000, ge=1)
    # Fold a table once its oldest pending change is this old.
    fold_interval_s: float = Field(default=60.0, gt=0)
    # At most this share of the time goes to folding: after folds that took R s, the next wait at least
    # R * (1 - share) / share (a table with fold_rows pending does not wait). 1: fold whenever due.
    fold_time_share: float = Field(default=0.25, gt=0, le=1)
    # The log gets small files every batch: OPTIMIZE it (in the fold thread) every this many log
    # versions; 0: never (then run OPTIMIZE on your own schedule).
    log_optimize_every: int = Field(default=100, ge=0)
    # Each table's current view as <prefix><db>.<table> and its state table as <prefix><db>.<table>_state
    # in the Spark session's catalog (a Hive metastore keeps them for other jobs: pipeline.spark_conf).
    register_in_catalog: bool = True
    # State and history tables get deletion vectors once they are large (deletion_vectors_from_bytes): a fold's
    # MERGE then marks the rows it replaces instead of rewriting their files, so its cost follows the changes, not
    # the table. Readers of such a table need Delta reader version 3 (Delta Lake 2.3+, Databricks, Trino, ...).
    deletion_vectors: bool = True
    # The size (bytes of a table's files, from Delta's checksum) from which a table gets deletion vectors, turned on
    # after the fold that leaves it past it. Below it a fold rewrites the few files faster than it writes them
    # (measured: 500 updates folded into 100k rows, 2.0 MB: 3.2-3.4 s without, 4.2 s with; they cost the same near
    # 300k rows, 5.6 MB; 1M rows: 5.9-6.1 s without, 3.9-4.2 s with). 0: from a table's creation.
    deletion_vectors_from_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    # Prefix of the catalog database names (<prefix><db>).
    catalog_database_prefix: str = Field(default="", pattern=r"^[A-Za-z0-9_]*$")
    # History (SCD type 2) of MySQL tables: every version of a row with the source position and time it was
    # valid from and to, at <state path>.cdcflow_history, named <prefix><db>.<table>_history; kept by the folds.
    history: bool = False
    # Per table ("db.table" or "<source name>/db.table"), over `history`: {enabled, track_history_on}.
    history_tables: dict[str, TableHistory] = {}
    # Keep the consistent cut of each MySQL source whose capture writes a transaction topic
    # (mysql.output.transaction_topic): the newest source transaction this sink holds whole, with every one
    # before it; its tables read as of it (cdcflow.at_cut) show the source as it was after that commit. Turns
    # history on for the sink's MySQL tables (history_tables may turn a table's off: it is then left out).
    consistent_cut: bool = False
    # Seconds between two updates of the cut (each reads the new transaction records and counts the new changes).
    consistent_cut_interval_s: float = Field(default=10.0, gt=0)

    @field_validator("typed_columns")
    @classmethod
    def _encodings(cls, value: dict[str, str]) -> dict[str, str]:
        bad = {c: e for c, e in value.items() if e not in VALUE_ENCODINGS or ":" not in c}
        if bad:
            raise ValueError(f"typed_columns {bad}: keys are 'family:qualifier', encodings one of {VALUE_ENCODINGS}")
        return value

    @field_validator("history_tables")
    @classmethod
    def _history_keys(cls, value: dict[str, TableHistory]) -> dict[str, TableHistory]:
        _check_table_map({k: "" for k in value}, "history_tables")
        return value

    def history_of(self, source: str, db: str, table: str) -> TableHistory | None:
        """The table's history options, None when it keeps no history."""
        for key in (f"{source}/{db}.{table}", f"{db}.{table}"):
            if key in self.history_tables:
                chosen = self.history_tables[key]
                return chosen if chosen.enabled else None
        return TableHistory() if self.history or self.consistent_cut else None

    @property
    def kept_versions(self) -> int:
        return self.retained_versions if self.retained_versions is not None else max(self.max_versions, 8)

    @model_validator(mode="after")
    def _retained(self) -> DeltaStateOptions:
        if self.retained_versions is not None and self.retained_versions < self.max_versions:
            raise ValueError(f"retained_versions ({self.retained_versions}) must be at least max_versions "
                             f"({self.max_versions})")  # fmt: skip
        return self


class DeltaChangelogOptions(SinkOptions):
    # Delta table every change is appended to (required).
    path: str


class ParquetOptions(SinkOptions):
    # Directory the Parquet files go to (required).
    path: str


class PhoenixOptions(_Mapped):
    url: str | None = None  # jdbc:phoenix:<zk>:<znode>; null: the local stack's
    tables: tuple[str, ...] = ("*",)  # "db.table" patterns (fnmatch) to apply
    # upper (unquoted SQL finds the tables) or preserve (the exact MySQL case).
    name_case: Literal["upper", "preserve"] = "upper"
    # Create missing tables (and add new columns) from the schema history.
    create_tables: bool = False
    # The MySQL capture's schema history; null: mysql.schema_history_topic.
    schema_history_topic: str | None = None
    # Rows each executor's connection sends to Phoenix per commit (Phoenix buffers them until then).
    commit_rows: int = Field(default=2000, ge=1, le=100_000)

    @field_validator("url")
    @classmethod
    def _jdbc(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("jdbc:phoenix:"):
            raise ValueError(f"url must start with jdbc:phoenix:, got {value!r}")
        return value


class ConsoleOptions(SinkOptions):
    # Rows printed per batch.
    rows: int = Field(default=20, ge=1)


SINK_OPTIONS: dict[str, type[SinkOptions]] = {
    "hbase": HBaseSinkOptions,
    "delta": DeltaStateOptions,
    "delta_changelog": DeltaChangelogOptions,
    "parquet": ParquetOptions,
    "phoenix": PhoenixOptions,
    "console": ConsoleOptions,
}


def sink_options(sink_type: str, options: dict[str, Any]) -> SinkOptions:
    return SINK_OPTIONS[sink_type].model_validate(options)
