"""Prometheus metrics of the MySQL capture, read from its counters when scraped.

The capture counts in plain integers on its one thread (`CaptureStats`); this collector turns them
into metrics at scrape time, so the binlog loop pays nothing per row for being observable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from cdcflow.sources.mysql.capture import MySqlCapture

# (metric name without cdcflow_mysql_ and _total, CaptureStats field, help)
COUNTERS = (
    ("events", "events", "Change events published (row changes, snapshot rows and DDL)"),
    ("transactions", "transactions", "Event groups (transactions) read to their end"),
    ("ddl", "ddl", "DDL statements published"),
    ("tables_emptied", "truncates", "Tables emptied by a DDL (TRUNCATE, DROP, RENAME, a new key): op t events"),
    ("ddl_rereads", "ddl_rereads", "Tables read again because a DDL changed their rows without row events"),
    ("ddl_not_followed", "ddl_not_followed", "DDLs that changed rows the capture could not read again: sinks differ"),
    ("snapshot_rows", "snapshot_rows", "Rows published by the snapshot"),
    ("rolled_back_rows", "rolled_back_rows", "Rows written then undone by ROLLBACK (TO SAVEPOINT) or XA ROLLBACK"),
    ("xa_prepared", "xa_prepared", "XA transactions prepared that changed captured tables"),
    ("xa_committed", "xa_committed", "XA transactions committed"),
    ("xa_rolled_back", "xa_rolled_back", "XA transactions rolled back"),
    ("oversize", "oversize", "Changes too large for one record, published as a marker and parts"),
    ("dead_letters", "dead_letters", "Undecodable binlog events dead-lettered with their raw bytes"),
    ("restarts", "restarts", "Streams resumed from the last checkpoint after an error"),
    ("checkpoints", "checkpoints", "Checkpoints written"),
    ("signals", "signals", "Signal rows acted on (snapshot.signal_table)"),
    ("signals_refused", "signals_refused", "Signal rows refused (logged with the reason)"),
)


class MySqlCaptureCollector(Collector):
    """The metrics of one capture, labelled with its source name."""

    def __init__(self, capture: MySqlCapture) -> None:
        self.capture = capture

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self.capture.stats
        source = self.capture.cfg.name
        for name, attr, text in COUNTERS:
            family = CounterMetricFamily(f"cdcflow_mysql_{name}", text, labels=["source"])
            family.add_metric([source], float(getattr(stats, attr)))
            yield family
        gauges = {
            "xa_waiting": ("Prepared XA transactions not completed yet", float(stats.xa_waiting)),
            "streaming": ("1 while the binlog stream is open", 1.0 if self.capture.stream_open else 0.0),
        }
        snapshot = self.capture.snapshot
        gauges["snapshot_pending_tables"] = (
            "Tables whose snapshot (configured or asked for by a signal) is not done yet",
            float(snapshot.pending_tables if snapshot is not None else 0),
        )
        if stats.last_source_ts_ms:
            gauges["last_source_timestamp_seconds"] = (
                "Source (commit) time of the newest change read", stats.last_source_ts_ms / 1000,
            )  # fmt: skip
            gauges["lag_seconds"] = (
                "Now minus the source time of the newest change read (grows while the source is idle)",
                max(0.0, time.time() - stats.last_source_ts_ms / 1000),
            )
        if stats.checkpoint is not None and stats.checkpoint.ts_ms:
            gauges["checkpoint_timestamp_seconds"] = (
                "Source time of the newest checkpoint written (everything before it is in Kafka)",
                stats.checkpoint.ts_ms / 1000,
            )
        for name, (text, value) in gauges.items():
            gauge = GaugeMetricFamily(f"cdcflow_mysql_{name}", text, labels=["source"])
            gauge.add_metric([source], value)
            yield gauge
        differ = GaugeMetricFamily(
            "cdcflow_mysql_table_not_followed",
            "1 for a table whose rows a DDL changed without row events and the capture could not read again: its "
            "sinks differ until it is snapshotted (the capture's log says how)",
            labels=["source", "table"],
        )
        for table in sorted(stats.not_followed):
            differ.add_metric([source, table], 1.0)
        yield differ
        out = self.capture.cfg.output
        info = GaugeMetricFamily("cdcflow_mysql_output_info", "The format the capture writes its events in (always 1)",
                                 labels=["source", "format", "serialization"])  # fmt: skip
        info.add_metric([source, out.format, out.serialization], 1.0)
        yield info
