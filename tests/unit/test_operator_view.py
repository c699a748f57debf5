"""The status page's computations, continuous verification's rules and the MySQL capture's metrics,
without servers (the e2e test runs them against real processes and a real browser)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from cdcflow.cli.main import main
from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.config import KafkaConfig
from cdcflow.dev.testing.mysql import source_config
from cdcflow.events.cells import Cell, CellType
from cdcflow.sources.mysql.capture import MySqlCapture
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.metrics import MySqlCaptureCollector
from cdcflow.ui.status import PeerState, TargetHistory, build_status, chart_svg, parse_metrics, total, value
from cdcflow.verify.continuous import DeltaRangeCheck, HBaseRangeCheck, TableCheck, VerifyRound

pytestmark = pytest.mark.unit


def test_parse_metrics_reads_what_prometheus_client_writes() -> None:
    reg = CollectorRegistry()
    Counter("cdcflow_x_rows_total", "rows", ["sink"], registry=reg).labels("copy").inc(7)
    Gauge("cdcflow_x_lag_seconds", "lag", registry=reg).set(2.5)
    Histogram("cdcflow_x_call_seconds", "calls", registry=reg).observe(0.2)
    samples = parse_metrics(generate_latest(reg).decode())
    assert value(samples, "cdcflow_x_rows_total", sink="copy") == 7
    assert value(samples, "cdcflow_x_lag_seconds") == 2.5
    assert value(samples, "cdcflow_x_call_seconds_count") == 1
    assert total(samples, "cdcflow_x_rows_total") == 7
    with pytest.raises(ValueError):
        parse_metrics("this is {not prometheus text")


def _history(url: str, *points: tuple[float, str]) -> TargetHistory:
    history = TargetHistory(url)
    for at, text in points:
        history.add(at, parse_metrics(text), keep_s=3600)
    return history


def test_rates_and_charts_come_from_consecutive_scrapes() -> None:
    h = _history("u", (1000.0, "cdcflow_pipeline_rows_total{sink=\"a\"} 0\n"),
                 (1010.0, "cdcflow_pipeline_rows_total{sink=\"a\"} 100\n"),
                 (1020.0, "cdcflow_pipeline_rows_total{sink=\"a\"} 300\n"))  # fmt: skip
    assert h.rate("cdcflow_pipeline_rows_total", window_s=15, sink="a") == pytest.approx(20.0)
    assert h.rate("cdcflow_pipeline_rows_total", window_s=60, sink="a") == pytest.approx(15.0)
    assert h.series_rate("cdcflow_pipeline_rows_total", sink="a") == [(1010.0, 10.0), (1020.0, 20.0)]
    h.add(5000.0, {}, keep_s=3600)  # an hour later the old points are gone
    assert len(h.points) == 1


OUTPUT = 'cdcflow_hbase_output_info{format="cdcflow",serialization="json"} 1\n'  # what a peer process sets


def test_a_port_that_answers_without_cdcflow_metrics_keeps_the_process_last_values() -> None:
    """The process ended and something else answers on its port (or the port is misconfigured): its rows stay,
    marked stale, with a warning that says why, instead of vanishing from the page."""
    now = 10_000.0
    peer = _history(
        "http://peer/metrics", (now - 5, f"cdcflow_hbase_rows_total 10\ncdcflow_hbase_registered 1\n{OUTPUT}")
    )
    peer.answered(now, parse_metrics("process_cpu_seconds_total 1.5\n"), keep_s=3600)
    status = build_status(now, [peer], {}, None, {}, [], stalled_after_s=120)
    (row,) = [c for c in status["captures"] if c["kind"] == "hbase"]
    assert row["rows_total"] == 10 and row["stale_since"] is not None
    assert any("another program on this port" in w for w in status["warnings"]), status["warnings"]
    peer.answered(now + 5, parse_metrics("cdcflow_hbase_rows_total 12\n"), keep_s=3600)  # the process is back
    assert peer.error is None and total(peer.latest, "cdcflow_hbase_rows_total") == 12
    fresh = TargetHistory("http://new/metrics")  # a process with no cdcflow samples yet is not an error
    fresh.answered(now, {}, keep_s=3600)
    assert fresh.error is None and len(fresh.points) == 1


def test_a_process_that_only_loads_the_peers_metrics_is_not_a_peer() -> None:
    """`cdcflow run` loads the peer's metrics module, so its own port shows the peer's unlabelled series at 0;
    the page listed it as a second HBase peer (registered: NO, instances: 0). Only a process that set its
    output info is a peer."""
    now = 10_000.0
    peer = _history("http://peer/metrics", (now, f"cdcflow_hbase_rows_total 10\ncdcflow_hbase_registered 1\n{OUTPUT}"))
    run = _history(
        "http://run/metrics",
        (
            now,
            "cdcflow_hbase_rows_total 0\ncdcflow_hbase_registered 0\n"
            'cdcflow_hbase_instances 0\ncdcflow_run_child_up{child="peer"} 1\n',
        ),
    )
    status = build_status(now, [peer, run], {}, None, {}, [], stalled_after_s=120)
    assert [(c["name"], c["target"], c["format"]) for c in status["captures"] if c["kind"] == "hbase"] == [
        ("HBase peer", "http://peer/metrics", "cdcflow (json)")
    ]
    assert [p["child"] for p in status["processes"]] == ["peer"]


def test_charts_have_axes_units_and_the_current_value() -> None:
    """Charts a person can read: a title, the value now, a y axis in the unit, minutes."""
    points = [(1000.0, 5.0), (2800.0, 170.0), (3600.0, 42.0)]
    svg = chart_svg(points, now=3600.0, window_s=3600.0, title="rows/s", unit="rows/s", width=364, height=144)
    assert 'data-points="3"' in svg and 'data-title="rows/s"' in svg
    assert ">now 42.0 rows/s<" in svg  # the newest value, with its unit
    # y axis from 0 to the next 1-2-5 step above the maximum (170 → 200), labelled in the unit
    assert ">0.0 rows/s<" in svg and ">100 rows/s<" in svg and ">200 rows/s<" in svg
    assert ">-60 min<" in svg and ">-30 min<" in svg and ">now<" in svg  # the time axis
    # the plot spans x 80..356 and y 24..124 (0 at the bottom): 42 of 200 is 21 px above it
    assert 'points="156.7,121.5 294.7,39.0 356.0,103.0"' in svg
    lag = chart_svg([(3590.0, 150.0)], now=3600.0, window_s=3600.0, title="lag", unit="s")
    assert ">now 2.5 min<" in lag and ">100.0 s<" in lag and ">3.3 min<" in lag  # past 2 minutes: minutes
    behind = chart_svg([(3590.0, 0.0)], now=3600.0, window_s=3600.0, title="behind", unit="records")
    assert ">0.5 records<" in behind and ">1 records<" in behind and ">now 0 records<" in behind
    empty = chart_svg([(0.0, 1.0)], now=5000.0, window_s=60.0, title="batch time", unit="s")
    assert 'data-points="0"' in empty and "no data yet" in empty and 'points=""' in empty  # outside the window


def test_the_status_names_what_needs_attention() -> None:
    now = 10_000.0
    peer = _history("http://peer/metrics",
                    (now - 5, f"cdcflow_hbase_rows_total 10\ncdcflow_hbase_registered 1\n{OUTPUT}"),
                    (now, f"cdcflow_hbase_rows_total 40\ncdcflow_hbase_registered 1\n{OUTPUT}"
                          f"cdcflow_hbase_acknowledged_wal_timestamp_seconds {now - 3}\n"))  # fmt: skip
    idle = (
        'cdcflow_mysql_events_total{source="m"} 5\ncdcflow_mysql_streaming{source="m"} 1\n'
        f'cdcflow_mysql_last_source_timestamp_seconds{{source="m"}} {now - 900}\n'
        'cdcflow_mysql_table_not_followed{source="m",table="shop.bare"} 1\n'
    )  # nothing read for 900 s; a DDL it could not follow
    mysql = _history("http://mysql/metrics", (now - 5, idle), (now, idle))
    pipeline = _history("http://pipe/metrics", (now, "cdcflow_pipeline_rows_total{sink=\"copy\"} 40\n"
                                                     "cdcflow_pipeline_failing{sink=\"copy\"} 0\n"
                                                     "cdcflow_pipeline_failing{sink=\"delta\"} 1\n"))  # fmt: skip
    down = _history("http://gone/metrics", (now - 60, 'cdcflow_pipeline_rows_total{sink="old"} 3\n'))
    down.error = "Connection refused"  # answered a minute ago, not now: its last values, marked stale
    status = build_status(
        now, [peer, mysql, pipeline, down], {"delta": {"state": "failing", "error": "IOException: disk full"},
                                             "copy": {"state": "applying", "unapplied": {"shop.items": 2}}},
        PeerState("cdcflow", True, True, [], wals_queued=12),
        {"hbase t -> t_copy": {"confirmed": 0, "outstanding": 2, "rows_compared": 500, "examples": ["different: r"]}},
        [], stalled_after_s=120,
    )  # fmt: skip
    warnings = "\n".join(status["warnings"])
    assert "cannot read metrics at http://gone/metrics: Connection refused" in warnings
    assert "HBase peer cdcflow is ENABLED but no cdcflow instance is serving it" in warnings and "12 queued" in warnings
    assert "sink delta is FAILING: IOException: disk full" in warnings
    assert "sink copy: 2 change(s) of shop.items could not be applied (oversize changes whose parts" in warnings
    assert "sink copy is FAILING" not in warnings
    assert "verify hbase t -> t_copy: 2 confirmed difference(s)" in warnings
    assert "MySQL source m looks stalled: nothing read for 900 s" in warnings
    assert "MySQL source m: a DDL changed the rows of shop.bare without row events" in warnings
    hbase = next(c for c in status["captures"] if c["kind"] == "hbase")
    assert hbase["rows_per_s"] == pytest.approx(6.0) and hbase["lag_s"] == pytest.approx(3.0) and hbase["registered"]
    assert {s["name"]: (s["failing"], s["stale_since"] is not None) for s in status["sinks"]} == {
        "copy": (False, False),
        "delta": (True, False),
        "old": (False, True),
    }
    serving = PeerState("cdcflow", True, True, ["127.0.0.1,1,2"], wals_queued=40, lag_ms=900_000)
    draining = build_status(now, [peer], {}, serving, {}, [], 120)  # far behind, but publishing rows
    assert draining["warnings"] == []
    stopped = _history("http://peer/metrics", (now - 5, f"cdcflow_hbase_rows_total 40\n{OUTPUT}"),
                       (now, f"cdcflow_hbase_rows_total 40\n{OUTPUT}"))  # fmt: skip
    stalled = build_status(now, [stopped], {}, serving, {}, [], 120)
    assert stalled["warnings"] == ["HBase peer cdcflow: the source reports 900 s of replication lag (40 WAL(s) "
                                   "queued) and no instance is publishing rows: the capture looks stalled"]  # fmt: skip


class FakeHBase:
    """An in-memory HBase table store with the client's scan (the port the check reads through)."""

    def __init__(self, tables: dict[str, dict[bytes, dict[bytes, bytes]]]) -> None:
        self.tables = tables

    def scan(self, table: str, *, start_row: bytes = b"", stop_row: bytes = b"", max_versions: int = 1,
             batch_rows: int = 500) -> Iterator[Cell]:  # fmt: skip
        for row in sorted(self.tables[table]):
            if row >= start_row and (not stop_row or row < stop_row):
                for qualifier, val in sorted(self.tables[table][row].items()):
                    yield Cell(row, b"cf", qualifier, 1, CellType.PUT, val)


