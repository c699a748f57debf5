"""History (SCD type 2) and point-in-time reads of a Delta sink's MySQL tables (real Spark and Delta; Kafka for
the typed layout's schema history), against an oracle the test's own workload keeps while it generates the
transactions: every committed row version with the GTID and time of its transaction. The changes reach the sink
in random batches, some late (after newer ones of the same row), a quarter of them twice, a transaction's changes
split across batches, with folds that stop after their MERGEs and are done again."""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdcflow.clients import kafka as k
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.dev.testing import soak_size
from cdcflow.errors import ConfigError
from cdcflow.events.json_codec import encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.pipeline import metrics
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.library import as_of, history
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta import fold_service
from cdcflow.pipeline.sinks.delta.layouts.base import FoldHooks
from cdcflow.pipeline.sinks.delta.records import deletes_path, history_path, read_record
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink
from cdcflow.pipeline.sinks.delta.views import current_view

SOURCE, DB, TABLE = "hist", "shop", "items"
BASE_TS = 1_700_000_000_000
FIRST_SEQ = 100


@dataclass(frozen=True)
class Change:
    op: str  # c, u, d, t
    key: int | None
    row: dict[str, Any] | None  # the row after it (None: deleted; truncate)
    pos: tuple[int, int, int]
    ts_ms: int


@dataclass
class Version:
    key: int
    row: dict[str, Any]
    valid_from: tuple[int, int, int]
    valid_to: tuple[int, int, int] | None = None


@dataclass
class Workload:
    """Transactions as the workload ran them, and what it knows of them: the table after each one (with the
    transaction's GTID sequence number and time) and every version of every row."""

    transactions: list[list[Change]] = field(default_factory=list)
    after: list[tuple[int, int, dict[int, dict[str, Any]]]] = field(default_factory=list)  # (seq, ts, rows)
    versions: list[Version] = field(default_factory=list)


