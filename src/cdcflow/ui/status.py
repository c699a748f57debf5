"""What the status page shows, computed from what the processes publish.

Pure functions of their inputs (metrics text, progress documents, verify results, the peer's state
in HBase), so they are tested without a browser or a server; `cdcflow.ui.collector` gathers the
inputs on a schedule and `cdcflow.ui.app` renders the result.
"""

from __future__ import annotations

import html
import itertools
import math
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

# A sample's identity: metric name and its labels, sorted.
SeriesKey = tuple[str, tuple[tuple[str, str], ...]]
Samples = dict[SeriesKey, float]


def parse_metrics(text: str) -> Samples:
    """Prometheus text exposition → {(name, labels): value}. Raises ValueError on text that is not it."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def label_values(samples: Samples, name: str, label: str) -> list[str]:
    return sorted({dict(k[1])[label] for k in samples if k[0] == name and label in dict(k[1])})


def labels_of(samples: Samples, name: str, **labels: str) -> dict[str, str]:
    """The labels of the first series of `name` whose labels include `labels` (empty: none)."""
    want = set(labels.items())
    return next((dict(ls) for (n, ls) in samples if n == name and want <= set(ls)), {})


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the series of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def _has_cdcflow_metrics(samples: Samples) -> bool:
    return any(name.startswith("cdcflow_") for name, _ in samples)


@dataclass
class TargetHistory:
    """The scrapes of one metrics endpoint over the kept window."""

    url: str
    points: deque[tuple[float, Samples]] = field(default_factory=deque)
    error: str | None = None  # the last scrape's failure (None: it answered)
    last_ok: float | None = None

    def add(self, at: float, samples: Samples, keep_s: float) -> None:
        self.points.append((at, samples))
        while self.points and self.points[0][0] < at - keep_s:
            self.points.popleft()
        self.error, self.last_ok = None, at

    def answered(self, at: float, samples: Samples, keep_s: float) -> None:
        """A scrape that answered. An endpoint that served cdcflow's metrics and now answers without any is
        another program on its port (the process ended and something else took the port, or a port is
        misconfigured): an error, so the page keeps the process's last values and says so, instead of
        dropping its rows as if it had never been there."""
        if _has_cdcflow_metrics(self.latest) and not _has_cdcflow_metrics(samples):
            self.error = "answers without any cdcflow metrics: is another program on this port?"
        else:
            self.add(at, samples, keep_s)

    @property
    def latest(self) -> Samples:
        return self.points[-1][1] if self.points else {}

    def rate(self, name: str, window_s: float = 30.0, **labels: str) -> float | None:
        """Per-second increase of a counter over about the last `window_s` (None: not enough points)."""
        if len(self.points) < 2:
            return None
        t1, s1 = self.points[-1]
        t0, s0 = next(((t, s) for t, s in self.points if t >= t1 - window_s), self.points[0])
        if t1 <= t0:
            t0, s0 = self.points[-2]
        return max(0.0, (total(s1, name, **labels) - total(s0, name, **labels)) / (t1 - t0))

    def series_rate(self, name: str, **labels: str) -> list[tuple[float, float]]:
        """The counter's rate between consecutive scrapes, over the window (for a chart)."""
        out = []
        pts = list(self.points)
        for (t0, s0), (t1, s1) in itertools.pairwise(pts):
            if t1 > t0:
                out.append((t1, max(0.0, (total(s1, name, **labels) - total(s0, name, **labels)) / (t1 - t0))))
        return out

    def series(self, name: str, transform: Any = None, **labels: str) -> list[tuple[float, float]]:
        out = []
        for t, s in self.points:
            v = value(s, name, **labels)
            if v is not None:
                out.append((t, transform(t, v) if transform else v))
        return out


@dataclass
class PeerState:
    """The HBase peer as HBase and ZooKeeper see it (read by the collector from the source cluster)."""

    peer_id: str
    added: bool
    enabled: bool
    instances: list[str]
    wals_queued: int = 0
    lag_ms: int = 0
    error: str | None = None


def _age(now: float, ts: float | None) -> float | None:
    return None if not ts else max(0.0, now - ts)


