from __future__ import annotations

import json
import logging

import pytest

from cdcflow.logs import JsonFormatter, RateLimited
from cdcflow.sources.hbase.peer.server import MemoryBudget


def test_json_log_lines_carry_extra_fields() -> None:
    record = logging.LogRecord("cdcflow.x", logging.ERROR, __file__, 1, "call %d failed", (7,), None)
    record.peer = "127.0.0.1:5"
    doc = json.loads(JsonFormatter().format(record))
    assert doc["msg"] == "call 7 failed" and doc["level"] == "ERROR" and doc["peer"] == "127.0.0.1:5"
    assert doc["ts"].endswith("Z")


def test_memory_budget_pauses_when_over_and_resumes_when_back_under() -> None:
    changes: list[bool] = []
    budget = MemoryBudget(100, changes.append)
    budget.charge(60)
    budget.charge(30)
    assert changes == [] and not budget.over
    budget.charge(20)  # bytes that already arrived are charged even past the limit
    assert changes == [True] and budget.over and budget.used == 110
    budget.release(30)
    assert changes == [True], "paused until back under 3/4 of the limit"
    budget.release(5)
    assert changes == [True, False] and not budget.over and budget.peak == 110 and budget.used == 75
    budget.charge(24)
    assert changes == [True, False], "resumes and pauses at different levels"


def test_rate_limited_lines_say_how_many_were_left_out(caplog: pytest.LogCaptureFixture) -> None:
    limited = RateLimited(logging.getLogger("cdcflow.test"), interval_s=3600)
    with caplog.at_level(logging.INFO, "cdcflow.test"):
        assert limited.log(logging.WARNING, "a", "refused %s", "x")
        assert not any(limited.log(logging.WARNING, "a", "refused %s", "y") for _ in range(5))
        assert limited.log(logging.WARNING, "b", "other")  # another key is not held back
        # the interval has passed (not "= 0.0": the monotonic clock of a machine up for less than
        # an hour is below 3600, which made this test fail on freshly booted CI machines)
        limited._last["a"] -= 3600.0
        assert limited.log(logging.WARNING, "a", "refused %s", "z")
    assert [r.getMessage() for r in caplog.records] == [
        "refused x",
        "other",
        "refused z (5 more like this in the last 3600 s not logged)",
    ]
