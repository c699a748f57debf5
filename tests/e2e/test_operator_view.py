"""The operator's view against real processes: `cdcflow hbase run`, `cdcflow mysql run`, `cdcflow pipeline
run`, `cdcflow verify hbase --every` and `cdcflow ui`, all started from one config on the test stack.

- Every metric name documented in docs/operations.md is served by its process (scraped).
- The status page, loaded in a real headless Chromium, shows the captures' and sinks' numbers as the
  metrics give them, a failing sink as FAILING, the verify result, and the warning for an enabled
  HBase peer with no instance once the peer stops. A screenshot is kept in the test's folder.
- Continuous verification catches a row changed directly in the sink (a confirmed difference, in the
  metrics and on the page), and the one-shot `cdcflow verify hbase` exits 1 on it.
"""

from __future__ import annotations

import html
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import Put
from cdcflow.clients.kafka import produce_sync
from cdcflow.clients.mysql import execute
from cdcflow.dev.demo.hbase_workload import HBaseWorkload
from cdcflow.dev.stack.ports import free_port
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.browser import rendered_dom, screenshot
from cdcflow.dev.testing.mysql import admin_endpoint, source_config
from cdcflow.ui.status import parse_metrics, total
from cdcflow.verify.hbase import verify_hbase

from .hbase_capture import PeerSetup

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
ROWS = 300


def documented_metrics() -> dict[str, set[str]]:
    """docs/operations.md's metric tables: section title -> the names in its first column."""
    out: dict[str, set[str]] = {}
    section = ""
    for line in DOCS.read_text().splitlines():
        if line.startswith("### "):
            section = line[4:]
        m = re.match(r"\| `(cdcflow_[a-z_]+)` \|", line)
        if m and section:
            out.setdefault(section, set()).add(m.group(1))
    return out


def served_names(url: str) -> set[str]:
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name = line.split()[2]
            names |= {name, f"{name}_total"}  # a counter's family may be declared without its _total
        elif line and not line.startswith("#"):
            names.add(line.split("{")[0].split(" ")[0])
    return names


def scrape(url: str) -> dict[Any, float]:
    return parse_metrics(urllib.request.urlopen(url, timeout=10).read().decode())


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, logs: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{logs()}")
        time.sleep(1)


