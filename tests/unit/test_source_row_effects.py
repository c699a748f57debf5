"""DDL that changes rows without row events, read from the statement; truncates in the verify rebuild."""

from __future__ import annotations

import orjson
import pytest

from cdcflow.events.json_codec import SCHEMA_ID, decode, encode
from cdcflow.events.model import Op
from cdcflow.sources.mysql.binlog.events import EventHeader
from cdcflow.sources.mysql.changes import TxnContext, truncate_change
from cdcflow.sources.mysql.ddl import Truncate, row_effect
from cdcflow.verify.mysql import rebuild


@pytest.mark.parametrize(
    ("query", "default_db", "expected"),
    [
        ("TRUNCATE TABLE t", "shop", Truncate("shop", "t")),
        ("truncate t", "shop", Truncate("shop", "t")),
        ("TRUNCATE TABLE `my db`.`odd``name`", "", Truncate("my db", "odd`name")),
        ("TRUNCATE TABLE shop . orders ;", "x", Truncate("shop", "orders")),
        ("/* app=billing */ -- why\nTRUNCATE TABLE t WAIT 5", "shop", Truncate("shop", "t")),
        ("TRUNCATE TABLE t NOWAIT", "shop", Truncate("shop", "t")),
        ("  TRUNCATE\n TABLE\tt  ", "shop", Truncate("shop", "t")),
        ("TRUNCATE TABLE t", "", None),  # no database: the server refused it
        ("TRUNCATE TABLE a, b", "shop", None),  # not a statement MySQL accepts
        ("CREATE TABLE truncate_log (id INT)", "shop", None),
        ("ALTER TABLE t TRUNCATE PARTITION p0", "shop", None),  # partitions: not the whole table
        ("/*!50100 TRUNCATE TABLE t */", "shop", None),  # version comments are SQL, not skipped
        ("DROP TABLE t", "shop", None),
    ],
)
def test_row_effect_of_a_statement(query: str, default_db: str, expected: Truncate | None) -> None:
    assert row_effect(query, default_db) == expected


def test_the_truncate_event_sits_between_the_groups_before_and_after_it() -> None:
    header = EventHeader(timestamp=1_700_000_000, type=2, server_id=1, size=100, log_pos=900, flags=0)
    txn = TxnContext(id="0-1-42", gtid="0-1-42", file="bin.000003", seq=42)
    change = truncate_change(Truncate("shop", "t"), txn, "src", header)
    assert change.op is Op.TRUNCATE and change.key == b"{}" and change.before is None and change.after is None
    assert (41, 9, 9) < change.source.pos < (43, 1, 0)  # later than group 41's rows, earlier than group 43's
    doc = orjson.loads(encode(change))
    assert (doc["op"], doc["key"], doc["before"], doc["after"]) == ("t", {}, None, None)
    assert doc["source"]["position"] == 800 and doc["source"]["gtid"] == "0-1-42"
    assert decode(encode(change)).op is Op.TRUNCATE


def _event(op: str, key: int | None, pos: list[int], after: dict[str, object] | None) -> bytes:
    return orjson.dumps({
        "schema": SCHEMA_ID, "op": op, "key": {} if key is None else {"id": key}, "before": None, "after": after,
        "source": {"connector": "mysql", "name": "s", "db": "shop", "table": "t", "ts_ms": 1, "snapshot": False,
                   "pos": pos},
        "ts_ms": 1,
    })  # fmt: skip


def test_rebuild_drops_every_row_older_than_a_truncate_in_any_order() -> None:
    before = [_event("c", i, [1, 1, i], {"id": i}) for i in (1, 2, 3)]
    truncate = _event("t", None, [2, 0, 0], None)
    after = [_event("c", 4, [3, 1, 0], {"id": 4}), _event("u", 1, [3, 1, 1], {"id": 1, "v": "again"})]
    for order in ([*before, truncate, *after], [*after, truncate, *before], [truncate, *after, *before, *before]):
        tables, malformed = rebuild(order)
        assert malformed == 0
        assert tables[("shop", "t")] == {'{"id":1}': {"id": 1, "v": "again"}, '{"id":4}': {"id": 4}}
