"""JSON encoding of change events (the default wire format on Kafka), and its exact inverse.

Binary data (row keys, families, qualifiers, values) is base64 so nothing is lost. For HBase,
`cells` is the exact record and `after` a convenience view of the Put cells keyed
"family:qualifier", holding the columns that have a decoding hint (utf8, long, int, double, ...)
rendered by it. A column without a hint would only repeat the base64 of `cells`, doubling the
record (a 6 MB cell made a 16 MB record), so it is left out unless `after_base64` asks for it.
The schema is src/cdcflow/events/schema/change-event-v1.json.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import struct
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from cdcflow.errors import TerminalError
from cdcflow.events.cells import Cell, CellType, column_name
from cdcflow.events.model import SCHEMA_VERSION, ChangeEvent, Op, SourceInfo
from cdcflow.events.row_state import RowState, StateCell, merge

SCHEMA_ID = f"cdcflow.change/{SCHEMA_VERSION}"
# The JSON Schema of the record value: the one definition of the envelope (the pipeline's Spark schema
# is derived from it).
JSON_SCHEMA_PATH = Path(__file__).resolve().parent / "schema" / f"change-event-v{SCHEMA_VERSION}.json"
CELL_TYPE_NAMES = {
    CellType.PUT: "Put",
    CellType.DELETE: "Delete",
    CellType.DELETE_COLUMN: "DeleteColumn",
    CellType.DELETE_FAMILY: "DeleteFamily",
    CellType.DELETE_FAMILY_VERSION: "DeleteFamilyVersion",
}
CELL_TYPES = {name: t for t, name in CELL_TYPE_NAMES.items()}
VALUE_ENCODINGS = ("base64", "utf8", "long", "int", "short", "double", "float", "boolean")


class MalformedEvent(TerminalError):
    """Bytes that are not a valid cdcflow change event."""


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _unb64(text: Any, what: str) -> bytes:
    if not isinstance(text, str):
        raise MalformedEvent(f"{what} must be a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise MalformedEvent(f"{what} is not valid base64") from exc


def render_value(value: bytes, encoding: str) -> Any:
    """Decode an HBase `Bytes`-encoded value; falls back to base64 when it does not fit."""
    try:
        if encoding == "utf8":
            return value.decode("utf-8")
        if encoding == "long" and len(value) == 8:
            return struct.unpack(">q", value)[0]
        if encoding == "int" and len(value) == 4:
            return struct.unpack(">i", value)[0]
        if encoding == "short" and len(value) == 2:
            return struct.unpack(">h", value)[0]
        if encoding == "double" and len(value) == 8:
            return struct.unpack(">d", value)[0]
        if encoding == "float" and len(value) == 4:
            return struct.unpack(">f", value)[0]
        if encoding == "boolean" and len(value) == 1:
            return value != b"\x00"
    except UnicodeDecodeError:
        pass
    return _b64(value)


class ValueHints:
    """Per-column value encodings: {"cf:qual": "utf8", "cf:*": "long"}; first match wins."""

    def __init__(self, rules: Mapping[str, str] | None = None) -> None:
        self.rules = dict(rules or {})
        bad = {k: v for k, v in self.rules.items() if v not in VALUE_ENCODINGS}
        if bad:
            raise ValueError(f"unknown value encodings {bad}; choose from {VALUE_ENCODINGS}")

    def encoding(self, column: str) -> str:
        if not self.rules:
            return "base64"
        for pattern, enc in self.rules.items():
            if fnmatch.fnmatchcase(column, pattern):
                return enc
        return "base64"


_NO_HINTS = ValueHints()


def newest_puts(cells: tuple[Cell, ...] | list[Cell]) -> dict[tuple[bytes, bytes], bytes]:
    """Per column, the value HBase shows after this change alone: the newest timestamp (the later
    in the WAL on a tie), unless a delete of the same change masks it (then the next visible one)."""
    newest: dict[tuple[bytes, bytes], Cell] = {}
    has_delete = False
    for c in cells:
        if c.type is CellType.PUT:
            held = newest.get((c.family, c.qualifier))
            if held is None or c.timestamp >= held.timestamp:
                newest[(c.family, c.qualifier)] = c
        else:
            has_delete = True
    if not has_delete:  # the common case, on the capture's hot path
        return {col: c.value for col, c in newest.items()}
    state = merge(RowState(), [StateCell(c.family, c.qualifier, c.timestamp, c.type, c.value, (i,))
                               for i, c in enumerate(cells)])  # fmt: skip
    return {col: c.value for col, c in state.newest().items()}


def cell_from_json(row: bytes, cell: Any) -> Cell:
    """One item of an event's `cells` (a parsed JSON object, or the same record as Spark parsed it:
    anything indexable by field name) → a Cell of `row`. Bad base64 or type names raise MalformedEvent."""
    cell_type = CELL_TYPES.get(cell["type"])
    if cell_type is None:
        raise MalformedEvent(f"unknown cell type {cell['type']!r}")
    tags = cell["tags"] if "tags" in cell else None  # noqa: SIM401 - a Spark Row has no .get
    return Cell(
        row=row,
        family=_unb64(cell["family"], "cell family"),
        qualifier=_unb64(cell["qualifier"], "cell qualifier"),
        timestamp=int(cell["ts"]),
        type=cell_type,
        value=_unb64(cell["value"], "cell value"),
        tags=_unb64(tags, "cell tags") if tags is not None else b"",
    )


def to_dict(event: ChangeEvent, hints: ValueHints | None = None, *, after_base64: bool = False) -> dict[str, Any]:
    """The event as the JSON object `encode` writes (plain Python values)."""
    out = _envelope(event, hints, after_base64)
    if event.cells is not None:
        out["cells"] = [_cell_dict(c) for c in event.cells]
    return out


def encode(event: ChangeEvent, hints: ValueHints | None = None, *, after_base64: bool = False) -> bytes:
    """The record value: `to_dict` as compact UTF-8 JSON (orjson), byte for byte.

    The cells, on the capture's hot path, are written as one pre-built JSON fragment: every string in
    a cell is base64 or a type name (nothing to escape), and families and qualifiers repeat, so their
    base64 comes from a small cache. tests/unit/test_wal_and_events.py holds the two forms equal."""
    out = _envelope(event, hints, after_base64)
    if event.cells is not None:
        out["cells"] = orjson.Fragment(_cells_json(event.cells))
    return orjson.dumps(out)


def _envelope(event: ChangeEvent, hints: ValueHints | None, after_base64: bool) -> dict[str, Any]:
    src = event.source
    out: dict[str, Any] = dict(
        schema=SCHEMA_ID,
        op=event.op.value,
        # HBase: the row key bytes; MySQL: the primary-key columns as a JSON object.
        key={"row": _b64(event.key)} if src.connector == "hbase" else orjson.loads(event.key),
        before=event.before,
        after=event.after,
        source={
            "connector": src.connector,
            "name": src.name,
            "db": src.db,
            "table": src.table,
            "ts_ms": src.ts_ms,
            "snapshot": src.snapshot,
            "pos": list(src.pos),
            **src.extra,
        },
        ts_ms=int(time.time() * 1000),
    )
    if event.transaction is not None:
        out["transaction"] = event.transaction
    if event.pk_change is not None:
        out["pk_change"] = event.pk_change
    if event.oversize is not None:
        out["oversize"] = event.oversize
    if event.truncate is not None:
        out["truncate"] = event.truncate
    if event.cells is not None:
        out["after"] = _hbase_after(event.cells, hints or _NO_HINTS, after_base64)
    return out


def _hbase_after(cells: tuple[Cell, ...], hints: ValueHints, after_base64: bool) -> dict[str, Any] | None:
    after: dict[str, Any] = {}
    if hints.rules or after_base64:
        for (family, qualifier), value in newest_puts(cells).items():
            name = column_name(family, qualifier)
            enc = hints.encoding(name)
            if enc != "base64":
                after[name] = render_value(value, enc)
            elif after_base64:
                after[name] = _b64(value)
    return after if after else None


def _cell_dict(c: Cell) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "family": _b64(c.family),
        "qualifier": _b64(c.qualifier),
        "ts": c.timestamp,
        "type": CELL_TYPE_NAMES[c.type],
        "value": _b64(c.value),
    }
    if c.tags:
        cell["tags"] = _b64(c.tags)
    return cell


# base64 of recently seen families and qualifiers (a table has few); cleared when it grows past the bound.
_NAME_B64: dict[bytes, str] = {}
_NAME_B64_MAX = 4096
_CELL_TYPE_JSON = {t: f'"type":"{name}","value":"' for t, name in CELL_TYPE_NAMES.items()}


def _name_b64(name: bytes) -> str:
    text = _NAME_B64.get(name)
    if text is None:
        if len(_NAME_B64) >= _NAME_B64_MAX:
            _NAME_B64.clear()
        text = _NAME_B64[name] = _b64(name)
    return text


def _cells_json(cells: tuple[Cell, ...]) -> str:
    """`[_cell_dict(c) for c in cells]` as orjson writes it."""
    name = _name_b64
    b2a = binascii.b2a_base64
    type_json = _CELL_TYPE_JSON
    parts = []
    for _row, family, qualifier, ts, cell_type, value, tags in cells:
        text = (f'{{"family":"{name(family)}","qualifier":"{name(qualifier)}","ts":{ts},'
                f'{type_json[cell_type]}{b2a(value, newline=False).decode("ascii")}"')  # fmt: skip
        parts.append(f'{text},"tags":"{_b64(tags)}"}}' if tags else text + "}")
    return "[" + ",".join(parts) + "]"


def decode(data: bytes) -> ChangeEvent:
    """Parse a JSON change event; any defect raises MalformedEvent (never another exception)."""
    try:
        raw = orjson.loads(data)
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        raise MalformedEvent(f"not JSON: {exc}") from exc
    try:
        return _from_dict(raw)
    except MalformedEvent:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MalformedEvent(f"not a change event: {type(exc).__name__}: {exc}") from exc


def _from_dict(raw: Any) -> ChangeEvent:
    if not isinstance(raw, dict) or raw.get("schema") != SCHEMA_ID:
        raise MalformedEvent(f"missing or unknown schema (expected {SCHEMA_ID})")
    s = raw["source"]
    pos = s["pos"]
    if not isinstance(pos, list) or not pos or not all(isinstance(p, int) and p >= 0 for p in pos):
        raise MalformedEvent("source.pos must be a non-empty array of non-negative integers")
    fixed = {"connector", "name", "db", "table", "ts_ms", "snapshot", "pos"}
    source = SourceInfo(
        connector=str(s["connector"]),
        name=str(s["name"]),
        db=str(s["db"]),
        table=str(s["table"]),
        ts_ms=int(s["ts_ms"]),
        pos=tuple(pos),
        snapshot=bool(s["snapshot"]),
        extra={k: v for k, v in s.items() if k not in fixed},
    )
    cells: tuple[Cell, ...] | None
    if source.connector == "hbase":
        key = _unb64(raw["key"]["row"], "key.row")
        cells = tuple(cell_from_json(key, c) for c in raw.get("cells") or ())
        after = None  # derived from cells
    else:
        key = json.dumps(raw["key"], separators=(",", ":"), sort_keys=True).encode()
        cells = tuple(cell_from_json(b"", c) for c in raw["cells"]) if "cells" in raw else None
        after = raw["after"]
    txn, pk_change = raw.get("transaction"), raw.get("pk_change")
    if txn is not None and not isinstance(txn, dict):
        raise MalformedEvent("transaction must be an object")
    if pk_change is not None and not isinstance(pk_change, dict):
        raise MalformedEvent("pk_change must be an object")
    oversize = raw.get("oversize")
    if oversize is not None and not isinstance(oversize, dict):
        raise MalformedEvent("oversize must be an object")
    truncate = raw.get("truncate")
    if truncate is not None and not isinstance(truncate, dict):
        raise MalformedEvent("truncate must be an object")
    return ChangeEvent(
        key=key, op=Op(raw["op"]), source=source, before=raw["before"], after=after, cells=cells,
        transaction=txn, pk_change=pk_change, oversize=oversize, truncate=truncate,
    )  # fmt: skip


def json_schema() -> dict[str, Any]:
    """The change event's JSON Schema (draft 2020-12)."""
    schema: dict[str, Any] = json.loads(JSON_SCHEMA_PATH.read_text())
    return schema
