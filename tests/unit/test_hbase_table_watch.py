"""What hbase:meta's region ids say of a table between two looks (sources/hbase/peer/table_watch.py)."""

from __future__ import annotations

import pytest

from cdcflow.events.json_codec import decode, encode
from cdcflow.events.model import Op
from cdcflow.sources.hbase.peer.table_watch import Emptied, TableWatch, truncate_event

pytestmark = pytest.mark.unit


def test_a_table_whose_regions_are_all_new_is_a_candidate_and_a_table_gone_is_dropped() -> None:
    watch = TableWatch()
    first = {"ns:a": frozenset({100}), "ns:b": frozenset({100, 200}), "ns:c": frozenset({300})}
    assert watch.look(first, 1000) == ([], [])  # the first look only remembers
    watch.remember(first)
    second = {
        "ns:a": frozenset({500}),  # every region new: truncated (or split: the source settles it)
        "ns:b": frozenset({100, 600}),  # one region split: the other is the same, not a candidate
    }  # ns:c gone
    assert watch.look(second, 2000) == ([("ns:a", 500)], [Emptied("ns:c", "drop", 2000)])
    # Not remembered (the round's events were not published): the same answer again.
    assert watch.look(second, 2500) == ([("ns:a", 500)], [Emptied("ns:c", "drop", 2500)])
    watch.remember(second)
    assert watch.look(second, 3000) == ([], [])
    third = {**second, "ns:c": frozenset({900, 950})}  # created again after the drop: a candidate
    assert watch.look(third, 4000) == ([("ns:c", 900)], [])
    watch.remember(third)
    assert watch.look(third, 5000) == ([], [])


def test_the_truncate_event_names_the_table_and_the_time_before_which_every_cell_is_gone() -> None:
    event = truncate_event("src", "cluster-1", Emptied("ns:t", "truncate", 1_700_000_000_123))
    back = decode(encode(event))
    assert back.op is Op.TRUNCATE and back.key == b"" and back.cells == ()
    assert (back.source.db, back.source.table, back.source.pos) == ("ns", "t", (1_700_000_000_123, 0))
    assert back.truncate == {"cause": "truncate", "before_ts": 1_700_000_000_123}
    assert back.source.extra["cluster_id"] == "cluster-1"
