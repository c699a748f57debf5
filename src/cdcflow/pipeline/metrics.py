"""Prometheus metrics of the pipeline, one series per sink (query)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

ROWS = Counter("cdcflow_pipeline_rows_total", "Change events applied", ["sink"])
ROWS_PER_SECOND = Gauge(
    "cdcflow_pipeline_processed_rows_per_second", "Kafka records processed per second in the last batch", ["sink"]
)
BATCH_SECONDS = Gauge("cdcflow_pipeline_batch_seconds", "Duration of the last micro-batch", ["sink"])
LAG_SECONDS = Gauge(
    "cdcflow_pipeline_lag_seconds", "Now minus the source time of the newest event applied (at apply time)", ["sink"]
)
OFFSETS_BEHIND = Gauge("cdcflow_pipeline_offsets_behind", "Kafka records not yet read (max over partitions)", ["sink"])
DEAD_LETTERS = Counter(
    "cdcflow_pipeline_dead_letters_total", "Malformed records this sink's query dead-lettered", ["sink"]
)
FAILURES = Counter("cdcflow_pipeline_failures_total", "Query failures (each followed by a restart)", ["sink"])
TOPIC_RESTARTS = Counter(
    "cdcflow_pipeline_topic_restarts_total", "--available-now queries restarted because topics appeared", ["sink"]
)
DELTA_CONFLICTS = Counter(
    "cdcflow_pipeline_delta_conflicts_total", "Delta tables merged again because another writer changed them", ["sink"]
)
TRUNCATES = Counter(
    "cdcflow_pipeline_truncates_total",
    "Source truncates (op t) a sink applied: every row of the table older than the truncate removed",
    ["sink", "table"],
)
OVERSIZE_APPLIED = Counter(
    "cdcflow_pipeline_oversize_applied_total",
    "Changes too large for one Kafka record, put back together from their parts and applied",
    ["sink"],
)
UNAPPLIED = Counter(
    "cdcflow_pipeline_unapplied_total",
    "Changes a sink could not apply (an oversize change whose parts are gone): dead-lettered, never applied",
    ["sink", "table"],
)
DELTA_RESHAPES = Counter(
    "cdcflow_pipeline_delta_reshapes_total",
    "Typed MySQL Delta tables rewritten in a new shape (columns dropped or renamed, a type Delta cannot widen)",
    ["sink"],
)
DELTA_SHAPE_CHECKS = Counter(
    "cdcflow_pipeline_delta_shape_checks_total",
    "Typed MySQL batches that did not fit the known table shape and were checked against the schema history",
    ["sink"],
)
DELTA_HISTORY_LATE_KEYS = Counter(
    "cdcflow_pipeline_delta_history_late_keys_total",
    "Keys whose changes came late or twice, so a history fold merged their versions instead of appending them",
    ["sink"],
)
DELTA_HISTORY_REDONE_APPENDS = Counter(
    "cdcflow_pipeline_delta_history_redone_appends_total",
    "History appends done again after a fold stopped between its append and its record (the held versions left out)",
    ["sink"],
)
DELTA_HISTORY_READ_BEFORE_REWRITES = Counter(
    "cdcflow_pipeline_delta_history_read_before_rewrites_total",
    "State commits the history had not read, read before a DDL rewrote the table (a fold had stopped before its "
    "history append)",
    ["sink"],
)
FAILING = Gauge(
    "cdcflow_pipeline_failing", "1 while the sink's query is failing (retrying), 0 once a batch applies", ["sink"]
)
LAST_BATCH_TIME = Gauge(
    "cdcflow_pipeline_last_batch_timestamp_seconds", "When the sink last applied a batch (Unix seconds)", ["sink"]
)
LAST_SOURCE_TIME = Gauge(
    "cdcflow_pipeline_last_source_timestamp_seconds", "Source time of the newest event applied (Unix seconds)", ["sink"]
)
# Merge-on-read Delta sinks (docs/pipeline.md "Folds"): per state table, labelled by its path.
DELTA_PENDING_ROWS = Gauge(
    "cdcflow_pipeline_delta_pending_rows", "Changes logged but not yet folded into the state table", ["sink", "table"]
)
DELTA_FOLD_SECONDS = Gauge(
    "cdcflow_pipeline_delta_fold_seconds", "Duration of the table's last fold", ["sink", "table"]
)
DELTA_LAST_FOLD_TIME = Gauge(
    "cdcflow_pipeline_delta_last_fold_timestamp_seconds",
    "When the table was last folded (Unix seconds)",
    ["sink", "table"],
)
DELTA_FOLDS = Counter("cdcflow_pipeline_delta_folds_total", "Folds of a state table that succeeded", ["sink"])
DELTA_FOLD_FAILURES = Counter(
    "cdcflow_pipeline_delta_fold_failures_total", "Folds that failed (their changes stay pending)", ["sink"]
)
