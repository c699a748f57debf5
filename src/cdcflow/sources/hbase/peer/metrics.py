"""Prometheus metrics of the replication peer."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

CALLS = Counter("cdcflow_hbase_calls_total", "ReplicateWALEntry calls answered", ["outcome"])
CLUSTER_CALLS = Counter(
    "cdcflow_hbase_cluster_calls_total",
    "Master-side calls of HBase 3.0 sources answered (cluster id, servers)",
    ["method"],
)
DECODED = Counter(
    "cdcflow_hbase_decoded_calls_total",
    "Calls decoded and encoded, by path: native (the compiled hot path) or python (filters, hints, large records)",
    ["path"],
)
ENTRIES = Counter("cdcflow_hbase_wal_entries_total", "WAL entries received")
ROWS = Counter("cdcflow_hbase_rows_total", "Row change events acknowledged by Kafka")
CELLS = Counter("cdcflow_hbase_cells_total", "Cells in acknowledged events")
BYTES = Counter("cdcflow_hbase_event_bytes_total", "Bytes of acknowledged event values")
ERRORS = Counter("cdcflow_hbase_errors_total", "Failed calls and connections", ["kind"])
CALL_LATENCY = Histogram(
    "cdcflow_hbase_call_seconds", "Time from call received to answer sent",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)  # fmt: skip
WAL_TO_ACK = Histogram(
    "cdcflow_hbase_wal_to_kafka_ack_seconds", "WAL write time of the oldest entry in a call to Kafka acknowledgement",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900),
)  # fmt: skip
INFLIGHT_BYTES = Gauge("cdcflow_hbase_inflight_bytes", "Bytes of calls being processed")
CONNECTIONS = Gauge("cdcflow_hbase_connections", "Open RPC connections")
REGISTERED = Gauge("cdcflow_hbase_registered", "1 while this instance's rs znode exists (HBase can find it)")
REGISTRATIONS = Counter(
    "cdcflow_hbase_registrations_total", "rs znode creations (the first, then after a ZooKeeper session expiry)"
)
TABLES_EMPTIED = Counter(
    "cdcflow_hbase_tables_emptied_total",
    "Source tables found truncated or deleted (hbase:meta), published as op t events",
    ["cause"],
)
OVERSIZE = Counter("cdcflow_hbase_oversize_total", "Changes too large for their topic, published as marker + parts")
INSTANCES = Gauge("cdcflow_hbase_instances", "Peer instances registered in ZooKeeper (this one included), every 2 s")
ACKED_WAL_TIME = Gauge(
    "cdcflow_hbase_acknowledged_wal_timestamp_seconds",
    "WAL write time of the newest call's oldest entry acknowledged by Kafka (Unix seconds): the capture's position",
)
LAST_CALL_TIME = Gauge("cdcflow_hbase_last_call_timestamp_seconds", "When the last call was answered (Unix seconds)")
ROWS_READ_BACK = Counter(
    "cdcflow_hbase_rows_read_back_total", "Rows read back from the source for the upsert output format (every read)"
)
ROWS_READ_AGAIN = Counter(
    "cdcflow_hbase_rows_read_again_total",
    "Upsert output format: rows read again because the first read did not show the call's last edit yet",
)
ROWS_UNCONFIRMED = Counter(
    "cdcflow_hbase_rows_unconfirmed_total",
    "Upsert output format: rows published as read after hbase.output.read_attempts reads that did not show the "
    "call's last edit (a later edit changed the row; its call reads it again)",
)
OUTPUT_INFO = Gauge(
    "cdcflow_hbase_output_info", "The format the peer writes (always 1; hbase.output)", ["format", "serialization"]
)
