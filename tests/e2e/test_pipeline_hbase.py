"""HBase → peer → Kafka → Spark pipeline → HBase copy, against the real services."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.admin import set_family_attributes
from cdcflow.clients.hbase.model import ColumnFamily, Delete, Put
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.pipeline import metrics
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.runner import Pipeline
from cdcflow.pipeline.sinks.delta.log import changes
from cdcflow.pipeline.sinks.delta.views import hbase_state_rows
from cdcflow.verify.hbase import compare_rows, rows_of, verify_hbase

from .hbase_capture import PeerSetup, scan_cells, wait_until_replicated
from .test_hbase_capture import workload

FAMILIES = [ColumnFamily("cf", max_versions=1000), ColumnFamily("cg", max_versions=1000)]


def pipeline_for(
    peer: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], checkpoints: Path, *sinks: SinkConfig, **cfg: Any
) -> tuple[PipelineConfig, dict[str, Any], Path]:
    """A pipeline reading only this test's topics, with its own dead-letter topic."""
    config = PipelineConfig(
        topics=f"{peer.name}\\..*", dead_letter_topic=f"{peer.name}-dead-letter", sinks=sinks, **cfg
    )
    return config, {"bootstrap_servers": kafka["bootstrap_servers"], "zk_quorum": hbase["zk_quorum"]}, checkpoints


def captured_table(hbase_client: HBaseClient, peer: PeerSetup, split_keys: Sequence[bytes] = ()) -> tuple[str, str]:
    """This test's source table, captured by its own running peer: (table, its change topic)."""
    source = f"{peer.name}_src"
    hbase_client.create_table(source, FAMILIES, split_keys=split_keys)
    peer.add_peer(source)
    peer.start()
    return source, f"{peer.name}.default.{source}"


def wait_for_topic_rows(kafka: dict[str, Any], topic: str, rows: int) -> None:
    got = k.consume(kafka["bootstrap_servers"], topic, expected=rows, timeout_s=120)
    assert len(got) >= rows, f"only {len(got)} of {rows} events reached {topic}"


def test_pipeline_copies_hbase_exactly_and_dead_letters_garbage(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup, split_keys=[b"\x40", b"\x80", b"\xc0"])
    hbase_client.create_table(f"{source}_copy", FAMILIES)
    workload(hbase_client, source, random.Random(11))
    # every region's last write published (a count of records came before the workload's last deletes did)
    wait_until_replicated(hbase_client, kafka["bootstrap_servers"], source, topic, [b"", b"\x40", b"\x80", b"\xc0"])
    # malformed records in the same topic: not JSON, wrong schema, negative position
    bad_pos = b'{"schema":"cdcflow.change/1","op":"u","source":{"connector":"hbase","pos":[-1]},"cells":[]}'
    garbage = [(b"g1", b"\xff\x00 not json"), (b"g2", b'{"schema":"other/9"}'), (b"g3", bad_pos)]
    k.produce_sync(kafka["bootstrap_servers"], topic, garbage)
    dlq = f"{peer_setup.name}-dead-letter"
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints", SinkConfig(name="hbase_copy", type="hbase")
    )
    result = Pipeline(cfg, context, checkpoints).run(available_now=True)
    assert result == {"hbase_copy": "done"}

    assert scan_cells(hbase_client, f"{source}_copy") == scan_cells(hbase_client, source)
    report = verify_hbase(hbase_client, source, hbase_client, f"{source}_copy", max_versions=1000)
    assert report.clean and report.rows_compared > 50, report.summary()
    letters = [
        json.loads(r.value or b"{}") for r in k.consume(kafka["bootstrap_servers"], dlq, expected=3, timeout_s=60)
    ]
    assert sorted(d["error"] for d in letters) == sorted(
        [
            "not a JSON object",
            "schema is not cdcflow.change/1",
            "source.pos must be a non-empty array of non-negative integers",
        ]
    )
    assert all(d["topic"] == topic and d["offset"] >= 0 for d in letters)
    assert read_progress(checkpoints)["hbase_copy"]["rows"] >= 0

    # More changes, another run from the same checkpoints: applies only what is new, still exact.
    hbase_client.mutate(source, Put(b"\x41new").add(b"cf", b"n", b"1", 9000))
    hbase_client.mutate(source, Delete(b"\x41new").column(b"cf", b"n", 8000))
    wait_until_replicated(hbase_client, kafka["bootstrap_servers"], source, topic, [b"\x40"])  # \x41new's region
    Pipeline(cfg, context, checkpoints).run(available_now=True)
    assert scan_cells(hbase_client, f"{source}_copy") == scan_cells(hbase_client, source)


