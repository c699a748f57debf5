"""How sinks name their targets: the one `table_map` key syntax (cdcflow.config.sinks). Pure (no
Spark), so verify and the Phoenix schema code use it too."""

from __future__ import annotations

from collections.abc import Mapping


def mapped_table(table_map: Mapping[str, str], db: str, table: str, source: str | None = None) -> str | None:
    """A sink's `table_map` entry for a source table, or None: "<source>/db.table" first, then
    "db.table" (HBase: "namespace.table")."""
    keys = ([f"{source}/{db}.{table}"] if source else []) + [f"{db}.{table}"]
    for key in keys:
        if key in table_map:
            return str(table_map[key])
    return None
