"""Changes too large for one Kafka record: the parts give the original bytes back, the marker fits."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.errors import TerminalError
from cdcflow.events.json_codec import decode, encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.events.oversize import cut, marker, reassemble, split

pytestmark = pytest.mark.unit


def change(values: dict[str, object], op: Op = Op.UPDATE) -> ChangeEvent:
    source = SourceInfo("mysql", "src", "db", "t", 1, (3, 400, 0), extra={"gtid": "0-1-9"})
    return ChangeEvent(key=b'{"id":7}', op=op, source=source, before=dict(values), after=dict(values))


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=3000), max_size=6), st.integers(2000, 6000))
def test_parts_reassemble_and_the_marker_fits(values: dict[str, object], limit: int) -> None:
    event = change({"id": 7, **values})
    encoded = encode(event)
    parts, marker = split(event, encoded, "cdcflow.db.t", limit)
    assert reassemble(reversed(parts)) == encoded
    assert len(marker) <= limit
    decoded = decode(marker)
    assert decoded.oversize is not None and decoded.key == event.key and decoded.source.pos == event.source.pos
    assert decoded.oversize["sha256"] and decoded.oversize["parts"] == len(parts)
    for column in decoded.oversize["columns"]:
        side, name = column.split(".", 1)
        assert (decoded.before if side == "before" else decoded.after)[name] is None  # type: ignore[index]


def test_the_largest_values_are_left_out_first() -> None:
    event = change({"id": 7, "blob": "x" * 3_000_000, "small": "kept"}, op=Op.CREATE)
    event = ChangeEvent(key=event.key, op=Op.CREATE, source=event.source, after=event.after)
    encoded = encode(event)
    parts, marker = split(event, encoded, "topic", 10_000)
    assert len(parts) == 6 and all(len(p) < 800_000 for p in parts)
    body = orjson.loads(marker)
    assert body["after"] == {"id": 7, "blob": None, "small": "kept"} and body["before"] is None
    assert body["oversize"]["columns"] == ["after.blob"] and body["oversize"]["bytes"] == len(encoded)


def test_missing_or_corrupt_parts_are_refused() -> None:
    event = change({"id": 7, "blob": "y" * 1_200_000})
    parts, _ = split(event, encode(event), "topic", 10_000)
    with pytest.raises(ValueError, match="have parts"):
        reassemble(parts[:-1])
    bad = orjson.loads(parts[0])
    bad["data"] = bad["data"][:-8] + "AAAAAAAA"
    with pytest.raises(ValueError, match="do not match"):
        reassemble([orjson.dumps(bad), *parts[1:]])


def test_an_hbase_change_leaves_out_its_largest_cell_values() -> None:
    from cdcflow.events.cells import Cell, CellType

    big, small = b"\x01" * 2_000_000, b"kept"
    cells = (
        Cell(b"row", b"cf", b"big", 5, CellType.PUT, big),
        Cell(b"row", b"cf", b"small", 5, CellType.PUT, small),
        Cell(b"row", b"cf", b"gone", 5, CellType.DELETE_COLUMN),
    )
    source = SourceInfo("hbase", "src", "default", "t", 1, (12, 0), extra={"region": "r1", "cluster_id": "c"})
    event = ChangeEvent(key=b"row", op=Op.UPDATE, source=source, cells=cells)
    encoded = encode(event)
    parts, marker = split(event, encoded, "oversize", 20_000)
    assert reassemble(parts) == encoded and decode(encoded).cells == cells
    back = decode(marker)
    assert back.oversize is not None and back.oversize["columns"] == ["cells.0"]
    assert back.cells is not None and [c.value for c in back.cells] == [b"", small, b""]
    assert [(c.qualifier, c.type) for c in back.cells] == [(c.qualifier, c.type) for c in cells]


def test_parts_fit_their_topic_and_the_marker_says_where_they_are() -> None:
    event = change({"id": 7, "blob": "z" * 900_000})
    encoded = encode(event)
    parts = cut(event, encoded, "parts", part_limit=300_000)
    n = len(parts.parts)
    assert n == -(-len(encoded) // ((300_000 - 1024) * 3 // 4)) and all(len(p) <= 300_000 for p in parts.parts)
    assert reassemble(parts.parts) == encoded
    body = orjson.loads(marker(event, parts, 10_000, [(2, 40 + i) for i in range(n)]))
    assert (body["oversize"]["partition"], body["oversize"]["offsets"]) == (2, list(range(40, 40 + n)))
    assert "offsets" not in orjson.loads(marker(event, parts, 10_000, None))["oversize"]
    with pytest.raises(ValueError, match="one partition"):
        marker(event, parts, 10_000, [(2, 40), (3, 41), *((2, 42 + i) for i in range(n - 2))])
    with pytest.raises(TerminalError, match="too few"):
        cut(event, encoded, "parts", part_limit=2_000)
