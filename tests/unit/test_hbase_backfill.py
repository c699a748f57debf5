"""The pure parts of the HBase backfill (cdcflow.sources.hbase.backfill): rows → events, the positions'
order against the stream's, and the plan/progress records a rerun resumes from."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdcflow.config import HBaseSourceConfig, RouteConfig
from cdcflow.errors import ConfigError
from cdcflow.events import Op
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import decode, encode
from cdcflow.events.row_state import RowState, StateCell, merge
from cdcflow.protocols.hbase.wal import WalEntry
from cdcflow.sources.hbase import backfill as bf
from cdcflow.sources.hbase.changes import row_changes

PLAN = bf.TablePlan("ns:t", "cdcflow_backfill_t_5_ns", "ns:cdcflow_backfill_t_5", snapshot_ms=1_700_000_000_000)


def put(row: bytes, q: bytes, ts: int, v: bytes) -> Cell:
    return Cell(row, b"cf", q, ts, CellType.PUT, v)


def test_a_row_becomes_read_events_with_every_cell_and_a_snapshot_position() -> None:
    cells = [put(b"r1", b"a", 9, b"new"), put(b"r1", b"a", 5, b"old"),
             Cell(b"r1", b"cf", b"", 7, CellType.DELETE_FAMILY, b""), put(b"r1", b"a", 9, b"dup")]  # fmt: skip
    (event,) = bf.row_events(cells, "ns:t", "src", PLAN, "cluster-1")
    assert event.op is Op.READ and event.key == b"r1"
    assert event.source.snapshot and event.source.connector == "hbase" and event.source.name == "src"
    assert (event.source.db, event.source.table) == ("ns", "t")
    assert event.source.pos == (0, PLAN.snapshot_ms, 0) and event.source.ts_ms == PLAN.snapshot_ms
    assert event.source.extra == {"region": f"snapshot:{PLAN.snapshot}", "cluster_id": "cluster-1"}
    # the same column, timestamp and type twice (store files not yet compacted): the first, newest, stays
    assert event.cells == tuple(cells[:3])
    back = decode(encode(event))
    assert back.op is Op.READ and back.source.snapshot and back.cells == event.cells


def test_a_wide_row_is_split_into_events_with_increasing_positions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bf, "MAX_CELLS_PER_EVENT", 3)
    cells = [put(b"wide", b"q%02d" % i, 1, b"v") for i in range(8)]
    events = list(bf.row_events(cells, "t", "src", PLAN, ""))
    assert [len(e.cells or ()) for e in events] == [3, 3, 2]
    assert [e.source.pos for e in events] == [(0, PLAN.snapshot_ms, i) for i in range(3)]
    assert [c for e in events for c in e.cells or ()] == cells
    assert {e.source.db for e in events} == {"default"}


@given(seq=st.integers(min_value=1, max_value=2**63 - 1), snapshot_ms=st.integers(min_value=0, max_value=2**62),
       backfill_first=st.booleans())  # fmt: skip
def test_a_streamed_cell_beats_the_backfilled_one_of_the_same_column_and_timestamp(
    seq: int, snapshot_ms: int, backfill_first: bool
) -> None:
    """A cell rewritten at the same timestamp after the snapshot: the stream's value must win, whichever
    arrives first (the sinks break such ties by position; HBase sequence ids start at 1)."""
    plan = bf.TablePlan("t", "s", "c", snapshot_ms=snapshot_ms)
    (backfilled,) = bf.row_events([put(b"r", b"a", 42, b"snapshot")], "t", "src", plan, "")
    (streamed,) = row_changes(WalEntry("t", "region", seq, 0, (), (put(b"r", b"a", 42, b"streamed"),)), "src")
    assert backfilled.source.pos < streamed.source.pos
    state = RowState()
    for event in [backfilled, streamed] if backfill_first else [streamed, backfilled]:
        state = merge(state, [StateCell(c.family, c.qualifier, c.timestamp, c.type, c.value, event.source.pos)
                              for c in event.cells or ()])  # fmt: skip
    assert state.newest()[(b"cf", b"a")].value == b"streamed"


def test_plan_and_progress_records_read_back_and_the_latest_wins() -> None:
    plan = bf.BackfillPlan("hbase:t", (PLAN,), started_ms=1, enable_peer=True)
    assert bf.BackfillPlan.from_json(plan.to_json()) == plan
    p = bf.RegionProgress(rows=10, cells=30, last_row=b"\x00\xffrow", done=False, updated_ms=5)
    assert bf.RegionProgress.from_json(p.to_json()) == p
    key_a = bf.region_key("hbase:t", PLAN.snapshot, b"")
    key_b = bf.region_key("hbase:t", PLAN.snapshot, b"row-5")
    stale = bf.region_key("hbase:t", "an_older_snapshot", b"")
    done_plan = bf.BackfillPlan("hbase:t", (bf.TablePlan("ns:t", PLAN.snapshot, PLAN.clone, 1, regions=2),),
                                1, state="published")  # fmt: skip
    records = [
        (bf.plan_key("hbase:t"), plan.to_json()),
        (key_a, bf.RegionProgress(rows=5).to_json()),
        (key_a, bf.RegionProgress(rows=8, cells=9, done=True).to_json()),
        (key_b, p.to_json()),
        (stale, bf.RegionProgress(rows=999, done=True).to_json()),
        (bf.plan_key("hbase:t"), done_plan.to_json()),
        (bf.plan_key("other"), None),  # a deleted record
    ]
    status = bf.read_status(records)["hbase:t"]
    assert status.plan == done_plan
    assert status.rows == 18 and status.cells == 39 and status.done_regions() == 1
    assert status.summary() == "backfill hbase:t: published, 1/2 regions done, 18 rows, 39 cells published"
    assert bf.region_progress(records)[key_a].done


def test_scratch_names_stay_in_the_tables_namespace() -> None:
    assert bf.scratch_names("events", 7) == ("cdcflow_backfill_events_7", "cdcflow_backfill_events_7")
    assert bf.scratch_names("ns:events", 7) == ("cdcflow_backfill_events_7_ns", "ns:cdcflow_backfill_events_7")
    assert bf.default_backfill_id(["b", "ns:a"]) == "hbase:b,ns:a"


def test_a_table_the_routes_drop_is_refused_before_anything_starts() -> None:
    cfg = HBaseSourceConfig(routes=(RouteConfig(table="secret_*", drop=True),))
    bf.check_tables(cfg, ["kept", "ns:kept"])
    with pytest.raises(ConfigError, match="secret_a"):
        bf.check_tables(cfg, ["kept", "secret_a"])


def test_chunks_end_at_a_row_count_or_a_byte_budget_and_resume_skips_published_rows() -> None:
    rows = [[put(b"r%d" % i, b"a", 1, b"x" * 100)] for i in range(10)]
    assert [len(c) for c in bf._chunks(iter(rows), 4, 10**9)] == [4, 4, 2]
    assert [len(c) for c in bf._chunks(iter(rows), 100, 250)] == [2, 2, 2, 2, 2]
    assert [r[0].row for r in bf._after(iter(rows), b"r6")] == [b"r7", b"r8", b"r9"]


def test_hbase_status_shows_an_unreachable_kafka_instead_of_failing(capsys: pytest.CaptureFixture[str]) -> None:
    """`cdcflow hbase status` reads the peer from HBase; the backfill listing is the only part needing Kafka."""
    from cdcflow.cli.hbase import _print_backfills
    from cdcflow.config import CdcflowConfig

    _print_backfills(CdcflowConfig.model_validate({"kafka": {"bootstrap_servers": "127.0.0.1:1"}}))
    out = capsys.readouterr().out
    assert "backfills: cdcflow-hbase-backfill not readable" in out and "127.0.0.1:1" in out
