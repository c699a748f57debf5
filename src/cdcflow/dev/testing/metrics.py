"""A process's Prometheus metrics, read as a test or benchmark reads them: one sample's value."""

from __future__ import annotations

import urllib.request


def metric_value(port: int, sample: str) -> float | None:
    """The value of `sample` (a metric name with its labels as the page prints them, e.g.
    'cdcflow_hbase_calls_total{outcome="ok"}') on http://127.0.0.1:<port>/metrics; None if the page has none."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[1])
    return None
