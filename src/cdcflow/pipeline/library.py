"""cdcflow's apply as a library for a user's own PySpark job; re-exported by the package root (`cdcflow.__all__`).

Four ways in, from the smallest:
- `parse_changes(records)`: cdcflow's Kafka records (`read_changes`) as change events, one row per record;
- `SinkApplier`: a foreachBatch function that applies each micro-batch of the user's own streaming query to one
  sink, exactly-once as in cdcflow's pipeline (dead letters, oversize changes, progress and metrics included);
- `Pipeline` / `run_pipeline`: cdcflow's whole pipeline (a query per sink or group, supervised and restarted)
  on the user's existing SparkSession;
- `current_view`, `history`, `as_of` and `change_log`: the Delta sink's tables, read by catalog name or path.

The session comes from the user, built with `spark_conf()`: cdcflow never creates or stops it here.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.errors import ConfigError
from cdcflow.jars import phoenix as phoenix_jars
from cdcflow.pipeline.apply import SinkBatches, checkpoint_query_id
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.debezium_input import transcoded
from cdcflow.pipeline.envelope import parse
from cdcflow.pipeline.kafka_source import read_records
from cdcflow.pipeline.progress import PROGRESS_FILE
from cdcflow.pipeline.queries import QuerySink
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.session import LOCAL_CONF, check_session, extra_jars, local_driver_conf, session_conf
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.delta import catalog as delta_catalog
from cdcflow.pipeline.sinks.delta import log as delta_log
from cdcflow.pipeline.sinks.delta import views
from cdcflow.pipeline.sinks.delta.cut import reads as cut_reads
from cdcflow.pipeline.sinks.delta.history import reads as history_reads
from cdcflow.pipeline.sinks.registry import make_sink

log = logging.getLogger(__name__)

DEFAULT_TOPICS = r"cdcflow\..*"


def spark_conf(
    master: str | None = None, phoenix: bool = False, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The settings a SparkSession needs for cdcflow: Spark's Kafka connector and Delta Lake as jars (resolved
    by cdcflow from Maven Central, cached), Delta's extension and catalog, the UTC time zone, and the settings
    cdcflow's own pipeline runs with. `master`: set it too, and for a local one (`local[N]`) size the shuffles
    and Delta's log reads to its cores, as `cdcflow pipeline run` does (Spark's defaults of 200 and 50 tasks
    cost most of a small fold on a few cores). `phoenix`: the Phoenix client jars too. `extra` wins over
    cdcflow's, as in `pipeline.spark_conf`. Use: `SparkSession.builder.config(map=cdcflow.spark_conf("local[2]"))`.
    """
    jars = [str(j) for j in extra_jars()]
    if phoenix:
        jars += [str(j) for j in (*phoenix_jars.client_jars(), phoenix_jars.helper_jar())]
    conf: dict[str, str] = {}
    if master:
        conf["spark.master"] = master
        local = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]|local", master)
        if local:
            cores = local.group(1) if local.group(1) and local.group(1) != "*" else str(os.cpu_count() or 1)
            conf |= {"spark.sql.shuffle.partitions": cores, "spark.databricks.delta.snapshotPartitions": cores,
                     **LOCAL_CONF}  # fmt: skip
    conf |= session_conf(dict(extra or {}))
    if master and master.startswith("local"):
        conf |= local_driver_conf(dict(extra or {}))
    given_jars = conf.get("spark.jars")
    conf["spark.jars"] = ",".join([*jars, *([given_jars] if given_jars else [])])
    return conf


def read_changes(
    spark: SparkSession,
    endpoints: Endpoints,
    topics: str = DEFAULT_TOPICS,
    starting_offsets: str = "earliest",
    max_offsets_per_trigger: int | None = 200_000,
) -> DataFrame:
    """A streaming DataFrame of the Kafka records of cdcflow's topics (`topics`: a Java regex matched against
    whole topic names), read as cdcflow's pipeline reads them. Hand it to `SinkApplier`, or to
    `parse_changes` for the events themselves."""
    return read_records(spark, endpoints, topics, max_offsets_per_trigger, starting_offsets)