def build_status(
    now: float,
    targets: Iterable[TargetHistory],
    progress: Mapping[str, Mapping[str, Any]],
    peer: PeerState | None,
    verify: Mapping[str, Mapping[str, Any]],
    dead_letters: list[dict[str, Any]],
    stalled_after_s: float,
    backfills: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Everything the page shows, as plain data (also served as JSON at /api/status). `backfills`: the HBase
    backfills of the progress topic (collector.backfill_view)."""
    captures: list[dict[str, Any]] = []
    sinks: dict[str, dict[str, Any]] = {}
    checks: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    processes: list[dict[str, Any]] = []
    endpoints = []
    for target in targets:
        endpoints.append({"url": target.url, "up": target.error is None and target.last_ok is not None,
                          "error": target.error})  # fmt: skip
        if target.error is not None:
            warnings.append(f"cannot read metrics at {target.url}: {target.error}")
        s = target.latest
        if not s:
            continue
        # A target that stopped answering keeps its last values on the page, marked as such.
        stale = _when(target.last_ok) if target.error is not None else None
        for child in label_values(s, "cdcflow_run_child_up", "child"):  # `cdcflow run`'s supervised children
            restarts = int(value(s, "cdcflow_run_child_restarts_total", child=child) or 0)
            up = value(s, "cdcflow_run_child_up", child=child) == 1.0
            processes.append({"child": child, "up": up, "restarts": restarts, "target": target.url})
            if not up:
                warnings.append(f"cdcflow run: {child} has ended; it is started again with back-off (see its log)")
            elif restarts:
                warnings.append(f"cdcflow run: {child} ended and was started again {restarts} time(s)")
        # A peer process sets its output info when it starts. Other cdcflow processes that load the peer's metrics
        # module (`cdcflow run` itself) expose its unlabelled series at 0: they are not a second peer.
        hbase_output = labels_of(s, "cdcflow_hbase_output_info")
        if hbase_output:
            acked = value(s, "cdcflow_hbase_acknowledged_wal_timestamp_seconds")
            last_call = value(s, "cdcflow_hbase_last_call_timestamp_seconds")
            captures.append({
                "format": f"{hbase_output.get('format')} ({hbase_output.get('serialization')})",
                "kind": "hbase", "name": "HBase peer", "target": target.url, "stale_since": stale,
                "rows_total": total(s, "cdcflow_hbase_rows_total"),
                "rows_per_s": target.rate("cdcflow_hbase_rows_total"),
                "position": _when(acked), "lag_s": _age(now, acked), "last_call_age_s": _age(now, last_call),
                "errors_total": total(s, "cdcflow_hbase_errors_total"),
                "failed_calls_total": total(s, "cdcflow_hbase_calls_total", outcome="error"),
                "registered": value(s, "cdcflow_hbase_registered") == 1.0,
                "instances": value(s, "cdcflow_hbase_instances"),
                "chart_rows": target.series_rate("cdcflow_hbase_rows_total"),
                "chart_lag": target.series("cdcflow_hbase_acknowledged_wal_timestamp_seconds",
                                           transform=lambda t, v: max(0.0, t - v) if v else 0.0),
            })  # fmt: skip
        for source in label_values(s, "cdcflow_mysql_events_total", "source"):
            ts = value(s, "cdcflow_mysql_last_source_timestamp_seconds", source=source)
            cp = value(s, "cdcflow_mysql_checkpoint_timestamp_seconds", source=source)
            rate = target.rate("cdcflow_mysql_events_total", source=source)
            lag = _age(now, ts)
            capture = {
                "kind": "mysql", "name": f"MySQL source {source}", "target": target.url, "stale_since": stale,
                "rows_total": value(s, "cdcflow_mysql_events_total", source=source),
                "rows_per_s": rate, "position": _when(cp), "lag_s": lag,
                "errors_total": (value(s, "cdcflow_mysql_restarts_total", source=source) or 0)
                + (value(s, "cdcflow_mysql_dead_letters_total", source=source) or 0),
                "streaming": value(s, "cdcflow_mysql_streaming", source=source) == 1.0,
                "chart_rows": target.series_rate("cdcflow_mysql_events_total", source=source),
                "chart_lag": target.series("cdcflow_mysql_last_source_timestamp_seconds",
                                           transform=lambda t, v: max(0.0, t - v), source=source),
            }  # fmt: skip
            output = labels_of(s, "cdcflow_mysql_output_info", source=source)
            if output:
                capture["format"] = f"{output.get('format')} ({output.get('serialization')})"
            pending = value(s, "cdcflow_mysql_snapshot_pending_tables", source=source)
            if pending:  # a snapshot runs (configured, or asked for by a signal)
                capture["snapshot"] = (f"snapshotting {int(pending)} table(s), "
                                       f"{int(value(s, 'cdcflow_mysql_snapshot_rows_total', source=source) or 0):,} "
                                       "rows so far")  # fmt: skip
            captures.append(capture)
            for table in label_values(s, "cdcflow_mysql_table_not_followed", "table"):
                if value(s, "cdcflow_mysql_table_not_followed", source=source, table=table):
                    warnings.append(f"MySQL source {source}: a DDL changed the rows of {table} without row events "
                                    "and the capture could not read it again: its sinks differ from it (the "
                                    "capture's log says why and what to do; then: cdcflow mysql signal snapshot "
                                    f"{table})")  # fmt: skip
            if lag is not None and lag > stalled_after_s and not rate:
                warnings.append(f"MySQL source {source} looks stalled: nothing read for {lag:.0f} s "
                                f"(the capture sends heartbeats, so an idle source stays near 0)")  # fmt: skip
            if not capture["streaming"]:
                warnings.append(f"MySQL source {source}: the binlog stream is not open (reconnecting?)")
        for sink in label_values(s, "cdcflow_pipeline_rows_total", "sink") + label_values(
            s, "cdcflow_pipeline_failing", "sink"
        ):
            src_ts = value(s, "cdcflow_pipeline_last_source_timestamp_seconds", sink=sink)
            batch_s = value(s, "cdcflow_pipeline_batch_seconds", sink=sink)
            window = max(30.0, 2 * (batch_s or 0))  # over a couple of batches: long batches are not "0 rows/s"
            sinks[sink] = {
                "name": sink, "target": target.url, "stale_since": stale,
                "failing": value(s, "cdcflow_pipeline_failing", sink=sink) == 1.0,
                "rows_total": value(s, "cdcflow_pipeline_rows_total", sink=sink),
                "rows_per_s": target.rate("cdcflow_pipeline_rows_total", window, sink=sink),
                "batch_s": batch_s,
                "lag_s": _age(now, src_ts),
                "behind": value(s, "cdcflow_pipeline_offsets_behind", sink=sink),
                "dead_letters": value(s, "cdcflow_pipeline_dead_letters_total", sink=sink),
                "failures": value(s, "cdcflow_pipeline_failures_total", sink=sink),
                "error": None,
                "chart_rows": target.series_rate("cdcflow_pipeline_rows_total", sink=sink),
                "chart_lag": target.series("cdcflow_pipeline_last_source_timestamp_seconds",
                                           transform=lambda t, v: max(0.0, t - v), sink=sink),
                "chart_batch": target.series("cdcflow_pipeline_batch_seconds", sink=sink),
                "chart_behind": target.series("cdcflow_pipeline_offsets_behind", sink=sink),
            }  # fmt: skip
        for check in label_values(s, "cdcflow_verify_last_round_timestamp_seconds", "check"):
            checks[check] = {
                "check": check, "differences": value(s, "cdcflow_verify_differences", check=check),
                "rows_compared": value(s, "cdcflow_verify_rows_compared", check=check),
                "in_flight": value(s, "cdcflow_verify_in_flight", check=check),
                "at": _when(value(s, "cdcflow_verify_last_round_timestamp_seconds", check=check)),
                "examples": [], "error": None,
            }  # fmt: skip
    for name, doc in progress.items():  # the sinks' progress files, when this machine can read them
        entry = sinks.setdefault(name, {"name": name, "target": None, "chart_rows": [], "chart_lag": [],
                                        "chart_batch": [], "chart_behind": []})  # fmt: skip
        if doc.get("state") == "failing":
            entry["failing"] = True
        entry["error"] = doc.get("error")
        if doc.get("total_rows") is not None:  # since the checkpoint began (the metric: since the process began)
            entry["rows_total"] = doc["total_rows"]
        for key, doc_key in (("behind", "offsets_behind"), ("dead_letters", "dead_letters")):
            if entry.get(key) is None:
                entry[key] = doc.get(doc_key)
        if entry.get("lag_s") is None and doc.get("last_source_ts_ms"):
            entry["lag_s"] = _age(now, doc["last_source_ts_ms"] / 1000)
        if entry.get("batch_s") is None and doc.get("duration_ms") is not None:
            entry["batch_s"] = doc["duration_ms"] / 1000
        entry["tables"] = fold_rows(name, doc.get("tables") or {}, now, warnings)
        entry["cuts"] = cut_rows(name, doc.get("consistent_cuts") or {}, now, warnings)
        for table, n in sorted((doc.get("unapplied") or {}).items()):
            warnings.append(f"sink {name}: {n} change(s) of {table} could not be applied (oversize changes whose "
                            "parts are gone from Kafka): they are in the dead-letter topic")  # fmt: skip
    for name, entry in sinks.items():
        if entry.get("failing"):
            warnings.append(f"sink {name} is FAILING" + (f": {entry['error']}" if entry.get("error") else ""))
    for name, result in verify.items():  # the verify topic: the newest result of each check
        row = checks.setdefault(name, {"check": name})
        row.update({
            "differences": result.get("outstanding", result.get("confirmed")),
            "rows_compared": result.get("rows_compared"), "in_flight": result.get("in_flight"),
            "at": _when((result.get("finished_ms") or 0) / 1000),
            "examples": list(result.get("examples") or [])[:5], "error": result.get("error"),
        })  # fmt: skip
    for name, row in checks.items():
        if row.get("error"):
            warnings.append(f"verify {name} could not run: {row['error']}")
        elif row.get("differences"):
            warnings.append(f"verify {name}: {int(row['differences'])} confirmed difference(s) between source and sink")
    if peer is not None:
        if peer.error is not None:
            warnings.append(f"cannot read the HBase peer's state: {peer.error}")
        elif not peer.added:
            warnings.append(f"HBase peer {peer.peer_id} is not added on the source cluster (cdcflow hbase peer add)")
        elif peer.enabled and not peer.instances:
            warnings.append(f"HBase peer {peer.peer_id} is ENABLED but no cdcflow instance is serving it: HBase keeps "
                            f"every WAL for it ({peer.wals_queued} queued) until one runs (cdcflow hbase run) "
                            f"or the peer is disabled")  # fmt: skip
        elif (
            peer.enabled
            and peer.lag_ms > stalled_after_s * 1000
            and not any(c["rows_per_s"] for c in captures if c["kind"] == "hbase")
        ):  # behind and not moving (a capture draining a backlog is behind too, but moving)
            warnings.append(f"HBase peer {peer.peer_id}: the source reports {peer.lag_ms / 1000:.0f} s of replication "
                            f"lag ({peer.wals_queued} WAL(s) queued) and no instance is publishing rows: the "
                            f"capture looks stalled")  # fmt: skip
    return {
        "generated_at": _when(now), "generated_at_s": now,
        "captures": captures, "sinks": sorted(sinks.values(), key=lambda d: d["name"]),
        "verify": sorted(checks.values(), key=lambda d: d["check"]),
        "dead_letters": dead_letters, "warnings": warnings, "targets": endpoints, "processes": processes,
        "peer": None if peer is None else peer.__dict__, "backfills": backfills or [],
    }  # fmt: skip


def _when(ts: float | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else None


def format_value(value: float, unit: str) -> str:
    """A chart's value with its unit: seconds as s or min, counts without decimals."""
    if unit == "s":
        return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"
    if unit == "rows/s":
        return f"{value:,.1f} rows/s" if value < 100 else f"{value:,.0f} rows/s"
    return f"{value:,.0f} {unit}" if value == int(value) or value >= 10 else f"{value:,.1f} {unit}"


def _nice_top(value: float) -> float:
    """The axis top: the next 1, 2 or 5 times a power of ten at or above `value` (1 when it is 0)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return float(next(step * power for step in (1, 2, 5, 10) if step * power >= value))


def chart_svg(points: list[tuple[float, float]], now: float, window_s: float, title: str, unit: str,
              width: int = 380, height: int = 150) -> str:  # fmt: skip
    """An SVG line chart of `points` (time, value) over the last `window_s`: a title with the current
    value, a y axis from 0 with its top and middle labelled in `unit`, a time axis in minutes before
    now. `data-points` says how many points are drawn (the page test reads it)."""
    left, right, top_pad, bottom = 80, 8, 24, 20
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    pts = [(t, v) for t, v in points if t >= now - window_s]
    top = _nice_top(max((v for _, v in pts), default=0.0))

    def x(t: float) -> float:
        return left + (t - (now - window_s)) / window_s * plot_w

    def y(v: float) -> float:
        return top_pad + plot_h - v / top * plot_h

    current = f"now {format_value(pts[-1][1], unit)}" if pts else "no data yet"
    minutes = window_s / 60
    parts = [
        f'<svg class="chart" data-title="{html.escape(title)}" data-points="{len(pts)}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}: {current}">',
        f'<text class="chart-title" x="{left}" y="14">{html.escape(title)}</text>',
        f'<text class="chart-now" x="{width - right}" y="14" text-anchor="end">{current}</text>',
    ]
    for frac in (0.0, 0.5, 1.0):  # grid lines with their values
        gy = y(top * frac)
        parts.append(f'<line class="grid" x1="{left}" y1="{gy:.1f}" x2="{width - right}" y2="{gy:.1f}"/>')
        parts.append(f'<text class="axis" x="{left - 4}" y="{gy + 4:.1f}" text-anchor="end">'
                     f"{format_value(top * frac, unit)}</text>")  # fmt: skip
    for frac, label in ((0.0, f"-{minutes:.0f} min"), (0.5, f"-{minutes / 2:.0f} min"), (1.0, "now")):
        anchor = {0.0: "start", 0.5: "middle", 1.0: "end"}[frac]
        parts.append(f'<text class="axis" x="{left + frac * plot_w:.1f}" y="{height - 4}" '
                     f'text-anchor="{anchor}">{label}</text>')  # fmt: skip
    coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
    parts.append(f'<polyline class="line" fill="none" stroke="currentColor" stroke-width="1.5" points="{coords}"/>')
    if pts:  # the newest point, so a single point is visible too
        parts.append(f'<circle class="last" cx="{x(pts[-1][0]):.1f}" cy="{y(pts[-1][1]):.1f}" r="2.5" '
                     'fill="currentColor"/>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def cut_rows(sink: str, cuts: Mapping[str, Mapping[str, Any]], now: float, warnings: list[str]) -> list[dict[str, Any]]:
    """A Delta sink's consistent cuts as the page shows them: per source, the newest transaction the sink holds
    whole, how old it is at the source, and what the next one waits for; a warning when one cannot move."""
    rows = []
    for source, c in sorted(cuts.items()):
        ts = c.get("source_ts_ms")
        waiting = ", ".join(f"{t} {have}/{want}" for t, (have, want) in sorted((c.get("waiting_for") or {}).items()))
        rows.append({
            "source": source, "gtid": c.get("gtid"), "age_s": _age(now, ts / 1000) if ts else None,
            "pending": c.get("pending_transactions"), "waiting": waiting, "problem": c.get("problem"),
        })  # fmt: skip
        if c.get("problem"):
            warnings.append(f"sink {sink}: the consistent cut of {source} cannot move: {c['problem']}")
        if c.get("malformed_records"):
            warnings.append(f"sink {sink}: {c['malformed_records']} transaction record(s) of {source} were not "
                            "readable (skipped; logged)")  # fmt: skip
    return rows


def fold_rows(
    sink: str, tables: Mapping[str, Mapping[str, Any]], now: float, warnings: list[str]
) -> list[dict[str, Any]]:
    """A merge-on-read Delta sink's tables as the page shows them (pending changes, last fold), with a
    warning per table whose state is older than its fold interval + the folds' rest + 30 s or whose fold fails."""
    rows = []
    for path, t in sorted(tables.items()):
        last = t.get("last_fold_ms")
        rows.append({
            "path": path, "pending": t.get("pending_rows"), "pending_age_s": t.get("pending_age_s"),
            "folded_ago_s": _age(now, last / 1000) if last else None, "fold_s": t.get("fold_seconds"),
            "stale": bool(t.get("stale")), "error": t.get("fold_error"),
        })  # fmt: skip
        if t.get("fold_error"):
            warnings.append(f"sink {sink}: folding {path} fails (its changes stay in the log): {t['fold_error']}")
        elif t.get("stale"):
            warnings.append(f"sink {sink}: the state table {path} is {t.get('pending_age_s')} s behind its log "
                            "(older than fold_interval_s + the folds' rest + 30 s)")  # fmt: skip
    return rows
