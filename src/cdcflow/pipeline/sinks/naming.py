"""How sinks name their targets: the one `table_map` key syntax. Pure (no Spark), so verify and the
Phoenix schema code use it too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapped_table(table_map: Mapping[str, Any], db: str, table: str) -> str | None:
    """A sink's `table_map` entry for a source table, or None. Every sink keys it the same way:
    "db.table" (HBase: "namespace.table"). The HBase spelling "namespace:table" (and "table" in the
    default namespace) is accepted as well, so HBase names can be pasted as HBase shows them."""
    candidates = [f"{db}.{table}", f"{db}:{table}"] + ([table] if db == "default" else [])
    for key in candidates:
        if key in table_map:
            return str(table_map[key])
    return None