def test_a_failing_sink_does_not_block_the_others_and_catches_up(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup)
    hbase_client.mutate_batch(source, [Put(b"r%03d" % i).add(b"cf", b"c", b"v%d" % i, 100 + i) for i in range(200)])
    wait_for_topic_rows(kafka, topic, 200)
    changelog = tmp_path / "changelog"
    # a target without the source's families: every write fails (NoSuchColumnFamilyException)
    hbase_client.create_table(f"{source}_not_fixed_yet", [ColumnFamily("other")])
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="broken", type="hbase", options={"table_suffix": "_not_fixed_yet"}),
        SinkConfig(name="changelog", type="parquet", options={"path": str(changelog)}),
        retry_backoff_max_s=1.0,
    )  # fmt: skip
    pipeline = Pipeline(cfg, context, checkpoints)
    result = pipeline.run(available_now=True, max_failures=2)
    assert result["changelog"] == "done" and result["broken"].startswith("failed")
    assert pipeline.spark is not None
    assert pipeline.spark.read.parquet(str(changelog)).count() == 200  # the healthy sink applied everything
    assert read_progress(checkpoints)["broken"]["state"] == "failing"

    hbase_client.delete_table(f"{source}_not_fixed_yet")  # the cause is fixed: the sink creates it as it should be
    result = Pipeline(cfg, context, checkpoints).run(available_now=True)
    assert result["broken"] == "done"
    report = verify_hbase(hbase_client, source, hbase_client, f"{source}_not_fixed_yet")
    assert report.clean and report.rows_compared == 200, report.summary()
    # created with the source's families and settings, and not replicated again
    assert hbase_client.family_attributes(f"{source}_not_fixed_yet") == {
        f: {**attrs, "REPLICATION_SCOPE": "0"} for f, attrs in hbase_client.family_attributes(source).items()
    }


def test_a_table_created_while_the_pipeline_runs_does_not_stall_the_sink(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """A table created (REPLICATION_SCOPE 1) while the pipeline runs made the
    hbase sink fail on the missing `<table>_copy` and stop applying every other table. Now the
    sink creates it; with create_tables false its events go to the dead letters and the other
    tables keep flowing."""
    import threading

    old, new = f"{peer_setup.name}_old", f"{peer_setup.name}_new"
    hbase_client.create_table(old, FAMILIES)
    peer_setup.add_peer(old, new)  # the new table is listed before it exists, as `scope` would do later
    peer_setup.start()
    hbase_client.create_table(f"{old}_strict", FAMILIES)  # the strict sink's copy of the old table only
    put = lambda i: Put(b"r%03d" % i).add(b"cf", b"c", b"v%d" % i, 100 + i)  # noqa: E731
    hbase_client.mutate_batch(old, [put(i) for i in range(50)])
    dlq = f"{peer_setup.name}-dead-letter"
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="copy", type="hbase"),
        SinkConfig(name="strict", type="hbase", options={"table_suffix": "_strict", "create_tables": False}),
        trigger_seconds=1,
    )  # fmt: skip
    pipeline = Pipeline(cfg, context, checkpoints)
    stop = threading.Event()
    result: dict[str, str] = {}
    runner = threading.Thread(target=lambda: result.update(pipeline.run(stop=stop)))
    runner.start()
    try:
        wait_until_equal(hbase_client, old, f"{old}_copy", 50)
        hbase_client.create_table(new, FAMILIES)  # while the pipeline runs
        hbase_client.mutate_batch(new, [put(i) for i in range(30)])
        hbase_client.mutate_batch(old, [put(i) for i in range(50, 80)])
        wait_until_equal(hbase_client, new, f"{new}_copy", 30)  # created by the sink
        wait_until_equal(hbase_client, old, f"{old}_copy", 80)
        wait_until_equal(hbase_client, old, f"{old}_strict", 80)  # the strict sink kept flowing
        letters = [json.loads(r.value or b"{}") for r in k.consume(kafka["bootstrap_servers"], dlq, expected=30,
                                                                    timeout_s=60)]  # fmt: skip
        assert len(letters) == 30 and all(f"{new}_strict does not exist and create_tables is false" in d["error"]
                                          for d in letters), letters[:2]  # fmt: skip
        assert {d["topic"] for d in letters} == {f"{peer_setup.name}.default.{new}"}
        assert not hbase_client.table_exists(f"{new}_strict")
        progress = read_progress(checkpoints)
        assert progress["copy"].get("failures", 0) == 0 and progress["strict"].get("failures", 0) == 0
    finally:
        stop.set()
        runner.join(120)
    assert result == {"copy": "done", "strict": "done"}


