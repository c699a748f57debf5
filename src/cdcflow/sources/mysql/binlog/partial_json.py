"""MySQL's partial JSON updates (`binlog_row_value_options=PARTIAL_JSON`): a JSON column of an
`Update_rows_partial` event's after image holds a list of diffs instead of the document. They are
applied to the before image's document, so the change event's `after` is the whole row as usual.

A diff (MySQL 8.0 `sql/json_diff.cc`, seen in mysqld 8.0.31's events):

    operation   1 byte: 0 REPLACE, 1 INSERT, 2 REMOVE
    path        packed length, then the path text (`$.a`, `$."a b"`, `$.b[1]`)
    value       REPLACE / INSERT only: packed length, then a binary JSON value (type byte first)

MySQL writes these for JSON_SET, JSON_REPLACE and JSON_REMOVE updates it can apply in place; the
result equals the document MySQL stores (objects keep MySQL's key order: by length, then bytes).
Pure functions of bytes and values.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.mysql_json import Opaque, parse_value, render

REPLACE, INSERT, REMOVE = 0, 1, 2
_STEP = re.compile(r'\.(?:([A-Za-z_$][\w$]*)|"((?:[^"\\]|\\.)*)")|\[(\d+)\]')


def _packed(buf: bytes, p: int) -> tuple[int, int]:
    if p >= len(buf):
        raise BinlogDecodeError("partial JSON diff: a length runs past the diff")
    first = buf[p]
    if first < 251:
        return first, p + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or p + 1 + width > len(buf):
        raise BinlogDecodeError(f"partial JSON diff: bad length prefix {first}")
    return int.from_bytes(buf[p + 1 : p + 1 + width], "little"), p + 1 + width


def parse_path(text: str) -> list[str | int]:
    """`$.a."b c"[2]` → ["a", "b c", 2]."""
    if not text.startswith("$"):
        raise BinlogDecodeError(f"partial JSON diff: path {text!r} does not start at $")
    steps: list[str | int] = []
    p = 1
    while p < len(text):
        m = _STEP.match(text, p)
        if m is None:
            raise BinlogDecodeError(f"partial JSON diff: cannot read path {text!r} at {p}")
        if m[1] is not None:
            steps.append(m[1])
        elif m[2] is not None:
            steps.append(json.loads(f'"{m[2]}"'))
        else:
            steps.append(int(m[3]))
        p = m.end()
    return steps


def document(text: str) -> Any:
    """A JSON column's text (as the capture publishes it) back into a value `render` prints identically:
    numbers with a fraction or exponent keep their exact text."""
    return json.loads(text, parse_float=lambda t: Opaque(t, number=True))


def _mysql_key_order(obj: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(obj.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode())))


def apply(doc: Any, operation: int, path: list[str | int], value: Any = None) -> Any:
    """One diff applied to `doc` (changed in place where it can be); the resulting document."""
    if not path:
        if operation != REPLACE:
            raise BinlogDecodeError("partial JSON diff: only REPLACE applies to the whole document")
        return value
    parent = doc
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            raise BinlogDecodeError(f"partial JSON diff: path {path} is not in the before image") from None
    last = path[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if operation == REMOVE:
            if parent.pop(last, _MISSING) is _MISSING:
                raise BinlogDecodeError(f"partial JSON diff: REMOVE of {path}, which the before image lacks")
        else:
            if operation == REPLACE and last not in parent:
                raise BinlogDecodeError(f"partial JSON diff: REPLACE of {path}, which the before image lacks")
            parent[last] = value
            if operation == INSERT:  # MySQL keeps an object's keys in its storage order
                ordered = _mysql_key_order(parent)
                parent.clear()
                parent.update(ordered)
    elif isinstance(parent, list) and isinstance(last, int):
        if operation == INSERT:
            parent.insert(min(last, len(parent)), value)
        elif last >= len(parent):
            raise BinlogDecodeError(f"partial JSON diff: {path} is past the end of the before image's array")
        elif operation == REMOVE:
            del parent[last]
        else:
            parent[last] = value
    else:
        raise BinlogDecodeError(f"partial JSON diff: path {path} does not fit the before image")
    return doc


_MISSING = object()


def apply_diffs(before_text: str | None, diffs: bytes, where: str) -> str:
    """The document after `diffs`, as the text SELECT shows, from the before image's text."""
    if before_text is None:
        raise BinlogDecodeError(f"{where}: a partial JSON update of a column whose before image is NULL")
    doc = document(before_text)
    p = 0
    while p < len(diffs):
        operation = diffs[p]
        if operation not in (REPLACE, INSERT, REMOVE):
            raise BinlogDecodeError(f"{where}: partial JSON diff operation {operation}")
        n, p = _packed(diffs, p + 1)
        if p + n > len(diffs):
            raise BinlogDecodeError(f"{where}: partial JSON diff path runs past the diff")
        try:
            path = parse_path(diffs[p : p + n].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BinlogDecodeError(f"{where}: partial JSON diff path unreadable ({exc})") from None
        p += n
        value = None
        if operation != REMOVE:
            n, p = _packed(diffs, p)
            if n < 1 or p + n > len(diffs):
                raise BinlogDecodeError(f"{where}: partial JSON diff value runs past the diff")
            value = parse_value(diffs[p], diffs[p + 1 : p + n])
            p += n
        doc = apply(doc, operation, path, value)
    return render(doc)