def _rows(n: int) -> dict[bytes, dict[bytes, bytes]]:
    return {b"r%02d" % i: {b"q": b"v%d" % i} for i in range(n)}


def test_rolling_ranges_cover_the_table_and_find_rows_only_the_sink_has() -> None:
    sink = _rows(7)
    sink[b"r99"] = {b"q": b"extra"}  # after the last source row
    sink[b"r00"] = {b"q": b"wrong"}
    hb = FakeHBase({"src": _rows(7), "dst": sink})
    check = HBaseRangeCheck(hb, "src", hb, "dst", sample=3)  # type: ignore[arg-type]
    rounds = [check.round(grace_s=0) for _ in range(4)]
    first, second, third = ("b''", "b'r02\\x00'", 3), ("b'r02\\x00'", "b'r05\\x00'", 3), ("b'r05\\x00'", "end", 2)
    assert [(r.range_start, r.range_end, r.rows_compared) for r in rounds] == [first, second, third, first]
    assert (rounds[0].different, rounds[2].extra) == (1, 1)
    assert [r.outstanding for r in rounds] == [1, 1, 2, 2]  # a clean range does not clear the others
    sink[b"r00"] = {b"q": b"v0"}  # repaired: the next round over its range (the third from here) clears it
    assert [check.round(grace_s=0).outstanding for _ in range(3)] == [2, 2, 1]
    assert check.outstanding == {b"r99": "extra in the sink: row b'r99'"}


