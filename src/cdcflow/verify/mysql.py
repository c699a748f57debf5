"""Compare a MySQL/MariaDB table with its change events (or with a sink): rows missing, extra or different.

`source_rows` reads `SELECT *` and renders each value exactly as the binlog decoder does (see
docs/mysql.md), from the column types in information_schema; so the two sides compare as plain
JSON values. `rebuild` applies change events the way a sink must: per key, the event with the
greatest position wins, deletes remove the row, a truncate removes every row whose newest change
is older than it; duplicates and replays change nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from cdcflow.clients.mysql import MySqlEndpoint, connect
from cdcflow.events.json_codec import MalformedEvent, decode
from cdcflow.sources.mysql.selected_values import render_selected, table_columns
from cdcflow.verify.report import VerifyReport

Row = dict[str, Any]


def key_json(row: Mapping[str, Any], key_cols: Iterable[str]) -> str:
    return orjson.dumps({k: row[k] for k in sorted(key_cols)}).decode()


def source_rows(ep: MySqlEndpoint, db: str, table: str, key_cols: tuple[str, ...] = ()) -> dict[str, Row]:
    """`SELECT *` of one table, rendered like change events, by key JSON."""
    return source_window(ep, db, table, key_cols)[0]


def source_window(
    ep: MySqlEndpoint, db: str, table: str, key_cols: tuple[str, ...] = (), after: tuple[Any, ...] | None = None,
    limit: int | None = None, upto: tuple[Any, ...] | None = None,
) -> tuple[dict[str, Row], list[tuple[Any, ...]]]:  # fmt: skip
    """The table's rows rendered like change events, by key JSON, and their key values as the server holds
    them. With `limit` or `upto`, in the server's key order: the rows whose key comes after `after` (None: from
    the start), the first `limit` of them, up to `upto` (one window of a sampled verify round)."""
    cols = table_columns(ep, db, table)
    if not cols:
        raise ValueError(f"table {db}.{table} does not exist")
    keys = key_cols or tuple(n for n, *_, pk in cols if pk) or tuple(c[0] for c in cols)
    names = [n for n, *_ in cols]
    key_at = [names.index(k) for k in keys]
    conn = connect(ep)
    out: dict[str, Row] = {}
    raw_keys: list[tuple[Any, ...]] = []
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            # FLOAT: the server prints 6 significant digits; read the exact float32 instead
            select = ", ".join(f"CAST(`{n}` AS DOUBLE)" if d == "float" else f"`{n}`" for n, d, *_ in cols)
            sql, params = f"SELECT {select} FROM `{db}`.`{table}`", ()
            if limit is not None or upto is not None or after is not None:
                key_list = ", ".join(f"`{k}`" for k in keys)
                marks = ", ".join(["%s"] * len(keys))
                where = []
                if after is not None:
                    where.append(f"({key_list}) > ({marks})")
                    params += tuple(after)
                if upto is not None:
                    where.append(f"({key_list}) <= ({marks})")
                    params += tuple(upto)
                sql += (" WHERE " + " AND ".join(where) if where else "") + f" ORDER BY {key_list}"
                sql += f" LIMIT {int(limit)}" if limit is not None else ""
            cur.execute(sql, params)
            for raw in cur.fetchall():
                row = {n: render_selected(d, c, f, v) for (n, d, c, f, _), v in zip(cols, raw, strict=True)}
                out[key_json(row, keys)] = row
                raw_keys.append(tuple(raw[i] for i in key_at))
    finally:
        conn.close()
    return out, raw_keys


def rebuild(records: Iterable[bytes]) -> tuple[dict[tuple[str, str], dict[str, Row]], int]:
    """Apply change events by position. Returns ({(db, table): {key JSON: row}}, malformed record count)."""
    newest: dict[tuple[str, str, str], tuple[tuple[int, ...], Row | None]] = {}
    truncated: dict[tuple[str, str], tuple[int, ...]] = {}
    malformed = 0
    for value in records:
        try:
            ev = decode(value)
        except MalformedEvent:
            malformed += 1
            continue
        if ev.source.connector != "mysql":
            continue
        if ev.op.value == "t":  # every row whose newest change is older is gone
            table_key = (ev.source.db, ev.source.table)
            truncated[table_key] = max(ev.source.pos, truncated.get(table_key, ev.source.pos))
            continue
        ident = (ev.source.db, ev.source.table, ev.key.decode())
        row = None if ev.op.value == "d" else ev.after
        seen = newest.get(ident)
        if seen is None or ev.source.pos > seen[0]:
            newest[ident] = (ev.source.pos, row)
    tables: dict[tuple[str, str], dict[str, Row]] = {}
    for (db, table, key), (pos, row) in newest.items():
        rows = tables.setdefault((db, table), {})
        cut = truncated.get((db, table))
        if row is not None and (cut is None or pos > cut):
            rows[key] = row
    return tables, malformed


def _same(a: Any, b: Any) -> bool:
    return bool(a == b) and type(a) is type(b)


def compare_tables(
    source: Mapping[str, Row], sink: Mapping[str, Row], report: VerifyReport | None = None
) -> VerifyReport:
    report = report or VerifyReport()
    for key in sorted(set(source) | set(sink)):
        report.rows_compared += 1
        s, d = source.get(key), sink.get(key)
        if d is None:
            report.missing += 1
            report.note(f"missing: {key}")
        elif s is None:
            report.extra += 1
            report.note(f"extra: {key}")
        elif s.keys() != d.keys() or not all(_same(s[c], d[c]) for c in s):
            report.different += 1
            diff = {c: (s.get(c), d.get(c)) for c in s.keys() | d.keys() if not _same(s.get(c), d.get(c))}
            report.note(f"different: {key}: {diff}")
    return report
