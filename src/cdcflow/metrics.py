"""Serving Prometheus metrics, the same way in every process (docs/operations.md lists the names).

Conventions: every name starts with `cdcflow_<process>_` (hbase, mysql, pipeline, verify); counters
end in `_total`, durations are in seconds (`_seconds`), times are Unix seconds (`_timestamp_seconds`);
labels name the thing measured (`sink`, `source`, `check`), never a value that grows without bound.
"""

from __future__ import annotations

import logging

from prometheus_client import start_http_server

from cdcflow.errors import ConfigError

log = logging.getLogger(__name__)


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Serve this process's metrics on http://host:port/metrics (port 0: any free one); the port."""
    try:
        server, _thread = start_http_server(port, addr=host)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    bound = int(server.server_port)
    log.info("metrics on http://%s:%d/metrics", host, bound)
    return bound
