"""`row_records` (the MySQL capture's hot path: rows straight to encoded records) against what it stands
in for: `encode(e)` and `e.key` for each event `row_changes` makes, on generated rows events."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.events.json_codec import encode
from cdcflow.sources.mysql.binlog.columns import Column, TableSchema
from cdcflow.sources.mysql.binlog.events import EventHeader, Row, RowsEvent
from cdcflow.sources.mysql.changes import TxnContext, key_columns, row_changes, row_records

pytestmark = pytest.mark.unit

NAMES = ["id", "b", "a", "z", "é"]
_value = st.one_of(
    st.none(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=8),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(["1.50", "2026-01-02 03:04:05"]),
)  # fmt: skip


@st.composite
def rows_events(draw: st.DrawFn) -> RowsEvent:
    pk = tuple(draw(st.lists(st.integers(0, len(NAMES) - 1), unique=True, max_size=2)))
    schema = TableSchema(7, "db", "t", tuple(Column(n, 3, 0, False, None) for n in NAMES), pk)
    kind = draw(st.sampled_from(["insert", "update", "delete"]))
    image = st.dictionaries(st.sampled_from(NAMES), _value, min_size=1).map(
        lambda d: {n: d[n] for n in NAMES if n in d}
    )
    rows: list[tuple[Row | None, Row | None]] = []
    for _ in range(draw(st.integers(1, 4))):
        before, after = draw(image), draw(image)
        if kind == "update" and draw(st.booleans()):  # the same key: a plain update
            after = {**after, **{NAMES[i]: before.get(NAMES[i]) for i in pk}}
        rows.append((None, after) if kind == "insert" else (before, None) if kind == "delete" else (before, after))
    header = EventHeader(1_700_000_000, 30, 11, 200, draw(st.integers(0, 2**32 - 1)), 0)
    return RowsEvent(header, kind, 7, schema, tuple(rows))


def context() -> TxnContext:
    return TxnContext("0-11-42", "0-11-42", "mariadb-bin.000003", 42, event_index=3, order=5)


@settings(max_examples=400, deadline=None)
@given(rows_events(), st.booleans())
def test_row_records_are_the_events_row_changes_makes_encoded(ev: RowsEvent, configured_key: bool) -> None:
    assert ev.schema is not None
    keys = key_columns(ev.schema, {"db.t": ("z", "a")} if configured_key else {})
    events_ctx, records_ctx = context(), context()
    with mock.patch("time.time", return_value=1_700_000_123.5):
        expected = [(e.key, encode(e)) for e in row_changes(ev, events_ctx, "src", keys)]
        got = row_records(ev, records_ctx, "src", keys, max_bytes=1 << 30)
    assert got == expected
    assert records_ctx.order == events_ctx.order


@given(rows_events())
def test_a_record_over_the_limit_leaves_the_events_to_the_caller_and_the_transaction_untouched(ev: RowsEvent) -> None:
    assert ev.schema is not None
    ctx = context()
    assert row_records(ev, ctx, "src", key_columns(ev.schema, {}), max_bytes=10) is None
    assert ctx.order == 5