class Meanwhile(threading.Event):
    """The grace period: what happens to the tables while the check waits."""

    def __init__(self, change: Any) -> None:
        super().__init__()
        self.change = change

    def wait(self, timeout: float | None = None) -> bool:
        self.change()
        return False


def test_only_a_difference_that_outlasts_the_grace_period_with_the_source_unchanged_is_confirmed() -> None:
    src, dst = _rows(4), _rows(4)
    dst[b"r01"] = {b"q": b"stale"}  # the sink will catch up during the grace period
    dst[b"r02"] = {b"q": b"stale"}  # the source changes again during the grace period
    dst[b"r03"] = {b"q": b"tampered"}  # nothing changes: a real difference
    hb = FakeHBase({"src": src, "dst": dst})

    def meanwhile() -> None:
        dst[b"r01"] = {b"q": b"v1"}
        src[b"r02"] = {b"q": b"newer"}

    result = HBaseRangeCheck(hb, "src", hb, "dst").round(grace_s=30, stop_event=Meanwhile(meanwhile))  # type: ignore[arg-type]
    assert (result.different, result.in_flight, result.outstanding) == (1, 2, 1)
    assert result.examples == ["different: row b'r03': source-only [(b'cf', b'q', 1, b'v3')], "
                               "sink-only [(b'cf', b'q', 1, b'tampered')]"]  # fmt: skip
    assert not result.clean
    assert VerifyRound.from_json(result.to_json()) == result


