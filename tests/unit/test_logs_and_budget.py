from __future__ import annotations

import asyncio
import json
import logging

import pytest

from cdcflow.logs import JsonFormatter
from cdcflow.sources.hbase.peer.server import ByteBudget


def test_json_log_lines_carry_extra_fields() -> None:
    record = logging.LogRecord("cdcflow.x", logging.ERROR, __file__, 1, "call %d failed", (7,), None)
    record.peer = "127.0.0.1:5"
    doc = json.loads(JsonFormatter().format(record))
    assert doc["msg"] == "call 7 failed" and doc["level"] == "ERROR" and doc["peer"] == "127.0.0.1:5"
    assert doc["ts"].endswith("Z")


@pytest.mark.parametrize("oversize", [False, True])
def test_byte_budget_blocks_until_released(oversize: bool) -> None:
    async def scenario() -> list[str]:
        budget = ByteBudget(100)
        order: list[str] = []
        await budget.acquire(150 if oversize else 80)  # one call larger than the limit may run alone
        order.append("first")

        async def second() -> None:
            await budget.acquire(30)
            order.append("second")

        task = asyncio.create_task(second())
        await asyncio.sleep(0.05)
        assert order == ["first"], "the second call must wait: the budget is spent"
        await budget.release(150 if oversize else 80)
        await asyncio.wait_for(task, 1)
        return order

    assert asyncio.run(scenario()) == ["first", "second"]
