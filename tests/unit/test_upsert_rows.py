"""The HBase upsert form (decision 0018): row values in JSON and Avro, and the check that a read shows an edit."""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

import fastavro
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.events.cells import Cell, CellType
from cdcflow.events.debezium.avro import split_frame
from cdcflow.events.json_codec import ValueHints
from cdcflow.events.row_state import RowState, StateCell, merge
from cdcflow.events.upsert.rows import UpsertAvro, UpsertColumns, UpsertJson, upsert_avro_schema
from cdcflow.sources.hbase.peer.upsert import applied, reflects

pytestmark = pytest.mark.unit

HINTS = ValueHints({"d:name": "utf8", "d:n": "long", "d:x": "double", "d:ok": "boolean", "m:*": "int"})
COLUMNS = UpsertColumns.of({"d:name": "name", "d:raw": "raw"}, HINTS)


def cell(col: str, value: bytes, ts: int = 1, kind: CellType = CellType.PUT) -> Cell:
    family, qualifier = col.split(":")
    return Cell(b"r1", family.encode(), qualifier.encode(), ts, kind, value)


def test_declared_columns_are_typed_fields_and_the_rest_are_cells() -> None:
    assert [(f.column, f.name, f.encoding) for f in COLUMNS.fields] == [
        ("d:name", "name", "utf8"),
        ("d:raw", "raw", "base64"),
        ("d:n", "d_n", "long"),
        ("d:x", "d_x", "double"),
        ("d:ok", "d_ok", "boolean"),
    ]  # fmt: skip  (m:* has a wildcard: its columns are not declared)
    row = [cell("d:name", "zoë".encode()), cell("d:n", struct.pack(">q", -5)), cell("m:k", struct.pack(">i", 3)),
           cell("d:x", struct.pack(">d", float("nan"))), cell("d:raw", b"\x00\xff")]  # fmt: skip
    value = orjson.loads(UpsertJson(COLUMNS).value(b"\x01row", row))
    assert value == {
        "row": base64.b64encode(b"\x01row").decode(), "name": "zoë", "raw": base64.b64encode(b"\x00\xff").decode(),
        "d_n": -5, "d_x": None, "d_ok": None,
        # not declared, and a NaN JSON cannot carry: both kept as bytes
        "cells": {"m:k": base64.b64encode(struct.pack(">i", 3)).decode(),
                  "d:x": base64.b64encode(struct.pack(">d", float("nan"))).decode()},
    }  # fmt: skip


def test_a_value_that_does_not_have_its_type_form_is_kept_in_cells() -> None:
    values, others = COLUMNS.split([cell("d:n", b"abc"), cell("d:name", b"\xff\xfe"), cell("d:ok", b"\x01\x02")])
    assert values == {"name": None, "raw": None, "d_n": None, "d_x": None, "d_ok": None}
    assert others == {"d:n": b"abc", "d:name": b"\xff\xfe", "d:ok": b"\x01\x02"}


@pytest.mark.parametrize(
    ("names", "problem"),
    [({"d:a": "row"}, "cannot be named 'row'"), ({"d:a": "x", "d:b": "x"}, "would both be field 'x'"),
     ({"d:a": "1x"}, "not a valid Avro name"), ({"nocolon": "x"}, "family:qualifier")],
)  # fmt: skip
def test_bad_field_names_are_refused(names: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        UpsertColumns.of(names, ValueHints())


def _decode(schema: Any, data: bytes) -> Any:
    schema_id, body = split_frame(data)
    assert schema_id == 42
    return fastavro.schemaless_reader(io.BytesIO(body), fastavro.parse_schema(schema))


@settings(max_examples=200, deadline=None)
@given(
    name=st.none() | st.text(max_size=10), n=st.none() | st.integers(-(2**63), 2**63 - 1),
    other=st.dictionaries(st.sampled_from(["m:a", "m:b", "z:q"]), st.binary(max_size=8), max_size=3),
)  # fmt: skip
def test_avro_values_read_back_with_the_registered_schema_equal_the_json_values(
    name: str | None, n: int | None, other: dict[str, bytes]
) -> None:
    registered: dict[str, Any] = {}

    def register(subject: str, schema: Any) -> int:
        registered[subject] = schema
        return 42

    columns = UpsertColumns.of({"d:name": "name"}, ValueHints({"d:name": "utf8", "d:n": "long"}))
    row = [cell(c, v) for c, v in other.items()]
    if name is not None:
        row.append(cell("d:name", name.encode()))
    if n is not None:
        row.append(cell("d:n", struct.pack(">q", n)))
    avro = _decode(registered.setdefault("t-value", upsert_avro_schema("t", columns)),
                   UpsertAvro(columns, "t", register).value(b"k", row))  # fmt: skip
    assert list(registered) == ["t-value"]
    as_json = orjson.loads(UpsertJson(columns).value(b"k", row))
    assert avro == {"row": b"k", "name": name, "d_n": n, "cells": other}
    assert as_json == {"row": base64.b64encode(b"k").decode(), "name": name, "d_n": n,
                       "cells": {k: base64.b64encode(v).decode() for k, v in other.items()}}  # fmt: skip


ALL_TYPES = UpsertColumns.of(
    {},
    ValueHints(
        {
            "d:s": "utf8",
            "d:l": "long",
            "d:i": "int",
            "d:h": "short",
            "d:x": "double",
            "d:f": "float",
            "d:ok": "boolean",
            "d:b": "base64",
        }
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["d:s", "d:l", "d:i", "d:h", "d:x", "d:f", "d:ok", "d:b", "d:other", "m:é"]),
                       st.binary(max_size=9) | st.sampled_from([b"\x00" * 8, b"\x7f\xf0" + b"\x00" * 6, b"\x01"]),
                       max_size=10),
       st.binary(max_size=20))  # fmt: skip
