"""Signal rows (Debezium's source signaling channel) read as the capture decodes them from the binlog."""

from __future__ import annotations

from typing import Any

import pytest

from cdcflow.sources.mysql.signals import LogSignal, SignalRefused, SnapshotSignal, parse_signal

pytestmark = pytest.mark.unit


def row(kind: Any, data: Any, signal_id: Any = "s1") -> dict[str, Any]:
    return {"id": signal_id, "type": kind, "data": data}


def test_execute_snapshot_and_log_signals_as_debezium_writes_them() -> None:
    assert parse_signal(row("execute-snapshot", '{"data-collections": ["shop.orders", "shop.t*"]}')) == \
        SnapshotSignal("s1", ("shop.orders", "shop.t*"))  # fmt: skip
    assert parse_signal(row("execute-snapshot", b'{"data-collections": ["a.b"], "type": "INCREMENTAL"}')) == \
        SnapshotSignal("s1", ("a.b",))  # fmt: skip
    assert parse_signal(row("log", '{"message": "hello"}')) == LogSignal("s1", "hello")


@pytest.mark.parametrize(("signal", "reason"), [
    (row("execute-snapshot", "{not json"), "not JSON"),
    (row("execute-snapshot", "[1]"), "not a JSON object"),
    (row("execute-snapshot", "{}"), "data-collections"),
    (row("execute-snapshot", '{"data-collections": []}'), "data-collections"),
    (row("execute-snapshot", '{"data-collections": ["nodot"]}'), "data-collections"),
    (row("execute-snapshot", '{"data-collections": ["a.b"], "type": "blocking"}'), "incremental"),
    (row("execute-snapshot", '{"data-collections": ["a.b"], "additional-conditions": [{"filter": "x"}]}'),
     "additional-conditions"),
    (row("pause-snapshot", "{}"), "is not one of"),
    (row("execute-snapshot", '{"data-collections": ["a.b"]}', signal_id=None), "without an id"),
])  # fmt: skip
def test_signals_that_cannot_be_acted_on_are_refused_saying_why(signal: dict[str, Any], reason: str) -> None:
    with pytest.raises(SignalRefused, match=reason):
        parse_signal(signal)