def test_the_mysql_capture_metrics_are_its_counters_when_scraped() -> None:
    cfg = source_config("m1", ["shop"])
    capture = MySqlCapture(cfg, KafkaConfig(), MySqlEndpoint("127.0.0.1", 1, "u", "p"), "127.0.0.1:1",
                           producer_factory=lambda _settings: None)  # type: ignore[arg-type,return-value]  # fmt: skip
    reg = CollectorRegistry()
    reg.register(MySqlCaptureCollector(capture))
    capture.stats.events, capture.stats.xa_waiting, capture.stats.last_source_ts_ms = 41, 2, 1_700_000_000_000
    capture.stats.checkpoint = Checkpoint("0-1-5", "bin.000001", 4, ts_ms=1_699_999_999_000)
    capture.stream_open = True
    samples = parse_metrics(generate_latest(reg).decode())
    assert value(samples, "cdcflow_mysql_events_total", source="m1") == 41
    assert value(samples, "cdcflow_mysql_xa_waiting", source="m1") == 2
    assert value(samples, "cdcflow_mysql_streaming", source="m1") == 1
    assert value(samples, "cdcflow_mysql_last_source_timestamp_seconds", source="m1") == 1_700_000_000
    assert value(samples, "cdcflow_mysql_checkpoint_timestamp_seconds", source="m1") == 1_699_999_999
    capture.stats.events += 1  # read again at the next scrape, not copied
    assert value(parse_metrics(generate_latest(reg).decode()), "cdcflow_mysql_events_total", source="m1") == 42
    assert value(samples, "cdcflow_mysql_output_info", source="m1", format="cdcflow", serialization="json") == 1
    assert value(samples, "cdcflow_mysql_snapshot_pending_tables", source="m1") == 0  # served without a snapshot too


def test_the_status_page_shows_each_mysql_sources_output_format() -> None:
    now = 10_000.0
    text = ('cdcflow_mysql_events_total{source="m"} 5\ncdcflow_mysql_streaming{source="m"} 1\n'
            'cdcflow_mysql_output_info{format="debezium",serialization="avro",source="m"} 1\n')  # fmt: skip
    status = build_status(now, [_history("http://mysql/metrics", (now, text))], {}, None, {}, [],
                          stalled_after_s=120)  # fmt: skip
    (capture,) = status["captures"]
    assert capture["format"] == "debezium (avro)"
    assert "snapshot" not in capture  # none running


def test_the_status_page_shows_the_hbase_peers_output_format() -> None:
    now = 10_000.0
    text = ('cdcflow_hbase_rows_total 5\ncdcflow_hbase_registered 1\n'
            'cdcflow_hbase_output_info{format="upsert",serialization="avro"} 1\n')  # fmt: skip
    status = build_status(now, [_history("http://hbase/metrics", (now, text))], {}, None, {}, [],
                          stalled_after_s=120)  # fmt: skip
    (capture,) = status["captures"]
    assert capture["format"] == "upsert (avro)"


