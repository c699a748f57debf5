"""What a DDL statement does to the rows of a table, read from its text. Pure: no I/O.

The binlog logs DDL as the statement the client sent (MariaDB and MySQL alike), with the session's
default database beside it. Only statements that change rows without row events matter here: each
becomes an event in the table's own topic, at its place in the stream, so sinks follow the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A leading /* ... */ or -- ... comment (clients and ORMs prefix statements with them); /*! ... */
# version comments are not skipped: they hold SQL.
_COMMENT = re.compile(r"\s*(?:/\*(?!!).*?\*/|--[^\n]*(?:\n|$)|#[^\n]*(?:\n|$))", re.S)
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$\u0080-\uffff]+)"
_TRUNCATE = re.compile(
    rf"TRUNCATE\s+(?:TABLE\s+)?(?P<first>{_IDENT})(?:\s*\.\s*(?P<second>{_IDENT}))?"
    r"(?:\s+(?:WAIT\s+\d+|NOWAIT))?\s*;?\s*$",
    re.I | re.S,
)


@dataclass(frozen=True)
class Truncate:
    """`TRUNCATE [TABLE] [db.]table`: every row of the table is gone."""

    db: str
    table: str


def _unquote(ident: str) -> str:
    if len(ident) >= 2 and ident[0] == ident[-1] == "`":
        return ident[1:-1].replace("``", "`")
    return ident


def _without_leading_comments(query: str) -> str:
    pos = 0
    while True:
        m = _COMMENT.match(query, pos)
        if m is None or m.end() == pos:
            return query[pos:].strip()
        pos = m.end()


def row_effect(query: str, default_db: str) -> Truncate | None:
    """What `query` (a DDL group's statement, logged with `default_db`) does to a table's rows that no
    row event shows; None when it changes no rows (or is not understood: then the schema history keeps it)."""
    m = _TRUNCATE.match(_without_leading_comments(query))
    if m is None:
        return None
    if m["second"] is not None:
        return Truncate(_unquote(m["first"]), _unquote(m["second"]))
    if not default_db:
        return None  # "No database selected": the server refused it, so it is not in the binlog
    return Truncate(default_db, _unquote(m["first"]))