def wait_until_equal(client: HBaseClient, source: str, copy: str, rows: int, timeout_s: float = 120) -> None:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            report = verify_hbase(client, source, client, copy)
        except Exception:
            report = None
        if report is not None and report.clean and report.rows_compared == rows:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{copy} never equalled {source}: {report.summary() if report else 'no table'}")
        time.sleep(1)


def test_delta_changelog_holds_each_change_exactly_once(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    source, topic = captured_table(hbase_client, peer_setup)
    for i in range(100):
        hbase_client.mutate(source, Put(b"r%02d" % (i % 30)).add(b"cf", b"c", b"v%d" % i, 1000 + i))
    records = k.consume(kafka["bootstrap_servers"], topic, expected=100, timeout_s=120)
    assert len(records) == 100
    # at-least-once upstream: deliver 20 of them a second time
    k.produce_sync(kafka["bootstrap_servers"], topic, [(r.key, r.value or b"") for r in records[:20]])
    table = tmp_path / "changelog"
    cfg, context, checkpoints = pipeline_for(
        peer_setup, kafka, hbase, tmp_path / "checkpoints",
        SinkConfig(name="delta", type="delta_changelog", options={"path": str(table)}),
        max_offsets_per_trigger=30,  # several batches
    )  # fmt: skip
    pipeline = Pipeline(cfg, context, checkpoints)
    assert pipeline.run(available_now=True)["delta"] == "done"
    assert pipeline.spark is not None
    stored = pipeline.spark.read.format("delta").load(str(table))
    assert stored.count() == 120  # the log is a blind append: the 20 re-delivered changes are stored again
    read = changes(pipeline.spark, str(table))
    assert read.count() == 100  # and shown once
    assert read.select("event_key", "region", "pos").distinct().count() == 100

    # a new checkpoint replays the whole topic (as after losing the checkpoint): still 100 changes
    assert Pipeline(cfg, context, tmp_path / "checkpoints-2").run(available_now=True)["delta"] == "done"
    assert changes(pipeline.spark, str(table)).count() == 100


def test_the_copy_expires_cells_as_the_source_and_follows_a_ttl_change(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """Expiry writes nothing to the WAL, so no peer hears of it: the copy expires cells itself, with the source
    family's TTL (created with it, and set again when the source's changes), and the Delta current view hides
    them by that TTL. A cell two hours old under a one-hour TTL is hidden in all three; with the source's TTL
    raised to three hours, a new two-hour-old cell shows in all three."""
    source = f"{peer_setup.name}_src"
    hbase_client.create_table(source, [ColumnFamily("cf", max_versions=10, ttl_s=3600)])
    peer_setup.add_peer(source)
    peer_setup.start()
    topic = f"{peer_setup.name}.default.{source}"
    now_ms = int(time.time() * 1000)
    for i in range(5):
        hbase_client.mutate(source, Put(b"r%d" % i).add(b"cf", b"fresh", b"v%d" % i))
        hbase_client.mutate(source, Put(b"r%d" % i).add(b"cf", b"old", b"o%d" % i, now_ms - 2 * 3600 * 1000))
    wait_until_replicated(hbase_client, kafka["bootstrap_servers"], source, topic)
    copy = f"{source}_copy"
    sink = SinkConfig(name="hbase_copy", type="hbase", options={})
    lake = SinkConfig(name="lake", type="delta", options={"path": str(tmp_path / "lake"), "max_versions": 10,
                                                          "register_in_catalog": False})  # fmt: skip
    config = pipeline_for(peer_setup, kafka, hbase, tmp_path / "cp", sink, lake)
    pipeline = Pipeline(*config)
    assert pipeline.run(available_now=True) == {"hbase_copy": "done", "lake": "done"}
    assert hbase_client.family_attributes(copy)["cf"].get("TTL") == "3600"
    report = verify_hbase(hbase_client, source, hbase_client, copy, max_versions=10)
    assert report.clean and report.rows_compared == 6, report.summary() + str(report.examples)  # 5 + the sentinel
    assert pipeline.spark is not None
    state = str(tmp_path / "lake" / "it" / "default" / source)  # <path>/<source name: the peer's>/<ns>/<table>
    # the Delta state keeps the expired cells; its current view hides them as HBase does
    report = compare_rows(rows_of(hbase_client.scan(source, max_versions=10)),
                          hbase_state_rows(pipeline.spark, state, max_versions=10))  # fmt: skip
    assert report.clean and report.rows_compared == 6, report.summary() + str(report.examples)
    assert not any(q == b"old" for _row, cells in rows_of(hbase_client.scan(copy)) for _f, q, _t, _v in cells)

    set_family_attributes(hbase_client, source, {"cf": {"TTL": str(3 * 3600)}})
    hbase_client.mutate(source, Put(b"r9").add(b"cf", b"fresh", b"v9"))
    hbase_client.mutate(source, Put(b"r9").add(b"cf", b"old", b"o9", now_ms - 2 * 3600 * 1000))  # alive under 3 h
    wait_for_topic_rows(kafka, topic, 13)  # the 10 puts, the sentinel, r9's two
    assert Pipeline(*config).run(available_now=True) == {"hbase_copy": "done", "lake": "done"}
    assert hbase_client.family_attributes(copy)["cf"].get("TTL") == str(3 * 3600)
    # r9's two-hour-old cell shows in the view under the raised TTL. (The older ones show again in the view too:
    # it only hides cells, where HBase dropped them for good when the TTL change reopened the region; docs.)
    report = compare_rows(rows_of(hbase_client.scan(source, max_versions=10, start_row=b"r9", stop_row=b"r9\x00")),
                          hbase_state_rows(pipeline.spark, state, 10, b"r9", b"r9\x00"))  # fmt: skip
    assert report.clean and report.rows_compared == 1, report.summary() + str(report.examples)
    report = verify_hbase(hbase_client, source, hbase_client, copy, max_versions=10)
    assert report.clean and report.rows_compared == 7, report.summary() + str(report.examples)
    # (the two-hour-old cells written under the one-hour TTL stay gone: HBase dropped them when the TTL change
    # reopened the region, in the source as in the copy)
    assert [r for r, cells in rows_of(hbase_client.scan(copy)) for _f, q, _t, _v in cells if q == b"old"] == [b"r9"]


def test_a_truncated_source_table_empties_the_copy_and_the_delta_state(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """HBase writes nothing to the WAL for a truncate: the peer notices it in hbase:meta (every region new, and
    no cell older than them left at the source) and publishes an op t event. A split also makes every region
    new but keeps the cells: nothing is published. The copy and the Delta state lose the rows written before
    the truncate, keep those written after, and a change from before it delivered again later stays out."""
    bootstrap = kafka["bootstrap_servers"]
    peer_setup.write_config(table_watch_s=1)
    source = f"{peer_setup.name}_src"
    hbase_client.create_table(source, [ColumnFamily("cf", max_versions=10)])
    peer_setup.add_peer(source)
    peer_setup.start()
    topic = f"{peer_setup.name}.default.{source}"
    for row in (b"a", b"b", b"n", b"z"):
        hbase_client.mutate(source, Put(row).add(b"cf", b"q", b"old-" + row))
    wait_until_replicated(hbase_client, bootstrap, source, topic)
    before = [r for r in k.consume(bootstrap, topic, expected=5, timeout_s=60) if r.key in (b"a", b"b", b"n", b"z")]
    assert len(before) == 4

    def published(text: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while text not in peer_setup.full_logs():
            assert time.monotonic() < deadline, f"the peer never logged {text!r}:\n{peer_setup.logs()}"
            time.sleep(0.5)

    hbase_client.split_region(source, b"m")  # every region new, the cells kept: not a truncate
    published("every region is new (split or merged) and still holds older cells: not emptied")
    hbase_client.truncate_table(source, preserve_splits=True)
    published("truncated or deleted and created again: every cell older than")
    for row in (b"b", b"c"):
        hbase_client.mutate(source, Put(row).add(b"cf", b"q", b"new-" + row))
    wait_until_replicated(hbase_client, bootstrap, source, topic, [b"", b"m"])
    events = [json.loads(r.value or b"{}") for r in k.read_to_end(bootstrap, topic)]
    truncates = [e for e in events if e["op"] == "t"]
    # One per partition; a look that came while HBase's truncate had the table out of hbase:meta also published it
    # as dropped first (then, made anew, as truncated), which is what the source showed at the time.
    causes = [e["truncate"]["cause"] for e in truncates]
    assert causes.count("truncate") == k.partition_count(bootstrap, topic) and set(causes) <= {"truncate", "drop"}
    assert causes[-1] == "truncate", causes

    sinks = (
        SinkConfig(name="hbase_copy", type="hbase", options={}),
        SinkConfig(name="lake", type="delta", options={"path": str(tmp_path / "lake"), "max_versions": 10,
                                                       "register_in_catalog": False}),
    )  # fmt: skip
    config = pipeline_for(peer_setup, kafka, hbase, tmp_path / "cp", *sinks)
    state = str(tmp_path / "lake" / "it" / "default" / source)

    def check() -> None:
        pipeline = Pipeline(*config)
        assert pipeline.run(available_now=True) == {"hbase_copy": "done", "lake": "done"}
        expected = {b"b": b"new-b", b"c": b"new-c"}
        source_rows = {r: {q: v for _f, q, _t, v in cells} for r, cells in rows_of(hbase_client.scan(source))}
        assert {r: c[b"q"] for r, c in source_rows.items() if b"q" in c} == expected
        report = verify_hbase(hbase_client, source, hbase_client, f"{source}_copy", max_versions=10)
        assert report.clean and report.rows_compared == 4, report.summary() + str(report.examples)  # + 2 sentinels
        assert pipeline.spark is not None
        report = compare_rows(rows_of(hbase_client.scan(source, max_versions=10)),
                              hbase_state_rows(pipeline.spark, state, max_versions=10))  # fmt: skip
        assert report.clean and report.rows_compared == 4, report.summary() + str(report.examples)

    check()
    # At-least-once: the changes from before the truncate arrive again, after it.
    k.produce_sync(bootstrap, topic, [(r.key, r.value) for r in before])
    check()


def test_an_oversized_hbase_change_is_put_back_together_by_every_sink(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any], hbase: dict[str, Any], tmp_path: Path
) -> None:
    """A cell larger than the topic's records: the peer publishes a marker and its parts, the pipeline reads the
    parts at the offsets the marker names, and the copy and the Delta state get the whole cell."""
    bootstrap = kafka["bootstrap_servers"]
    peer_setup.write_config(max_record_bytes=256 * 1024, oversize_topic=f"{peer_setup.name}-oversize")
    source = f"{peer_setup.name}_src"
    hbase_client.create_table(source, [ColumnFamily("cf", max_versions=10)])
    peer_setup.add_peer(source)
    peer_setup.start()
    topic = f"{peer_setup.name}.default.{source}"
    big = random.Random(5).randbytes(600_000)
    hbase_client.mutate(source, Put(b"big").add(b"cf", b"blob", big).add(b"cf", b"small", b"s"))
    hbase_client.mutate(source, Put(b"other").add(b"cf", b"q", b"v"))
    wait_until_replicated(hbase_client, bootstrap, source, topic)
    markers = [json.loads(r.value or b"{}") for r in k.read_to_end(bootstrap, topic)]
    assert [m["oversize"]["offsets"] != [] for m in markers if m.get("oversize")] == [True]

    sinks = (
        SinkConfig(name="hbase_copy", type="hbase", options={}),
        SinkConfig(name="lake", type="delta", options={"path": str(tmp_path / "lake"), "register_in_catalog": False}),
    )
    before = {s.name: metrics.OVERSIZE_APPLIED.labels(s.name)._value.get() for s in sinks}
    pipeline = Pipeline(*pipeline_for(peer_setup, kafka, hbase, tmp_path / "cp", *sinks))
    assert pipeline.run(available_now=True) == {"hbase_copy": "done", "lake": "done"}
    assert {s.name: metrics.OVERSIZE_APPLIED.labels(s.name)._value.get() - before[s.name] for s in sinks} == {
        "hbase_copy": 1,
        "lake": 1,
    }
    report = verify_hbase(hbase_client, source, hbase_client, f"{source}_copy", max_versions=10)
    assert report.clean and report.rows_compared == 3, report.summary() + str(report.examples)  # + the sentinel
    assert pipeline.spark is not None
    state = str(tmp_path / "lake" / "it" / "default" / source)
    report = compare_rows(rows_of(hbase_client.scan(source, max_versions=10)),
                          hbase_state_rows(pipeline.spark, state, max_versions=10))  # fmt: skip
    assert report.clean and report.rows_compared == 3, report.summary() + str(report.examples)
