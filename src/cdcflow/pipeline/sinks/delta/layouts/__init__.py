"""How a state table is laid out, folded and read: one strategy per layout, each owning both its fold (the
MERGE of pending changes into the state table) and its view (the same rules as SQL over the state table and
the pending changes), so each rule has one definition.

- `hbase`: one row per HBase row, per cell (`hbase.py`);
- `typed`: one row per MySQL row, the source's columns with their types (`mysql_typed.py`);
- `json`: one row per MySQL row, the row image as JSON (`mysql_json.py`).

The two MySQL layouts share their rules (`mysql.py`): the newest change per key, dropped when older than its
key's recorded delete or than the table's newest truncate.
"""

from __future__ import annotations

from cdcflow.pipeline.sinks.delta.layouts import hbase, mysql_json, mysql_typed
from cdcflow.pipeline.sinks.delta.layouts.base import Layout

LAYOUTS: dict[str, Layout] = {"hbase": hbase.LAYOUT, "json": mysql_json.LAYOUT, "typed": mysql_typed.LAYOUT}


def layout_of(name: str) -> Layout:
    return LAYOUTS[name]