def test_the_status_page_shows_a_running_snapshot() -> None:
    now = 10_000.0
    text = ('cdcflow_mysql_events_total{source="m"} 5\ncdcflow_mysql_streaming{source="m"} 1\n'
            'cdcflow_mysql_snapshot_pending_tables{source="m"} 2\n'
            'cdcflow_mysql_snapshot_rows_total{source="m"} 12345\n')  # fmt: skip
    status = build_status(now, [_history("http://mysql/metrics", (now, text))], {}, None, {}, [],
                          stalled_after_s=120)  # fmt: skip
    (capture,) = status["captures"]
    assert capture["snapshot"] == "snapshotting 2 table(s), 12,345 rows so far"


@pytest.mark.parametrize("args, message", [
    (["--every", "soon"], "'soon' is not a duration"),
    (["--every", "0s"], "--every must be longer than 0"),
    (["--sample", "0"], "0 is not in the range x>=1"),
    (["--every", "5m", "--grace", "-1s"], "a duration cannot be negative"),
])  # fmt: skip
def test_verify_refuses_bad_schedules_before_connecting(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["verify", "hbase", "a", "b", *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_the_delta_check_reads_the_state_table_by_the_same_key_ranges() -> None:
    src = _rows(5)
    state = {k: frozenset({(b"cf", q, 1, v) for q, v in cols.items()}) for k, cols in _rows(5).items()}
    state[b"r03"] = frozenset()  # the copy lost the row's cells
    asked: list[tuple[bytes, bytes]] = []

    def read_range(start: bytes, stop: bytes) -> Iterator[tuple[bytes, Any]]:
        asked.append((start, stop))
        return iter([(k, c) for k, c in sorted(state.items()) if k >= start and (not stop or k < stop) and c])

    hb = FakeHBase({"src": src})
    check = DeltaRangeCheck(hb, "src", "/delta/t", read_range, sample=3)  # type: ignore[arg-type]
    first, second = check.round(grace_s=0), check.round(grace_s=30, stop_event=Meanwhile(lambda: None))
    assert asked[:2] == [(b"", b"r02\x00"), (b"r02\x00", b"")]
    assert (first.clean, second.missing, second.outstanding) == (True, 1, 1)
    assert asked[2] == (b"r03", b"r03\x00")  # the second look reads just the differing row
    assert check.name == "hbase-delta src -> /delta/t"


def test_a_whole_table_check_confirms_by_reading_both_sides_again() -> None:
    looks = [
        ({"k1": {"v": 1}, "k2": {"v": 2}, "k3": {"v": 3}}, {"k1": {"v": 1}, "k2": {"v": 0}, "k3": {"v": 0}}),
        ({"k1": {"v": 1}, "k2": {"v": 2}, "k3": {"v": 9}}, {"k1": {"v": 1}, "k2": {"v": 0}, "k3": {"v": 0}}),
    ]
    check = TableCheck("mysql-phoenix db.t", lambda: looks.pop(0))  # type: ignore[arg-type,return-value]
    result = check.round(grace_s=5, stop_event=Meanwhile(lambda: None))
    assert (result.different, result.in_flight, result.outstanding) == (1, 1, 1)  # k3 changed meanwhile
    assert result.examples == ["different {'v': (2, 0)}: k2"]
    assert result.summary().startswith("mysql-phoenix db.t: CONFIRMED DIFFERENCES: 3 rows compared, ")
    assert TableCheck("x", lambda: ({"a": {"v": 1.0}}, {"a": {"v": 1}})).round(0).different == 1  # types count


def test_the_grafana_dashboard_uses_only_documented_metrics() -> None:
    import json
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs"
    documented = set(re.findall(r"^\| `(cdcflow_[a-z_]+)` \|", (docs / "operations.md").read_text(), re.M))
    dashboard = json.loads((docs / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|count|sum)$", "", n) for e in exprs for n in re.findall(r"cdcflow_[a-z_]+", e)}
    assert used and used <= documented, sorted(used - documented)
    assert {n.split("_")[1] for n in used} == {"hbase", "mysql", "pipeline", "verify"}  # every process has a panel


def test_a_merge_on_read_sinks_tables_show_their_folds_and_warn_when_stale() -> None:
    now = 10_000.0
    tables = {
        "/d/m/shop/orders": {"pending_rows": 12, "pending_age_s": 4.0, "last_fold_ms": (now - 20) * 1000,
                             "fold_seconds": 1.5, "stale": False, "fold_error": None},
        "/d/m/shop/items": {"pending_rows": 900, "pending_age_s": 95.0, "last_fold_ms": None, "fold_seconds": None,
                            "stale": True, "fold_error": None},
        "/d/m/shop/lines": {"pending_rows": 3, "pending_age_s": 12.0, "last_fold_ms": None, "fold_seconds": None,
                            "stale": False, "fold_error": "IOException: disk full"},
    }  # fmt: skip
    status = build_status(now, [], {"delta": {"state": "applying", "tables": tables}}, None, {}, [], 120)
    [sink] = status["sinks"]
    rows = {t["path"]: t for t in sink["tables"]}
    assert rows["/d/m/shop/orders"]["folded_ago_s"] == pytest.approx(20.0) and not rows["/d/m/shop/orders"]["stale"]
    assert rows["/d/m/shop/items"]["stale"] and rows["/d/m/shop/items"]["folded_ago_s"] is None
    warnings = "\n".join(status["warnings"])
    assert "the state table /d/m/shop/items is 95.0 s behind its log" in warnings
    assert "folding /d/m/shop/lines fails (its changes stay in the log): IOException: disk full" in warnings
    assert "orders" not in warnings


def test_cdcflow_runs_children_and_their_restarts_are_shown() -> None:
    now = 10_000.0
    text = (
        'cdcflow_run_child_up{child="cdcflow mysql run"} 1\n'
        'cdcflow_run_child_restarts_total{child="cdcflow mysql run"} 2\n'
        'cdcflow_run_child_up{child="cdcflow pipeline run"} 0\n'
        'cdcflow_run_child_restarts_total{child="cdcflow pipeline run"} 0\n'
    )
    run = _history("http://run/metrics", (now, text))
    status = build_status(now, [run], {}, None, {}, [], stalled_after_s=120)
    assert status["processes"] == [
        {"child": "cdcflow mysql run", "up": True, "restarts": 2, "target": "http://run/metrics"},
        {"child": "cdcflow pipeline run", "up": False, "restarts": 0, "target": "http://run/metrics"},
    ]
    assert "cdcflow run: cdcflow mysql run ended and was started again 2 time(s)" in status["warnings"]
    assert any(w.startswith("cdcflow run: cdcflow pipeline run has ended") for w in status["warnings"])


def test_a_sinks_consistent_cut_shows_what_the_next_transaction_waits_for_and_warns_when_it_cannot_move() -> None:
    now = 10_000.0
    cuts = {
        "shop": {"gtid": "0-1-4711", "position": 4711, "source_ts_ms": (now - 3) * 1000, "pending_transactions": 2,
                 "waiting_for": {"shop.lines": [1, 3]}, "problem": None, "malformed_records": 0},
        "hr": {"gtid": None, "position": None, "source_ts_ms": None, "pending_transactions": 1, "waiting_for": {},
               "problem": "the change log holds more changes than the transaction record counts: hr.staff: 3 changes "
                          "at position 9, its record (0-1-9) says 2", "malformed_records": 1},
    }  # fmt: skip
    status = build_status(now, [], {"lake": {"state": "applying", "consistent_cuts": cuts}}, None, {}, [], 120)
    [sink] = status["sinks"]
    rows = {c["source"]: c for c in sink["cuts"]}
    assert rows["shop"]["gtid"] == "0-1-4711" and rows["shop"]["age_s"] == pytest.approx(3.0)
    assert rows["shop"]["waiting"] == "shop.lines 1/3" and rows["hr"]["gtid"] is None
    warnings = "\n".join(status["warnings"])
    assert "the consistent cut of hr cannot move: the change log holds more changes" in warnings
    assert "1 transaction record(s) of hr were not readable" in warnings and "of shop" not in warnings
    html = _page(status)
    assert "consistent cut of shop: after 0-1-4711" in html and "(next: shop.lines 1/3)" in html
    assert "consistent cut of hr: no transaction whole yet" in html


def _page(status: dict[str, Any]) -> str:
    from cdcflow.ui import app

    template = app._templates.get_template("status.html")
    return template.render(s=status, chart=lambda *a: "", now=status["generated_at_s"], refresh=5, window_min=10)