def test_the_hand_written_avro_is_what_fastavro_writes(columns: dict[str, bytes], key: bytes) -> None:
    """Every column type, values of their form and not (they go to `cells`), NaN doubles, empty maps."""
    schema = upsert_avro_schema("t", ALL_TYPES)
    row = [cell(c, v) for c, v in columns.items()]
    values, others = ALL_TYPES.split(row)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {"row": key, **values, "cells": others})
    assert UpsertAvro(ALL_TYPES, "t", lambda _s, _x: 42).value(key, row) == b"\x00\x00\x00\x00\x2a" + out.getvalue()


# -- reflects: a read (newest version per column) shows an edit --------------------------------------------------

KINDS = [CellType.PUT, CellType.DELETE, CellType.DELETE_COLUMN, CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION]
cells = st.builds(
    lambda col, ts, kind, value: cell(col, value, ts, kind),
    st.sampled_from(["d:a", "d:b", "e:a"]), st.integers(1, 6), st.sampled_from(KINDS), st.binary(max_size=2),
)  # fmt: skip


def _visible(state_cells: list[Cell]) -> list[Cell]:
    """The newest version of each column HBase shows after applying `state_cells` in order."""
    state = merge(RowState(), [StateCell(c.family, c.qualifier, c.timestamp, c.type, c.value, (i,))
                               for i, c in enumerate(state_cells)])  # fmt: skip
    return [Cell(b"r1", f, q, c.ts, CellType.PUT, c.value) for (f, q), c in state.newest().items()]


def _masked(put: Cell, cells: list[Cell]) -> bool:
    """Whether a delete marker among `cells` hides `put` (HBase masks by timestamp, whatever came first)."""
    for d in cells:
        same_column = (d.family, d.qualifier) == (put.family, put.qualifier)
        if (d.type is CellType.DELETE_COLUMN and same_column and d.timestamp >= put.timestamp) or (
            d.type is CellType.DELETE and same_column and d.timestamp == put.timestamp) or (
            d.type is CellType.DELETE_FAMILY and d.family == put.family and d.timestamp >= put.timestamp) or (
            d.type is CellType.DELETE_FAMILY_VERSION and d.family == put.family and d.timestamp == put.timestamp
        ):  # fmt: skip
            return True
    return False


@settings(max_examples=500, deadline=None)
@given(before=st.lists(cells, max_size=6), edit=st.lists(cells, min_size=1, max_size=3))
def test_a_read_after_the_edit_reflects_it(before: list[Cell], edit: list[Cell]) -> None:
    kinds = {c.type for c in edit}
    puts = [c for c in edit if c.type is CellType.PUT]
    if puts and len(kinds) > 1:
        return  # one mutation puts or deletes (HBase's RowMutations aside); the check takes one edit's cells
    # A put an older marker hides never shows: the peer reads it read_attempts times, then publishes the row
    # as read (which is right); every other edit shows in the read after it.
    assert reflects(edit, _visible(before + edit)) or any(_masked(p, before + edit) for p in puts)


@settings(max_examples=500, deadline=None)
@given(before=st.lists(cells, max_size=6), edit=st.lists(cells, min_size=1, max_size=3))
def test_a_read_before_an_edit_that_changes_what_is_visible_does_not_reflect_it(
    before: list[Cell], edit: list[Cell]
) -> None:
    if len({c.type is CellType.PUT for c in edit}) > 1:
        return
    old, new = _visible(before), _visible(before + edit)
    if {(c.family, c.qualifier, c.timestamp, c.value) for c in old} != {
        (c.family, c.qualifier, c.timestamp, c.value) for c in new
    } and {(c.family, c.qualifier, c.timestamp) for c in old} != {(c.family, c.qualifier, c.timestamp) for c in new}:
        assert not reflects(edit, old)


@pytest.mark.parametrize(
    "marker",
    [cell("d:a", b"", 5, CellType.DELETE), cell("d:a", b"", 5, CellType.DELETE_COLUMN),
     cell("d:", b"", 5, CellType.DELETE_FAMILY), cell("d:", b"", 5, CellType.DELETE_FAMILY_VERSION)],
    ids=lambda c: c.type.name,
)  # fmt: skip
def test_each_delete_type_is_seen_once_its_version_is_gone(marker: Cell) -> None:
    before = [cell("d:a", b"old", 3), cell("d:a", b"new", 5), cell("e:a", b"other", 5)]
    assert not reflects([marker], _visible(before))  # the read came before the delete
    assert reflects([marker], _visible([*before, marker]))
    assert reflects([cell("d:a", b"new", 5)], _visible(before))
    assert not reflects([cell("d:a", b"newer", 6)], _visible(before))


def test_a_put_a_later_marker_hides_is_applied_by_the_raw_read_though_no_plain_read_shows_it() -> None:
    marker = cell("d:a", b"", 9, CellType.DELETE_COLUMN)
    hidden = cell("d:a", b"late", 4)  # written after the marker, older timestamp: HBase hides it
    assert not reflects([hidden], _visible([marker, hidden]))
    assert applied([hidden], [marker, hidden])
    assert not applied([hidden], [marker])  # not in yet
    assert applied([marker], [marker]) and not applied([marker, hidden], [marker])