def parse_changes(records: DataFrame, endpoints: Endpoints | None = None) -> DataFrame:
    """Kafka records of cdcflow's topics (batch or streaming) as change events, one row per record: `topic`,
    `partition`, `offset`, `kafka_key`, the event's fields (`op`, `key`, `before`, `after`, `cells`,
    `source`, `ts_ms`, ...; docs/events.md), and `problem`: null for a change event, else why the record is
    not one (malformed JSON, another schema, a heartbeat, an oversize marker), with the record's bytes in
    `raw`. Nothing is dropped: filter on `problem` yourself. Not deduplicated (a change delivered twice is two
    rows with the same `source.pos`). Topics in the debezium format are read when `endpoints` names them."""
    if endpoints is not None and endpoints.debezium_topics:
        records = transcoded(records, endpoints.debezium_topics, endpoints.schema_registry_url,
                             endpoints.debezium_heartbeat_topics)  # fmt: skip
    return parse(records)


class SinkApplier:
    """Applies the micro-batches of a user's streaming query of cdcflow's Kafka records to one sink,
    exactly-once in effect, as cdcflow's pipeline does: each batch parsed, deduplicated when the sink asks,
    its malformed records written to the dead-letter topic, applied, its oversize changes put together and
    applied, then the sink's progress document and metrics updated. A batch Spark replays after a crash
    (same id, same records) leaves the sink as it was.

    The query's checkpoint must be `applier.checkpoint` (`<checkpoint_root>/<sink name>`): the sink's exactly-
    once guards are keyed by the query id Spark keeps there, and its progress document lives there too.

        with cdcflow.SinkApplier(spark, sink, endpoints, "/data/checkpoints") as apply:
            query = (cdcflow.read_changes(spark, endpoints).writeStream.foreachBatch(apply)
                     .option("checkpointLocation", apply.checkpoint).start())
            query.awaitTermination()

    Leaving the block (or `close()`) releases what the sink holds; `flush()` first finishes deferred work (the
    Delta sink folds its pending changes, so its state tables are current).
    """

    def __init__(
        self,
        spark: SparkSession,
        sink: SinkConfig,
        endpoints: Endpoints,
        checkpoint_root: str | Path,
        dead_letter_topic: str | None = None,
    ) -> None:
        if not isinstance(sink, SinkConfig):
            raise ConfigError(f"SinkApplier: sink is a cdcflow.SinkConfig, not {type(sink).__name__}")
        root = Path(checkpoint_root)
        self.spark = spark
        self.checkpoint = str(root / sink.name)
        pipeline = PipelineConfig(sinks=(sink,), dead_letter_topic=dead_letter_topic or endpoints.dead_letter_topic)
        self.endpoints = Endpoints.of(endpoints).with_pipeline(pipeline.dead_letter_topic, str(root))
        self.sink: Sink = make_sink(sink, self.endpoints)
        check_session(spark, self.sink.jars())
        self._batches = SinkBatches(pipeline, self.endpoints, root)
        self._member = QuerySink(sink.name, self.sink, sink.topics or ".*")
        progress = root / sink.name / PROGRESS_FILE
        if progress.exists():  # totals carried across restarts, as the pipeline does
            self._member.doc = json.loads(progress.read_text())
        self._lock = threading.Lock()
        self._opened = False

    def __call__(self, records: DataFrame, batch_id: int) -> None:
        """foreachBatch's function: apply one micro-batch of Kafka records (key, value, topic, partition, offset)."""
        with self._lock:  # Spark calls one batch at a time per query; a second query on one applier would not
            started = time.time()
            if not self._opened:
                self.sink.open(self.spark)
                self._opened = True
            if self.sink.query_id is None:
                self.sink.query_id = checkpoint_query_id(Path(self.checkpoint))
                if self.sink.query_id is None:
                    raise ConfigError(
                        f"sink {self.sink.name}: no streaming query checkpoint at {self.checkpoint}: start the query "
                        "with .option('checkpointLocation', applier.checkpoint)"
                    )
            m = self._member
            applied = self._batches.apply_one(m, records, batch_id, F.lit(True),
                                              self._batches.heartbeats_only(records))  # fmt: skip
            self._batches.note_applied(m, batch_id, started, applied)

    def flush(self) -> None:
        """Finish what the sink deferred (the Delta sink folds its pending changes into its state tables)."""
        with self._lock:
            self.sink.flush(self.spark)
            self._batches.record(self._member, **self.sink.status())

    def close(self) -> None:
        self.sink.close()

    def __enter__(self) -> SinkApplier:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def run_pipeline(
    spark: SparkSession,
    config: PipelineConfig,
    endpoints: Endpoints,
    checkpoint_root: str | Path,
    available_now: bool = False,
    stop: threading.Event | None = None,
    max_failures: int = 5,
) -> dict[str, str]:
    """cdcflow's pipeline on the caller's session: a streaming query per sink (or group), supervised and
    restarted with back-off, until `stop` is set (or, with `available_now`, until every query applied what
    Kafka held and the Delta sinks folded it). Returns each sink's outcome: "done" or "failed: <error>".
    The session is left running."""
    return Pipeline(config, endpoints, Path(checkpoint_root), spark=spark).run(available_now, stop, max_failures)