def run_workload(rng: random.Random, transactions: int, keys: int) -> Workload:
    w = Workload()
    rows: dict[int, dict[str, Any]] = {}
    open_version: dict[int, Version] = {}
    for i in range(transactions):
        seq, ts = FIRST_SEQ + i, BASE_TS + (i // 3) * 1000  # three transactions a second: times repeat
        if i > 20 and rng.random() < 0.03:
            changes = [Change("t", None, None, (seq, 0, 0), ts)]
            rows = {}
            for v in open_version.values():
                v.valid_to = (seq, 0, 0)
            open_version = {}
        else:
            changes = []
            for key in rng.sample(range(keys), rng.randint(1, 4)):
                for _ in range(2 if rng.random() < 0.15 else 1):  # a row changed twice in one transaction
                    if key in rows and rng.random() < 0.25:
                        op, row = "d", None
                    else:
                        op = "u" if key in rows else "c"
                        row = {"id": key, "v": rng.choice(["a", "b", "c"]), "n": rng.randrange(1000)}
                    changes.append(Change(op, key, row, (seq, len(changes) + 1, 0), ts))
                    if row is None:
                        rows.pop(key, None)
                    else:
                        rows[key] = row
            last: dict[int, Change] = {}
            for c in changes:
                assert c.key is not None
                last[c.key] = c
            for key, c in last.items():
                if key in open_version:
                    open_version.pop(key).valid_to = c.pos
                if c.row is not None:
                    version = Version(key, dict(c.row), c.pos)
                    w.versions.append(version)
                    open_version[key] = version
        w.transactions.append(changes)
        w.after.append((seq, ts, {key: dict(row) for key, row in rows.items()}))
    return w


def event_bytes(c: Change, before: dict[str, Any] | None) -> bytes:
    source = SourceInfo("mysql", SOURCE, DB, TABLE, c.ts_ms, c.pos, extra={"gtid": f"0-1-{c.pos[0]}"})
    if c.op == "t":
        event = ChangeEvent(b"{}", Op.TRUNCATE, source, truncate={"cause": "truncate", "ddl": "TRUNCATE TABLE items"})
    else:
        key = json.dumps({"id": c.key}, separators=(",", ":")).encode()
        event = ChangeEvent(key, Op(c.op), source, before=before, after=c.row)
    return encode(event)


def deliveries(rng: random.Random, w: Workload) -> list[list[bytes]]:
    """The workload's changes in batches as an at-least-once capture and Kafka may deliver them: in order but for
    some that come late, a quarter twice."""
    events: list[bytes] = []
    rows: dict[int, dict[str, Any]] = {}
    for changes in w.transactions:
        for c in changes:
            before = rows.get(c.key) if c.key is not None else None
            events.append(event_bytes(c, before))
            if c.op == "t":
                rows = {}
            elif c.row is None:
                rows.pop(c.key, None)  # type: ignore[arg-type]
            else:
                rows[c.key] = c.row  # type: ignore[index]
    for _ in range(len(events) // 10):  # late: moved behind newer changes
        i = rng.randrange(len(events) - 5)
        events.insert(min(len(events), i + rng.randint(5, 60)), events.pop(i))
    for e in rng.sample(events, len(events) // 4):  # twice
        events.insert(rng.randrange(len(events) + 1), e)
    batches, i = [], 0
    while i < len(events):
        n = rng.randint(20, 60)
        batches.append(events[i : i + n])
        i += n
    return batches


def events_frame(spark: SparkSession, values: list[bytes]) -> DataFrame:
    raw = spark.createDataFrame(
        [("t", 0, i, json.dumps(json.loads(v)["key"]).encode(), v) for i, v in enumerate(values)],
        "topic string, partition int, offset long, key binary, value binary",
    )
    return events_of(parse(raw))


class FailTwice(FoldHooks):
    """Two folds stop as a killed driver would, and later folds do their work again: the second fold after its
    MERGEs committed (state and history), before its record; the next one (of a typed table, whose history is
    appended) after its state MERGE, before the history's append, so the reads run with the state two MERGEs
    ahead of its record."""

    def __init__(self) -> None:
        self.folds = 0
        self.failed: list[str] = []

    def merged(self, path: str) -> None:
        self.folds += 1
        if self.folds == 2:
            self.failed.append("merged")
            raise RuntimeError("cdcflow test: a fold stopped between its MERGEs and its record")

    def history_step(self, path: str) -> None:
        if self.folds == 2 and self.failed == ["merged"]:
            self.failed.append("history_step")
            raise RuntimeError("cdcflow test: a fold stopped between its state MERGE and its history append")


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-history")


def _schema_history(bootstrap: str) -> str:
    topic = f"hist-schema-{uuid.uuid4().hex[:8]}"
    columns = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "v", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False, "key_order": None},
        {"name": "n", "type": "INT", "sql_type": "INT", "nullable": True, "key": False, "key_order": None},
    ]
    record = {"kind": "table", "source": SOURCE, "db": DB, "table": TABLE, "columns": columns, "pos": [1, 1, 0]}
    k.create_topic(bootstrap, topic, partitions=1)
    k.produce_sync(bootstrap, topic, [(SOURCE.encode(), json.dumps(record).encode())])
    return topic


def _row(r: Any, layout: str) -> dict[str, Any]:
    """{id, v, n} of a row of a view, whatever the layout."""
    return json.loads(r["after"]) if layout == "json" else {"id": r["id"], "v": r["v"], "n": r["n"]}


def _rows(frame: DataFrame, layout: str) -> list[dict[str, Any]]:
    return [_row(r, layout) for r in frame.collect()]


def _table(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"], r["n"]) for r in rows)


def _history_rows(frame: DataFrame, layout: str) -> list[tuple[Any, ...]]:
    out = []
    for r in frame.collect():
        row, to = _row(r, layout), r["_cdcflow_valid_to_pos"]
        assert r["_cdcflow_current"] == (to is None)
        out.append((row["id"], row["v"], row["n"], tuple(r["_cdcflow_valid_from_pos"]), tuple(to) if to else None))
    return sorted(out, key=repr)


def _expected_history(versions: list[Version], tracked: tuple[str, ...] | None = None) -> list[tuple[Any, ...]]:
    """The workload's versions; with `tracked`, consecutive versions of a row (one ending where the next begins)
    that agree on the tracked columns made one, with the last one's values."""
    out: list[tuple[Any, ...]] = []
    by_key: dict[int, list[Version]] = {}
    for v in versions:
        by_key.setdefault(v.key, []).append(v)
    for key, vs in by_key.items():
        merged: list[Version] = []
        for v in sorted(vs, key=lambda v: v.valid_from):
            prev = merged[-1] if merged else None
            if (tracked and prev is not None and prev.valid_to == v.valid_from
                    and all(prev.row[c] == v.row[c] for c in tracked)):  # fmt: skip
                merged[-1] = Version(key, v.row, prev.valid_from, v.valid_to)
            else:
                merged.append(Version(key, v.row, v.valid_from, v.valid_to))
        out += [(key, v.row["v"], v.row["n"], v.valid_from, v.valid_to) for v in merged]
    return sorted(out, key=repr)


def same(got: list[tuple[Any, ...]], expected: list[tuple[Any, ...]], stage: str) -> None:
    extra, missing = sorted(set(got) - set(expected), key=repr), sorted(set(expected) - set(got), key=repr)
    assert got == expected, (
        f"{stage}: {len(got)} versions, {len(expected)} expected; extra {extra[:6]}, missing {missing[:6]}"
    )


@pytest.mark.parametrize(
    "layout",
    ["typed", pytest.param("json", marks=pytest.mark.skipif(not soak_size(0, 1), reason="make soak only (the same "
                                                            "rules as typed, another projection; 2 minutes)"))],
)  # fmt: skip
def test_history_and_point_in_time_reads_equal_the_workloads_own_account(
    layout: str,
    spark: SparkSession,
    kafka: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    rng = random.Random(54 if layout == "typed" else 55)
    workload = run_workload(rng, transactions=soak_size(120, 400), keys=10)
    batches = deliveries(rng, workload)
    prefix = f"h{uuid.uuid4().hex[:6]}_"
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), mysql_layout=layout, history=True, fold_rows=10**9, fold_interval_s=10**6,
        schema_history_topic=_schema_history(kafka["bootstrap_servers"]), catalog_database_prefix=prefix,
    )  # fmt: skip
    hooks = FailTwice()
    redone = metrics.DELTA_HISTORY_REDONE_APPENDS.labels("hist")._value.get()
    sink = DeltaStateSink("hist", options, Endpoints(bootstrap_servers=kafka["bootstrap_servers"]), hooks=hooks)
    path = sink.table_path(SOURCE, DB, TABLE)
    folded_after = {len(batches) // 3, len(batches) // 2, (2 * len(batches)) // 3}
    for batch_id, batch in enumerate(batches):
        sink.apply_batch(events_frame(spark, batch), batch_id)
        if batch_id in folded_after:
            try:
                sink.flush(spark)
            except RuntimeError as exc:
                assert "a fold stopped" in str(exc)
    # the folds that stopped ran, and later ones did their work again
    assert hooks.failed == (["merged", "history_step"] if layout == "typed" else ["merged"])
    # small tables keep no deletion vectors (deletion_vectors_from_bytes: a fold rewrites their files faster)
    assert not _deletion_vectors(spark, path) and not _deletion_vectors(spark, history_path(path))
    record = read_record(spark, path)
    assert record is not None and record.history and record.history_seeded
    assert record.folded_version < sink.batches.version  # the last batches are not folded: the reads merge them

    def check(stage: str, points: int, tracked: bool = False) -> None:
        """The history, and the table as of `points` GTIDs and `points` source times, as the workload says."""
        same(_history_rows(history(spark, path), layout), _expected_history(workload.versions), stage)
        if tracked:
            got = _history_rows(history(spark, path, track_history_on=["v"]), layout)
            same(got, _expected_history(workload.versions, ("v",)), f"{stage}, tracking v")
        for seq, _ts, rows in rng.sample(workload.after, points):
            assert _table(_rows(as_of(spark, path, gtid=f"0-1-{seq}"), layout)) == _table(list(rows.values())), seq
        for _seq, ts, _rows_then in rng.sample(workload.after, points):
            at = ts + rng.randrange(1000)
            expected = [rows for _s, t, rows in workload.after if t <= at][-1]
            got_rows = _table(_rows(as_of(spark, path, source_time=at), layout))
            assert got_rows == _table(list(expected.values())), (stage, at)
        newest = _table(list(workload.after[-1][2].values()))
        assert _table(_rows(current_view(spark, path), layout)) == newest

    # (more points, and a real MariaDB's workload: tests/e2e/test_history_from_mariadb.py)
    check("history stored and changes not folded yet", points=4)
    assert _table(_rows(as_of(spark, path, position=[FIRST_SEQ + 10**6]), layout)) == _table(
        list(workload.after[-1][2].values())
    )
    sink.flush(spark)
    check("every change folded", points=4, tracked=True)
    if layout == "typed":  # the append the stopped fold may have made was done again, leaving out what it wrote
        assert metrics.DELTA_HISTORY_REDONE_APPENDS.labels("hist")._value.get() > redone
    # The last fold's changes (the last batch) are what a read merges in. As of a transaction before all of them the
    # stored versions alone answer (one scan); as of one at or after the first of them, they are merged in.
    first_pending = min(json.loads(e)["source"]["pos"][0] for e in batches[-1])
    assert first_pending - 1 >= FIRST_SEQ  # (the seed's last batch holds no change of the first transaction)
    alone = f"as of transaction {first_pending - 1}: no change since the last fold at or before it"
    for seq, _ts, rows in workload.after:
        if seq in (first_pending - 1, first_pending):
            with caplog.at_level(logging.DEBUG, logger="cdcflow.pipeline.sinks.delta.history.reads"):
                caplog.clear()
                got = _table(_rows(as_of(spark, path, gtid=f"0-1-{seq}"), layout))
                took_stored_alone = any(alone in r.getMessage() for r in caplog.records)
            assert got == _table(list(rows.values())), seq
            assert took_stored_alone == (seq < first_pending), (seq, caplog.messages)
    # a fold with nothing new changes nothing, and the history's name is in the catalog
    stored = spark.read.format("delta").load(history_path(path)).count()
    sink.apply_batch(events_frame(spark, batches[0]), len(batches))  # old changes again, in a new batch
    sink.flush(spark)
    assert spark.read.format("delta").load(history_path(path)).count() == stored
    same(_history_rows(history(spark, path), layout), _expected_history(workload.versions), "old changes again")
    named = spark.table(f"{prefix}{DB}.{TABLE}_history")
    assert _history_rows(named, layout) == _expected_history(workload.versions)
    # the fold thread's upkeep compacts the history with the state (every COMPACT_EVERY_FOLDS folds that wrote)
    monkeypatch.setattr(fold_service, "COMPACT_EVERY_FOLDS", 2)
    sink.service.housekeeping()
    operations = [r["operation"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{history_path(path)}`").collect()]
    assert "OPTIMIZE" in operations
    same(_history_rows(history(spark, path), layout), _expected_history(workload.versions), "compacted")
    sink.close()


def test_history_turned_on_later_starts_with_every_change_the_log_holds(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path
) -> None:
    """A table folded for a while without history; history turned on, with nothing new to fold: the next fold
    fills the history from the change log, so it holds every version since the sink began."""
    rng = random.Random(56)
    workload = run_workload(rng, transactions=40, keys=6)
    batches = deliveries(rng, workload)
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=_schema_history(kafka["bootstrap_servers"]),
    )  # fmt: skip
    endpoints = Endpoints(bootstrap_servers=kafka["bootstrap_servers"])
    before = DeltaStateSink("hist", options, endpoints)
    for batch_id, batch in enumerate(batches):
        before.apply_batch(events_frame(spark, batch), batch_id)
    before.flush(spark)
    before.close()
    path = before.table_path(SOURCE, DB, TABLE)
    with pytest.raises(ConfigError, match="no history is kept"):
        history(spark, path)

    after = DeltaStateSink("hist", options.model_copy(update={"history": True}), endpoints)  # a restart
    after.flush(spark)  # nothing new in the log: the fold only starts the history
    after.close()
    record = read_record(spark, path)
    assert record is not None and record.history_seeded
    same(_history_rows(history(spark, path), "typed"), _expected_history(workload.versions), "history turned on")


def test_a_history_of_format_1_is_migrated_by_the_next_fold_and_stays_exact(
    spark: SparkSession,
    kafka: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A typed table whose history was kept in format 1 (every version in the history table, merged by each fold):
    the next fold migrates it (the state's rows given their key text, the open versions left to the state), and
    the history and the reads as of positions stay the workload's."""
    from cdcflow.pipeline.sinks.delta.history import fold as history_fold

    rng = random.Random(58)
    workload = run_workload(rng, transactions=60, keys=30)
    batches = deliveries(rng, workload)
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), history=True, fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=_schema_history(kafka["bootstrap_servers"]),
    )  # fmt: skip
    endpoints = Endpoints(bootstrap_servers=kafka["bootstrap_servers"])
    with monkeypatch.context() as format_1:  # the folds as they were: every version merged into the history
        format_1.setattr(history_fold, "keeps_by_appending", lambda record: False)
        format_1.setattr(fold_service, "keeps_by_appending", lambda record: False)
        before = DeltaStateSink("hist", options, endpoints)
        half = len(batches) // 2
        for batch_id, batch in enumerate(batches[:half]):
            before.apply_batch(events_frame(spark, batch), batch_id)
        before.flush(spark)
        before.close()
    path = before.table_path(SOURCE, DB, TABLE)
    record = read_record(spark, path)
    assert record is not None and record.history_format == 1
    stored = spark.read.format("delta").load(history_path(path))
    assert stored.where("valid_to_pos IS NULL").count() > 0  # format 1 keeps the open versions there
    state = spark.read.format("delta").load(path).drop("_cdcflow_key").localCheckpoint()
    state.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)  # nor the key text

    after = DeltaStateSink("hist", options, endpoints)  # a restart with this version
    with caplog.at_level(logging.INFO, logger="cdcflow.pipeline.sinks.delta.history.append"):
        after.apply_batch(events_frame(spark, batches[half]), half)
        after.flush(spark)  # one batch: most rows are not touched by it, and have their key text from the migration
        assert any("history migrated to format 2" in m for m in caplog.messages), caplog.messages
        state = spark.read.format("delta").load(path)
        assert state.count() > 10 and state.where("_cdcflow_key IS NULL").count() == 0
        for batch_id, batch in enumerate(batches[half + 1 :], start=half + 1):
            after.apply_batch(events_frame(spark, batch), batch_id)
        after.flush(spark)
    after.close()
    record = read_record(spark, path)
    assert record is not None and record.history_format == 2 and record.history_state_version is not None
    assert spark.read.format("delta").load(history_path(path)).where("valid_to_pos IS NULL").count() == 0
    assert spark.read.format("delta").load(path).where("_cdcflow_key IS NULL").count() == 0
    same(_history_rows(history(spark, path), "typed"), _expected_history(workload.versions), "migrated")
    for seq, _ts, rows in workload.after[::5]:
        assert _table(_rows(as_of(spark, path, gtid=f"0-1-{seq}"), "typed")) == _table(list(rows.values())), seq


def test_a_history_stored_without_the_seq_columns_gets_them_and_reads_stay_exact(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path
) -> None:
    """A history table written before `valid_from_seq`/`valid_to_seq` existed (its rows without them): the next
    fold adds the columns, and reads as of a position, which skip by them, keep the old rows."""
    rng = random.Random(57)
    workload = run_workload(rng, transactions=60, keys=6)
    batches = deliveries(rng, workload)
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), history=True, fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=_schema_history(kafka["bootstrap_servers"]),
    )  # fmt: skip
    sink = DeltaStateSink("hist", options, Endpoints(bootstrap_servers=kafka["bootstrap_servers"]))
    half = len(batches) // 2
    for batch_id, batch in enumerate(batches[:half]):
        sink.apply_batch(events_frame(spark, batch), batch_id)
    sink.flush(spark)
    path = sink.table_path(SOURCE, DB, TABLE)
    stored = history_path(path)
    old = spark.read.format("delta").load(stored).drop("valid_from_seq", "valid_to_seq").localCheckpoint()
    old.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(stored)  # the old layout
    assert "valid_to_seq" not in spark.read.format("delta").load(stored).columns
    for batch_id, batch in enumerate(batches[half:], start=half):
        sink.apply_batch(events_frame(spark, batch), batch_id)
    sink.flush(spark)
    sink.close()
    table = spark.read.format("delta").load(stored)
    assert "valid_to_seq" in table.columns and table.where("valid_from_seq IS NULL").count() > 0
    same(_history_rows(history(spark, path), "typed"), _expected_history(workload.versions), "seq columns added")
    for seq, _ts, rows in workload.after[::5]:
        assert _table(_rows(as_of(spark, path, gtid=f"0-1-{seq}"), "typed")) == _table(list(rows.values())), seq


class StopsOnce(FoldHooks):
    """The first fold to reach the history's step after `armed` is set stops there (after its state MERGE, before
    the history's append), as a killed driver would."""

    def __init__(self) -> None:
        self.armed = False
        self.stopped = 0

    def history_step(self, path: str) -> None:
        if self.armed:
            self.armed = False
            self.stopped += 1
            raise RuntimeError("cdcflow test: a fold stopped between its state MERGE and its history append")


def test_a_table_rewritten_for_a_ddl_keeps_its_versions_as_they_were(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fold stops after its state MERGE, before the history's append; the next fold finds a DDL that Delta cannot
    follow in place (MODIFY n INT to VARCHAR: the state table is rewritten) with the capture's reads of the table
    after it. The versions the stopped fold's MERGE replaced are read before the rewrite, and every version keeps
    the values it had."""
    bootstrap = kafka["bootstrap_servers"]
    topic = _schema_history(bootstrap)
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), history=True, fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=topic,
    )  # fmt: skip
    hooks = StopsOnce()
    sink = DeltaStateSink("hist", options, Endpoints(bootstrap_servers=bootstrap), hooks=hooks)
    path = sink.table_path(SOURCE, DB, TABLE)
    rows: dict[int, dict[str, Any]] = {}
    batch_id = 0

    def apply(*changes: tuple[str, int, str, Any, int]) -> None:
        nonlocal batch_id
        events = []
        for op, key, v, n, seq in changes:
            row = {"id": key, "v": v, "n": n}
            events.append(event_bytes(Change(op, key, row, (seq, key, 0), BASE_TS + seq * 1000), rows.get(key)))
            rows[key] = row
        sink.apply_batch(events_frame(spark, events), batch_id)
        batch_id += 1

    apply(("c", 1, "a", 10, 101), ("c", 2, "a", 20, 101))
    apply(("u", 1, "b", 11, 102))
    sink.flush(spark)  # the history begins
    apply(("u", 1, "c", 12, 105), ("u", 2, "b", 21, 105))
    hooks.armed = True
    with pytest.raises(RuntimeError, match="a fold stopped"):
        sink.flush(spark)  # the state holds transaction 105; the history has not closed 102 (key 1) nor 101 (key 2)
    assert hooks.stopped == 1
    ddl = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "v", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False, "key_order": None},
        {"name": "n", "type": "VARCHAR", "sql_type": "VARCHAR(5)", "nullable": True, "key": False, "key_order": None},
    ]
    record = {"kind": "table", "source": SOURCE, "db": DB, "table": TABLE, "columns": ddl, "pos": [110, 0, 0]}
    k.produce_sync(bootstrap, topic, [(SOURCE.encode(), json.dumps(record).encode())])
    apply(("r", 1, "c", "12", 110), ("r", 2, "b", "21", 110))  # the capture reads the table after the DDL
    apply(("u", 1, "d", "n-13", 112))  # a value the old INT column cannot hold
    read_before = metrics.DELTA_HISTORY_READ_BEFORE_REWRITES.labels("hist")._value.get()
    with caplog.at_level(logging.WARNING, logger="cdcflow.pipeline.sinks.delta.layouts.mysql_typed"):
        sink.flush(spark)
    assert any("rewriting the table in its new shape" in m for m in caplog.messages), caplog.messages
    # the stopped fold's state commit was read into the history before the rewrite
    assert metrics.DELTA_HISTORY_READ_BEFORE_REWRITES.labels("hist")._value.get() == read_before + 1
    apply(("u", 2, "c", "n-22", 114))
    sink.flush(spark)
    sink.close()

    def versions(frame: DataFrame) -> list[tuple[Any, ...]]:
        return sorted((key, v, str(n), start, end) for key, v, n, start, end in _history_rows(frame, "typed"))

    assert versions(history(spark, path)) == sorted([
        (1, "a", "10", (101, 1, 0), (102, 1, 0)),
        (1, "b", "11", (102, 1, 0), (105, 1, 0)),
        (1, "c", "12", (105, 1, 0), (110, 1, 0)),
        (1, "c", "12", (110, 1, 0), (112, 1, 0)),
        (1, "d", "n-13", (112, 1, 0), None),
        (2, "a", "20", (101, 2, 0), (105, 2, 0)),
        (2, "b", "21", (105, 2, 0), (110, 2, 0)),
        (2, "b", "21", (110, 2, 0), (114, 2, 0)),
        (2, "c", "n-22", (114, 2, 0), None),
    ])  # fmt: skip
    table_as_of = {
        104: [(1, "b", "11"), (2, "a", "20")],
        105: [(1, "c", "12"), (2, "b", "21")],
        110: [(1, "c", "12"), (2, "b", "21")],
        112: [(1, "d", "n-13"), (2, "b", "21")],
        114: [(1, "d", "n-13"), (2, "c", "n-22")],
    }
    for seq, expected in table_as_of.items():
        got = sorted((r["id"], r["v"], str(r["n"])) for r in as_of(spark, path, gtid=f"0-1-{seq}").collect())
        assert got == expected, seq


def test_a_change_older_than_a_delete_that_ended_no_stored_version_ends_at_that_delete(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A row inserted and deleted (103), inserted (105), deleted (107) and inserted again (110): the insert at 105
    comes late, after the rest was folded. The delete at 107 ended no version the history stored (the state's MERGE
    saw only the key's newest change, the insert at 110), yet the late version ends there. The second fold's changes
    all come after the first's (no late keys looked for); the third's do not (the late path merges them)."""
    options = DeltaStateOptions(
        path=str(tmp_path / "delta"), history=True, fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=_schema_history(kafka["bootstrap_servers"]),
    )  # fmt: skip
    sink = DeltaStateSink("hist", options, Endpoints(bootstrap_servers=kafka["bootstrap_servers"]))
    path = sink.table_path(SOURCE, DB, TABLE)

    def change(op: str, n: int | None, seq: int) -> bytes:
        row = None if n is None else {"id": 1, "v": "a", "n": n}
        return event_bytes(Change(op, 1, row, (seq, 1, 0), BASE_TS + seq * 1000), None)

    sink.apply_batch(events_frame(spark, [change("c", 10, 101)]), 0)
    sink.flush(spark)  # the history begins
    sink.apply_batch(events_frame(spark, [change("d", None, 103), change("d", None, 107), change("c", 30, 110)]), 1)
    in_order = "the fold's changes all come after transaction 101, the newest folded before: no late keys"
    with caplog.at_level(logging.DEBUG, logger="cdcflow.pipeline.sinks.delta.history.append"):
        sink.flush(spark)
    assert in_order in caplog.text
    late = metrics.DELTA_HISTORY_LATE_KEYS.labels("hist")._value.get()
    sink.apply_batch(events_frame(spark, [change("c", 20, 105)]), 2)  # late: older than the delete at 107
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="cdcflow.pipeline.sinks.delta.history.append"):
        sink.flush(spark)
    assert "no late keys" not in caplog.text
    assert metrics.DELTA_HISTORY_LATE_KEYS.labels("hist")._value.get() == late + 1
    sink.close()
    # the deletes table was made by its first deletes' append: one commit (an empty table's creation was another)
    assert len(spark.sql(f"DESCRIBE HISTORY delta.`{deletes_path(path)}`").collect()) == 1
    assert _history_rows(history(spark, path), "typed") == [
        (1, "a", 10, (101, 1, 0), (103, 1, 0)),
        (1, "a", 20, (105, 1, 0), (107, 1, 0)),
        (1, "a", 30, (110, 1, 0), None),
    ]
    for seq, expected in ((104, []), (106, [(1, "a", 20)]), (108, []), (110, [(1, "a", 30)])):
        assert _table(_rows(as_of(spark, path, gtid=f"0-1-{seq}"), "typed")) == expected, seq


def _deletion_vectors(spark: SparkSession, path: str) -> bool:
    properties = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["properties"]  # type: ignore[index]
    return properties.get("delta.enableDeletionVectors") == "true"


def test_tables_get_deletion_vectors_once_they_pass_the_size_and_stay_exact(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state table and its history start without deletion vectors (a small table's fold rewrites its few files
    faster than it writes them) and get them after the first fold that leaves them past `deletion_vectors_from_bytes`;
    the folds after that mark rows instead of rewriting files, and every read stays exact. With `deletion_vectors:
    false` they never get them. (A table below the size keeps none: the first test, at the default size.)"""
    rng = random.Random(59)
    workload = run_workload(rng, transactions=60, keys=30)
    # (a seed without truncates: here rows are replaced in place, which is where deletion vectors differ)
    assert not any(c.op == "t" for changes in workload.transactions for c in changes)
    batches = deliveries(rng, workload)
    endpoints = Endpoints(bootstrap_servers=kafka["bootstrap_servers"])
    topic = _schema_history(kafka["bootstrap_servers"])

    def run(name: str, **options: Any) -> str:
        """The first third of the batches folded by a sink whose tables stay small for it, then (a restart) the
        rest by one with `options`, folded twice."""
        opts = DeltaStateOptions(
            path=str(tmp_path / name), history=True, fold_rows=10**9, fold_interval_s=10**6,
            register_in_catalog=False, schema_history_topic=topic, deletion_vectors_from_bytes=10**9,
        )  # fmt: skip
        first = DeltaStateSink("dv", opts, endpoints)
        path = first.table_path(SOURCE, DB, TABLE)
        third = len(batches) // 3
        for batch_id, batch in enumerate(batches[: third + 1]):
            first.apply_batch(events_frame(spark, batch), batch_id)
        first.flush(spark)  # the tables' first fold creates them, small for this sink
        first.close()
        assert not _deletion_vectors(spark, path) and not _deletion_vectors(spark, history_path(path))
        sink = DeltaStateSink("dv", opts.model_copy(update=options), endpoints)
        for batch_id, batch in enumerate(batches[third + 1 :], start=third + 1):
            sink.apply_batch(events_frame(spark, batch), batch_id)
            if batch_id == 2 * third:
                sink.flush(spark)
        sink.flush(spark)
        sink.close()
        return path

    with caplog.at_level(logging.INFO, logger="cdcflow.pipeline.sinks.delta.fold_service"):
        grown = run("grown", deletion_vectors_from_bytes=1)  # past the size at the restarted sink's first fold
    turned_on = [m for m in caplog.messages if "deletion vectors turned on" in m]
    assert len(turned_on) == 2, caplog.messages  # the state table and its history, once each
    for table in (grown, history_path(grown)):
        assert _deletion_vectors(spark, table)
        metrics = [r["operationMetrics"] for r in spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
                   if r["operation"] == "MERGE"]  # fmt: skip
        assert any(int(m.get("numTargetDeletionVectorsAdded", "0")) > 0 for m in metrics), (table, metrics)
    same(_history_rows(history(spark, grown), "typed"), _expected_history(workload.versions), "deletion vectors")
    for seq, _ts, rows in workload.after[::10]:
        assert _table(_rows(as_of(spark, grown, gtid=f"0-1-{seq}"), "typed")) == _table(list(rows.values())), seq
    assert _table(_rows(current_view(spark, grown), "typed")) == _table(list(workload.after[-1][2].values()))
    # deletion_vectors: false, past the size: two folds (the second finds the tables there) turn nothing on
    caplog.clear()
    never = DeltaStateSink("dv", DeltaStateOptions(
        path=str(tmp_path / "never"), history=True, fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False,
        schema_history_topic=topic, deletion_vectors=False, deletion_vectors_from_bytes=1,
    ), endpoints)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="cdcflow.pipeline.sinks.delta.fold_service"):
        for batch_id, batch in enumerate(batches[:4]):
            never.apply_batch(events_frame(spark, batch), batch_id)
            if batch_id in (1, 3):
                never.flush(spark)
    never.close()
    path = never.table_path(SOURCE, DB, TABLE)
    assert any("folded" in m for m in caplog.messages) and read_record(spark, path).folded_version > 0  # type: ignore[union-attr]
    assert not any("deletion vectors turned on" in m for m in caplog.messages), caplog.messages
    assert not _deletion_vectors(spark, path) and not _deletion_vectors(spark, history_path(path))
