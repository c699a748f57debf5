"""What a Query event of the binlog means for the open event group, from the statement's text. Pure."""

from __future__ import annotations

import enum
import re

from cdcflow.errors import TerminalError

_SAVEPOINT = re.compile(r"^SAVEPOINT\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_ROLLBACK_TO = re.compile(r"^ROLLBACK\s+(?:WORK\s+)?TO\s+(?:SAVEPOINT\s+)?(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_COMMIT = re.compile(r"^COMMIT(?:\s+WORK)?\s*$", re.IGNORECASE)
_ROLLBACK = re.compile(r"^ROLLBACK(?:\s+WORK)?\s*$", re.IGNORECASE)
_XA_STATEMENT = re.compile(r"^XA\s+(START|BEGIN|END)\b", re.IGNORECASE)
_XA_COMMIT = re.compile(r"^XA\s+COMMIT\b", re.IGNORECASE)
_XA_ROLLBACK = re.compile(r"^XA\s+ROLLBACK\b", re.IGNORECASE)
_XA_START = re.compile(r"^XA\s+(?:START|BEGIN)\s+(.+?)(?:\s+(?:JOIN|RESUME))?\s*$", re.IGNORECASE | re.DOTALL)
_XA_COMPLETION = re.compile(r"^XA\s+(?:COMMIT|ROLLBACK)\s+(.+?)\s*$", re.IGNORECASE | re.DOTALL)


class QueryRole(enum.Enum):
    """What a Query event means for the open event group."""

    OUTSIDE = "outside"  # no group open: nothing to do
    STATEMENT = "statement"  # BEGIN, XA END, RELEASE SAVEPOINT ...: nothing to do
    XA_START = "xa_start"  # MySQL: the group is the first half of an XA transaction; hold its rows from here
    SAVEPOINT = "savepoint"  # remember where the group's rows stand
    ROLLBACK_TO = "rollback_to"  # the rows since that savepoint did not happen
    COMMIT = "commit"  # ends the group: its rows happened
    ROLLBACK = "rollback"  # ends the group: its rows did not happen
    DDL = "ddl"  # a standalone statement (DDL): publish it, then it commits
    XA_COMMIT = "xa_commit"  # the prepared XA transaction's rows happened
    XA_ROLLBACK = "xa_rollback"  # they did not


def savepoint_name(query: str) -> str:
    """`SAVEPOINT `s1``, ``ROLLBACK TO `s1` `` → "s1" (names compare case-insensitively, like MariaDB's)."""
    m = _SAVEPOINT.match(query.strip()) or _ROLLBACK_TO.match(query.strip())
    if m is None:
        raise TerminalError(f"not a savepoint statement: {query[:200]!r}")
    name = m[1]
    if len(name) >= 2 and name[0] == name[-1] == "`":
        name = name[1:-1].replace("``", "`")
    return name.lower()


def xa_start_id(stmt: str) -> str | None:
    """The XA id of `XA START <xid>` (MySQL writes it as the first statement of the prepared half), else None."""
    m = _XA_START.match(stmt)
    return m[1] if m else None


def xa_completion_id(stmt: str) -> str | None:
    """The XA id of `XA COMMIT <xid>` / `XA ROLLBACK <xid>`, else None."""
    m = _XA_COMPLETION.match(stmt)
    return m[1] if m else None


def role_in_group(stmt: str, xa_completion: bool, standalone: bool) -> QueryRole | None:
    """The role of a statement inside an open group (`stmt` stripped). None: a group that completes an XA
    transaction holds something else than XA COMMIT or XA ROLLBACK (the caller stops)."""
    if xa_completion:
        if _XA_COMMIT.match(stmt):
            return QueryRole.XA_COMMIT
        if _XA_ROLLBACK.match(stmt):
            return QueryRole.XA_ROLLBACK
        return None
    if stmt.upper() == "BEGIN" or _XA_STATEMENT.match(stmt):
        return QueryRole.STATEMENT
    if standalone:
        return QueryRole.DDL
    if _SAVEPOINT.match(stmt):
        return QueryRole.SAVEPOINT
    if _ROLLBACK_TO.match(stmt):
        return QueryRole.ROLLBACK_TO
    if _COMMIT.match(stmt):
        return QueryRole.COMMIT
    if _ROLLBACK.match(stmt):
        return QueryRole.ROLLBACK
    return QueryRole.STATEMENT  # RELEASE SAVEPOINT and anything else inside a group changes no row
