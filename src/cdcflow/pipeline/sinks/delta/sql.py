"""SQL text shared by the layouts' views and folds: Delta paths, the pending changes of a table, projections."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.types import StructType

from cdcflow.pipeline.sinks.delta.records import FoldRecord


def quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def delta_path(path: str) -> str:
    return "delta.`" + path.replace("`", "``") + "`"


def pending_sql(record: FoldRecord, start: int, end: int | None = None) -> str:
    """The table's log rows of log versions `start` to `end` (None: whatever the log holds when the query runs),
    from the Change Data Feed: only those commits' files are read."""
    where = " AND ".join(
        f"{quoted(c)} = {sql_string(v)}"
        for c, v in (("source_name", record.source), ("db", record.db), ("table", record.table))
    )
    versions = f"{max(start, 0)}" if end is None else f"{max(start, 0)}, {end}"
    return (
        f"SELECT * FROM table_changes_by_path({sql_string(record.log)}, {versions}) "
        f"WHERE _change_type = 'insert' AND {where}"
    )


def steps(relation: str, projections: Sequence[Sequence[str]]) -> str:
    """Projections applied one over the other to `relation` (a query), as one query."""
    query = relation
    for step in projections:
        query = f"SELECT {', '.join(step)} FROM ({query})"
    return query


def empty(schema: StructType) -> str:
    columns = ", ".join(f"CAST(NULL AS {f.dataType.simpleString()}) AS {quoted(f.name)}" for f in schema.fields)
    return f"SELECT {columns} WHERE false"


def without_deleted(query: str, columns: Sequence[str], include_deleted: bool) -> str:
    """`query` less its deleted rows, by whichever deleted flag its `columns` have (HBase rows: `exists` false;
    typed MySQL rows: `_cdcflow_deleted`; the JSON layout's tombstones: `deleted`)."""
    if include_deleted:
        return query
    for flag in ("exists", "_cdcflow_deleted", "deleted"):
        if flag in columns:
            kept = "coalesce(`exists`, false)" if flag == "exists" else f"NOT coalesce({quoted(flag)}, false)"
            return f"SELECT * FROM ({query}) WHERE {kept}"
    return query