def test_status_page_metrics_and_continuous_verify(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any],
    mariadb: dict[str, Any], tmp_path: Path,
) -> None:  # fmt: skip
    name = peer_setup.name
    table = f"{name}_t"
    workload = HBaseWorkload(hbase_client, [table], rows_per_table=ROWS, seed=19)
    workload.create_tables(with_copies=True)
    peer_setup.add_peer(table)

    db = unique_name("ops")
    admin = admin_endpoint(mariadb)
    execute(admin, f"CREATE DATABASE {db}")
    execute(admin, f"CREATE TABLE {db}.items (id INT PRIMARY KEY, label VARCHAR(40))")
    mysql = source_config(unique_name("opsrc"), [db]).model_dump(mode="json")
    mysql.update(host=mariadb["host"], port=mariadb["port"], user=mariadb["repl_user"],
                 password=mariadb["repl_password"])  # fmt: skip
    ports = {p: free_port() for p in ("hbase", "mysql", "pipeline", "verify", "ui")}
    broken_target = tmp_path / "not-a-directory"
    broken_target.write_text("a file where the sink wants a directory: every batch fails")
    cfg = yaml.safe_load(peer_setup.config_path.read_text())
    cfg.update({
        "mysql": mysql,
        "pipeline": {
            "topics": f"{name}\\..*", "dead_letter_topic": f"{name}-dead-letter",
            "checkpoint_dir": str(tmp_path / "checkpoints"), "trigger_seconds": 1, "retry_backoff_max_s": 5,
            "sinks": [
                {"name": "copy", "type": "hbase"},
                {"name": "broken", "type": "parquet", "topics": f"cdcflow\\.{mysql['name']}\\..*",
                 "options": {"path": str(broken_target / "out")}},
            ],
        },
        "metrics": {f"{p}_port": ports[p] for p in ("hbase", "mysql", "pipeline", "verify")},
        "ui": {"port": ports["ui"], "scrape_seconds": 1, "state_seconds": 2},
        "verify": {"topic": f"{name}-verify"},
    })  # fmt: skip
    config = tmp_path / "ops.yaml"
    config.write_text(yaml.safe_dump(cfg))
    peer_setup.config_path.write_text(config.read_text())  # the peer reads the same file
    url = {p: f"http://127.0.0.1:{ports[p]}/metrics" for p in ("hbase", "mysql", "pipeline", "verify")}
    page = f"http://127.0.0.1:{ports['ui']}/"

    procs: dict[str, subprocess.Popen[bytes]] = {}
    port_holder = socket.socket()
    port_holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the peer's TIME_WAIT connections

    def start(role: str, *args: str) -> None:
        with open(tmp_path / f"{role}.log", "ab") as log:
            procs[role] = subprocess.Popen(
                [sys.executable, "-m", "cdcflow.cli.main", *args, "--config", str(config)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def logs() -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log")))

    def up(u: str) -> bool:
        try:
            urllib.request.urlopen(u, timeout=2).read()
            return True
        except OSError:
            return False

    try:
        peer = peer_setup.start()
        start("mysql", "mysql", "run")
        start("pipeline", "pipeline", "run")
        start("ui", "ui")
        wait_for("the MySQL capture's metrics", lambda: up(url["mysql"]), 60, logs)
        workload.step(400)
        workload.step(400)
        for i in range(20):
            execute(admin, f"INSERT INTO {db}.items VALUES ({i}, 'item {i}')")

        def metric(process: str, name: str, **labels: str) -> float:
            return total(scrape(url[process]), name, **labels)

        def copied() -> bool:
            return verify_hbase(hbase_client, table, hbase_client, f"{table}_copy", 1000).clean

        wait_for("the HBase copy to equal its source", copied, 240, logs)
        # A record that is not an event, in a topic the copy sink reads: dead-lettered, shown with its reason.
        garbage_at = produce_sync(kafka["bootstrap_servers"], f"{name}.default.{table}", [(b"k", b"not json {")])
        wait_for("the dead letter", lambda: metric("pipeline", "cdcflow_pipeline_dead_letters_total", sink="copy") == 1,
                 120, logs)  # fmt: skip
        wait_for("the MySQL capture to publish 20 events",
                 lambda: metric("mysql", "cdcflow_mysql_events_total") >= 20, 60, logs)  # fmt: skip
        wait_for("the broken sink to fail",
                 lambda: metric("pipeline", "cdcflow_pipeline_failing", sink="broken") == 1, 180, logs)  # fmt: skip

        # Every documented name is served by its process.
        documented = documented_metrics()
        sections = {"HBase peer": url["hbase"], "MySQL capture": url["mysql"], "Pipeline": url["pipeline"]}
        for title, names in documented.items():
            target = next((u for prefix, u in sections.items() if title.startswith(prefix)), None)
            if target is None:
                continue
            missing = names - served_names(target)
            assert not missing, f"{title}: documented but not served: {sorted(missing)}"
        assert {"HBase peer", "MySQL capture", "Pipeline", "Verification"} <= {t.split(" (")[0] for t in documented}

        # Continuous verification: rolling ranges of 150 rows every second, differences confirmed after 1 s.
        start("verify", "verify", "hbase", table, f"{table}_copy", "--max-versions", "1000",
              "--every", "1s", "--sample", "150", "--grace", "1s")  # fmt: skip
        check = f"hbase {table} -> {table}_copy"
        wait_for("a full clean pass of continuous verification",
                 lambda: up(url["verify"]) and total(scrape(url["verify"]), "cdcflow_verify_rounds_total",
                                                     check=check, outcome="clean") >= 3, 120, logs)  # fmt: skip
        verify_metrics = scrape(url["verify"])
        assert names_served(url["verify"], documented["Verification (`cdcflow verify hbase ... --every`)"])
        assert total(verify_metrics, "cdcflow_verify_rounds_total", check=check, outcome="different") == 0

        # The page shows what the metrics say (the workload is done: the figures are stable).
        hbase_rows = int(total(scrape(url["hbase"]), "cdcflow_hbase_rows_total"))
        mysql_events = int(total(scrape(url["mysql"]), "cdcflow_mysql_events_total"))
        copy_rows = int(total(scrape(url["pipeline"]), "cdcflow_pipeline_rows_total", sink="copy"))
        assert hbase_rows >= workload.mutations and copy_rows >= workload.mutations
        time.sleep(3)  # a scrape and a state read of the page after those
        dom = rendered_dom(page)
        captures = _rows_of(dom, "captures")
        assert any('data-kind="hbase"' in r and f">{hbase_rows:,}<" in r for r in captures), captures
        assert any('data-kind="mysql"' in r and f">{mysql_events:,}<" in r for r in captures), captures
        sinks = _rows_of(dom, "sinks")
        copy_row = next(r for r in sinks if 'data-sink="copy"' in r)
        assert f">{copy_rows:,}<" in copy_row and ">ok<" in copy_row, copy_row
        broken_row = next(r for r in sinks if 'data-sink="broken"' in r)
        assert "FAILING" in broken_row, broken_row
        assert "sink broken is FAILING" in dom
        assert html.escape(check) in dom and ">clean<" in dom
        assert "no cdcflow instance is serving it" not in dom
        (letter,) = _rows_of(dom, "dead-letters")[1:]
        partition, offset = garbage_at[0]
        assert f"{name}-dead-letter" in letter and ">copy<" in letter and "not a JSON object" in letter, letter
        assert f"{name}.default.{table}/{partition}@{offset}" in letter, letter
        assert ">1<" in copy_row  # its dead-letter count
        # Readable charts: every capture and the working sink draw each chart with data points,
        # titled, with the value now and a labelled time axis.
        capture_charts, sink_charts = {"rows/s", "lag behind the source"}, {"batch time", "Kafka records behind"}
        expected = {
            'data-for="capture:[^"]*" data-kind="hbase"': capture_charts,
            'data-for="capture:[^"]*" data-kind="mysql"': capture_charts,
            'data-for="sink:copy" data-kind="sink"': capture_charts | sink_charts,
        }
        for key, titles in expected.items():
            charts = _charts_of(dom, key)
            assert set(charts) == titles and all(n > 0 for n in charts.values()), (key, charts)
        assert ">-60 min<" in dom and ">now<" in dom

        # A row changed directly in the sink: continuous verify confirms it; so does the one-shot command.
        hbase_client.mutate(f"{table}_copy", Put(b"row-00150").add(b"cf", b"tampered", b"by hand", 5))
        wait_for("continuous verify to confirm the difference",
                 lambda: metric("verify", "cdcflow_verify_differences", check=check) >= 1, 60, logs)  # fmt: skip
        one_shot = subprocess.run(
            [sys.executable, "-m", "cdcflow.cli.main", "verify", "hbase", table, f"{table}_copy", "--max-versions",
             "1000", "--config", str(config)], capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert one_shot.returncode == 1, one_shot.stdout + one_shot.stderr
        assert "CONFIRMED DIFFERENCES" in one_shot.stdout and "row-00150" in one_shot.stdout, one_shot.stdout
        wait_for("the page to show the confirmed difference", lambda: "confirmed difference" in rendered_dom(page),
                 30, logs)  # fmt: skip

        # The peer stops while its HBase peer stays enabled: the page warns that nothing serves it.
        os.killpg(peer.pid, signal.SIGTERM)
        peer.wait(60)
        # Hold its metrics port (bound, not listening: connections are refused as to a free port), so that no
        # process of the other test lane binds it and answers there meanwhile. A CI run on b17df5b found the
        # HBase row gone from the page at this point, as if something else answered on the port.
        port_holder.bind(("127.0.0.1", ports["hbase"]))
        wait_for("the warning for an enabled peer without instances",
                 lambda: "no cdcflow instance is serving it" in rendered_dom(page), 60, logs)  # fmt: skip
        # Later rounds compared other ranges clean: the confirmed difference is still reported.
        rounds = metric("verify", "cdcflow_verify_rounds_total", check=check)
        wait_for("more rounds", lambda: metric("verify", "cdcflow_verify_rounds_total", check=check) >= rounds + 2, 60)
        assert metric("verify", "cdcflow_verify_differences", check=check) == 1
        dom = rendered_dom(page)
        assert "1 confirmed difference" in dom
        captures = _rows_of(dom, "captures")
        hbase_capture = next((r for r in captures if 'data-kind="hbase"' in r), None)
        assert hbase_capture is not None, f"no HBase row: {captures}\n{_api_status(page)}"
        assert "not answering: values as of" in hbase_capture, hbase_capture  # its endpoint went with it
        shot = screenshot(page, tmp_path / "status-page.png")
        print(f"status page screenshot: {shot}")
    finally:
        port_holder.close()
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        execute(admin, f"DROP DATABASE IF EXISTS {db}")


def _api_status(page: str) -> str:
    try:
        with urllib.request.urlopen(f"{page}api/status", timeout=10) as resp:
            return str(resp.read().decode()[:5000])
    except OSError as exc:
        return f"/api/status: {exc}"


def names_served(url: str, names: set[str]) -> bool:
    missing = names - served_names(url)
    assert not missing, f"documented but not served at {url}: {sorted(missing)}"
    return True


def _charts_of(dom: str, attributes: str) -> dict[str, int]:
    """The charts of the capture or sink whose chart group has `attributes` (a regex): title → points drawn."""
    m = re.search(rf'<div class="chart-group" {attributes}>(.*?)</div></div>', dom, re.S)
    assert m, f"no charts for {attributes} on the page"
    found = re.findall(r'<svg class="chart" data-title="([^"]*)" data-points="(\d+)"', m.group(1))
    return {title: int(points) for title, points in found}


def _rows_of(dom: str, table_id: str) -> list[str]:
    m = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.S)
    assert m, f"no table {table_id} on the page"
    return re.findall(r"<tr[^>]*>.*?</tr>", m.group(1), re.S)