def current_view(spark: SparkSession, table: str, include_deleted: bool = False) -> DataFrame:
    """A Delta sink's table as of its last applied batch, by the state table's path (`/data/delta/src/db/t`,
    `s3a://...`) or by its name in the session's catalog (`db.table`, the view the sink registered)."""
    if "/" in table or ":" in table:
        return views.current_view(spark, table, include_deleted)
    if include_deleted:
        raise ConfigError(f"{table}: include_deleted needs the state table's path (the catalog view hides them)")
    return spark.table(table)


def history(spark: SparkSession, table: str, track_history_on: Sequence[str] | None = None) -> DataFrame:
    """Every version of a MySQL table's rows (SCD type 2) kept by a Delta sink with `history` on: the source's
    columns, `_cdcflow_op`, `_cdcflow_valid_from_pos`/`_cdcflow_valid_from` (source time) and
    `_cdcflow_valid_to_pos`/`_cdcflow_valid_to` (null while current), `_cdcflow_current`; exact as of the last
    applied batch. `table`: the state table's path or a name the sink registered (`db.table`); the catalog also
    holds this as `db.table_history`. `track_history_on`: only changes of these columns start a version
    (default: the table's option; none: every change)."""
    return spark.sql(history_reads.history_sql(spark, _state_path(spark, table), track_history_on))


def as_of(
    spark: SparkSession,
    table: str,
    *,
    position: Sequence[int] | None = None,
    gtid: str | None = None,
    source_time: datetime | int | None = None,
) -> DataFrame:
    """A MySQL table kept with `history` as it was at one point of its source, in the columns of its current
    view: after the transaction `gtid` (MariaDB `domain-server-sequence`; MySQL: the executed GTID set then, as
    `@@gtid_executed` shows it), at a source `position` (`_cdcflow_pos` values compare element by element), or
    at a `source_time` (every change whose source time is at most it; a datetime, or epoch milliseconds). Give
    one of the three."""
    if sum(x is not None for x in (position, gtid, source_time)) != 1:
        raise ValueError("as_of takes one of position, gtid or source_time")
    path = _state_path(spark, table)
    if gtid is not None:
        position = history_reads.gtid_position(gtid)
    if source_time is not None:
        ms = source_time if isinstance(source_time, int) else _epoch_ms(source_time)
        return spark.sql(history_reads.as_of_sql(spark, path, source_ts_ms=ms))
    return spark.sql(history_reads.as_of_sql(spark, path, position=position))


def consistent_cut(spark: SparkSession, path: str, source: str | None = None) -> cut_reads.ConsistentCut:
    """The newest transaction of a MySQL source that a Delta sink with `consistent_cut` holds whole, with every one
    before it, in every table it takes: its GTID, position and source time. `path`: the sink's path (or its
    log_path); `source` may be left out when the sink reads one MySQL source."""
    return cut_reads.consistent_cut(spark, path, source)


def at_cut(spark: SparkSession, path: str, source: str | None = None,
           cut: cut_reads.ConsistentCut | None = None) -> dict[str, DataFrame]:  # fmt: skip
    """Every MySQL table of the source the sink holds ("db.table" -> DataFrame, in its current view's columns) as of
    the sink's consistent cut (or `cut`: the oldest of several sinks' cuts reads each of them at one point)."""
    return cut_reads.at_cut(spark, path, source, cut)


def _epoch_ms(at: datetime) -> int:
    if at.tzinfo is None:
        raise ValueError(f"{at}: give a time with its zone (source times are instants)")
    return int(at.timestamp() * 1000)


def _state_path(spark: SparkSession, table: str) -> str:
    return table if "/" in table or ":" in table else delta_catalog.state_path_of(spark, table)


def change_log(spark: SparkSession, path: str) -> DataFrame:
    """Every change a Delta sink logged (its `_changes` table at `path`), newest fold or not."""
    return delta_log.changes(spark, path)


__all__ = ["DEFAULT_TOPICS", "Pipeline", "SinkApplier", "as_of", "at_cut", "change_log", "consistent_cut",
           "current_view", "history", "parse_changes", "read_changes", "run_pipeline", "spark_conf"]  # fmt: skip
