"""The guarded layout of a Phoenix table (decision 0016). Pure: names and SQL, no I/O.

cdcflow writes a physical table `<TABLE>__CDCFLOW`: the MySQL table's columns plus two of its own,
the position of the change a row holds (`_CDCFLOW_POS`, text that sorts like the position) and
whether that change was a delete (`_CDCFLOW_DELETED`: the row is a tombstone, its other columns
NULL). Users read a Phoenix view with the table's own name, which leaves tombstones out.

Every write is one `UPSERT ... ON DUPLICATE KEY UPDATE` whose clauses set each column only when
the incoming position is greater than the stored one: Phoenix evaluates them under the row lock on
the region server, so an older or replayed change never overwrites a newer one and a delete never
comes back, whatever order executors and replays write in.
"""

from __future__ import annotations

from dataclasses import replace

from cdcflow.pipeline.sinks.phoenix.schema import PhoenixColumn, PhoenixTable, quote

GUARD_POS = "_CDCFLOW_POS"
GUARD_DELETED = "_CDCFLOW_DELETED"
GUARD_COLUMNS = (PhoenixColumn(GUARD_POS, "VARCHAR"), PhoenixColumn(GUARD_DELETED, "BOOLEAN"))
PHYSICAL_SUFFIX = "__CDCFLOW"
# The position of rows that were there before cdcflow: below every real one ("0000...0.0000...", 20 digits a
# part). Not '': Phoenix stores an empty VARCHAR as NULL.
ADOPTED_POS = "0"

# java.sql.Types of the Phoenix types cdcflow writes (for NULLs bound with their column's type)
_SQL_TYPES = {
    "TINYINT": -6, "SMALLINT": 5, "INTEGER": 4, "BIGINT": -5, "FLOAT": 6, "DOUBLE": 8, "DECIMAL": 3, "VARCHAR": 12,
    "CHAR": 1, "BINARY": -2, "VARBINARY": -3, "DATE": 91, "TIME": 92, "TIMESTAMP": 93, "BOOLEAN": 16,
}  # fmt: skip
# How GuardedUpsert.java binds a value: as it comes, or built from an epoch count
PLAIN, EPOCH_DAYS, EPOCH_MICROS = 0, 1, 2


def physical_name(name: str) -> str:
    return name + PHYSICAL_SUFFIX


def physical_table(view: PhoenixTable) -> PhoenixTable:
    """The table cdcflow writes for the table users read as `view`."""
    return replace(view, name=physical_name(view.name), columns=(*view.columns, *GUARD_COLUMNS))


def data_columns(table: PhoenixTable) -> tuple[PhoenixColumn, ...]:
    """A guarded table's columns without cdcflow's own."""
    return tuple(c for c in table.columns if c.name not in (GUARD_POS, GUARD_DELETED))


def is_guarded(table: PhoenixTable) -> bool:
    return table.column(GUARD_POS) is not None and table.column(GUARD_DELETED) is not None


def create_view_sql(view: PhoenixTable, physical: PhoenixTable) -> str:
    # Phoenix views select every column of their table: the two guard columns show, tombstones do not.
    return (
        f"CREATE VIEW IF NOT EXISTS {view.qualified} AS SELECT * FROM {physical.qualified} "
        f"WHERE {quote(GUARD_DELETED)} = FALSE"
    )


def upsert_sql(table: PhoenixTable) -> tuple[str, list[int]]:
    """The guarded UPSERT for a guarded table, and for each `?` in it the index of the value it
    takes in a row laid out as `data_columns(table)`, then the position, then the deleted flag."""
    data = data_columns(table)
    pos_at, deleted_at = len(data), len(data) + 1
    names = [*(c.name for c in data), GUARD_POS, GUARD_DELETED]
    params = list(range(len(names)))
    pos = quote(GUARD_POS)
    # A row without a position (put there before cdcflow adopted the table) is older than any change.
    newer = f"({pos} IS NULL OR {pos} < ?)"
    clauses = []
    for i, c in enumerate(data):
        if c.name in table.primary_key:
            continue  # Phoenix cannot update key columns; they are the row
        q = quote(c.name)
        # "WHEN q IS NULL THEN NULL": without it Phoenix 5.2 fails to write back a NULL fixed-width
        # value it keeps ("Illegal data. Expected length of at least 4 bytes, but had 1").
        clauses.append(f"{q} = CASE WHEN {newer} THEN ? WHEN {q} IS NULL THEN NULL ELSE {q} END")
        params += [pos_at, i]
    deleted = quote(GUARD_DELETED)
    clauses.append(f"{deleted} = CASE WHEN {newer} THEN ? ELSE {deleted} END")
    params += [pos_at, deleted_at]
    clauses.append(f"{pos} = CASE WHEN {newer} THEN ? ELSE {pos} END")  # last: the others compare the old one
    params += [pos_at, pos_at]
    columns = ", ".join(quote(n) for n in names)
    marks = ", ".join("?" for _ in names)
    sql = f"UPSERT INTO {table.qualified} ({columns}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {', '.join(clauses)}"
    return sql, params


def sql_type(phoenix_type: str) -> int:
    return _SQL_TYPES[phoenix_type.split("(")[0]]


def bind_kind(phoenix_type: str) -> int:
    return {"DATE": EPOCH_DAYS, "TIMESTAMP": EPOCH_MICROS}.get(phoenix_type, PLAIN)


def truncate_sql(table: PhoenixTable, position: str) -> str:
    """A TRUNCATE at `position` (the guard's text form): every row older than it becomes a tombstone at
    it, so a replayed older change of any key stays out, as after a delete."""
    keys = [quote(k) for k in table.primary_key]
    data = [c for c in data_columns(table) if c.name not in table.primary_key]
    literal = "'" + position.replace("'", "''") + "'"
    columns = ", ".join([*keys, *(quote(c.name) for c in data), quote(GUARD_POS), quote(GUARD_DELETED)])
    values = ", ".join([*keys, *("NULL" for _ in data), literal, "TRUE"])
    pos = quote(GUARD_POS)
    return (
        f"UPSERT INTO {table.qualified} ({columns}) SELECT {values} FROM {table.qualified} "
        f"WHERE {pos} IS NULL OR {pos} < {literal}"
    )


def adopt_sql(table: PhoenixTable) -> str:
    """Rows of a table the user made with the guard columns that have no position yet: given the lowest
    one (older than any change) and marked live, so guarded writes and the documented read see them."""
    keys = ", ".join(quote(k) for k in table.primary_key)
    pos, deleted = quote(GUARD_POS), quote(GUARD_DELETED)
    return (
        f"UPSERT INTO {table.qualified} ({keys}, {pos}, {deleted}) SELECT {keys}, '{ADOPTED_POS}', "
        f"coalesce({deleted}, FALSE) FROM {table.qualified} WHERE {pos} IS NULL"
    )
