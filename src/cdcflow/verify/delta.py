"""Compare a MySQL/MariaDB table with its Delta current view (`cdcflow verify mysql-delta`), row by row.

Both sides are rendered the way change events render MySQL values (cdcflow.verify.mysql), so the
comparison is exact. The Delta side is read through the current view (state plus changes not folded
yet: what the sink promises as of its last applied batch). Typed tables hold Spark types; they are
rendered back from values Spark gives without a time zone or a calendar on the way: dates as epoch
days, TIMESTAMP (an instant) as epoch microseconds, DATETIME (a wall clock) as its text. What typed
tables cannot hold is applied to the MySQL side first: zero dates ('0000-00-00') are NULL there
(docs/pipeline.md). The JSON layout keeps each row's event image, which compares as it is.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import orjson

from cdcflow.clients.mysql import MySqlEndpoint
from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.views import KeyRange, mysql_view_rows
from cdcflow.pipeline.sinks.mysql_history import ZERO_DATE_PATTERN
from cdcflow.sources.mysql.selected_values import render_selected, table_columns
from cdcflow.verify.mysql import Row, compare_tables, key_json, source_rows, source_window
from cdcflow.verify.report import VerifyReport

_ZERO_DATE = re.compile(ZERO_DATE_PATTERN)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)
Column = tuple[str, str, str, int, bool]  # table_columns: name, data type, column type, fsp, primary key


def delta_representable(data_type: str, value: Any) -> Any:
    """A MySQL value as a typed Delta table holds it: zero and partial-zero dates have no Delta value (NULL)."""
    if data_type.lower() in ("date", "datetime", "timestamp") and isinstance(value, str) and _ZERO_DATE.match(value):
        return None
    return value


def render_delta_value(data_type: str, column_type: str, fsp: int, value: Any) -> Any:
    """A typed Delta value (as `views.mysql_view_rows` reads it) → the change event's rendering of the MySQL type."""
    if value is None:
        return None
    t = data_type.lower()
    if t == "date":
        day = _EPOCH_DAY + dt.timedelta(days=int(value))
        return f"{day.year:04d}-{day:%m-%d}"
    if t == "timestamp":
        instant = _EPOCH + dt.timedelta(microseconds=int(value))
        return render_selected(t, column_type, fsp, instant)
    if t == "datetime":
        return str(value)[: 20 + fsp] if fsp else str(value)[:19]
    if t == "decimal" and isinstance(value, str):
        return value  # DECIMAL wider than 38 digits: the event's text
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint", "year", "bit"):
        return int(value)
    if t == "decimal":
        return format(Decimal(value), "f")
    if isinstance(value, bytes | bytearray):
        return render_selected(t, column_type, fsp, bytes(value))
    return render_selected(t, column_type, fsp, value)


def delta_rows(
    spark: Any, state_path: str, columns: list[Column], keys: tuple[str, ...], key_range: KeyRange | None = None
) -> tuple[dict[str, Row], bool]:
    """The current view of a MySQL table's Delta state, rendered like change events and keyed like
    `source_rows`; and whether the table is typed (else the JSON layout, which keeps each row's image).
    `key_range`: a typed table's rows in that range only."""
    out: dict[str, Row] = {}
    typed, rows = mysql_view_rows(spark, state_path, [(n, d) for n, d, *_ in columns], key_range)
    for values in rows:
        if not typed:
            image: Row = orjson.loads(values["after"])
            out[key_json(image, keys)] = image
            continue
        row: Row = {n: None for n, *_ in columns}  # a column the Delta table lacks shows as NULL differences
        row.update({n: render_delta_value(d, c, f, values[n]) for n, d, c, f, _ in columns if n in values})
        out[key_json(row, keys)] = row
    return out, typed


def mysql_delta_rows(
    ep: MySqlEndpoint, db: str, table: str, spark: Any, state_path: str, key_columns: tuple[str, ...] = ()
) -> tuple[dict[str, Row], dict[str, Row]]:
    """Both sides of a MySQL table and its Delta current view, keyed alike and rendered alike (what
    `verify_mysql_delta` compares)."""
    columns = table_columns(ep, db, table)
    if not columns:
        raise ConfigError(f"MySQL table {db}.{table} does not exist (or this user cannot see it)")
    keys = key_columns or tuple(n for n, *_, pk in columns if pk) or tuple(c[0] for c in columns)
    types = {name: d for name, d, *_ in columns}
    sink, typed = delta_rows(spark, state_path, columns, keys)
    expected = source_rows(ep, db, table, keys)
    if typed:
        expected = {k: {c: delta_representable(types[c], v) for c, v in row.items()} for k, row in expected.items()}
    return expected, sink


# Key types MySQL and Spark order alike (strings follow the column's collation in MySQL, bytes in Spark).
RANGE_KEY_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year", "decimal", "binary",
                             "varbinary"})  # fmt: skip


class MySqlDeltaWindows:
    """The windows of `cdcflow verify mysql-delta --sample N`: each round the next N keys of the MySQL table in
    its key order (after the last window, from its start again), against the same keys of the Delta view. With
    keys of RANGE_KEY_TYPES on a typed table, every view row between the window's first and last key is read,
    so a row only the sink has is found too; otherwise the view's rows of the window's keys are (rows only the
    sink has are found by rounds without --sample)."""

    def __init__(self, ep: MySqlEndpoint, db: str, table: str, spark: Any, state_path: str,
                 key_columns: tuple[str, ...], sample: int) -> None:  # fmt: skip
        self.ep, self.db, self.table, self.spark, self.state_path = ep, db, table, spark, state_path
        self.key_columns, self.sample = key_columns, sample
        self.after: tuple[Any, ...] | None = None  # the last window's last key
        self.low: tuple[Any, ...] | None = None
        self.high: tuple[Any, ...] | None = None

    def advance(self) -> None:
        """The next window: the `sample` keys after the last window's; the last window reaches to the end (rows
        only the sink has after the source's last key are in it), and the next starts from the start again."""
        _rows, raw = source_window(self.ep, self.db, self.table, self._keys(), self.after, self.sample)
        self.low = self.after
        if len(raw) < self.sample:
            self.high = self.after = None
        else:
            self.high = self.after = raw[-1]

    def bounds(self) -> tuple[str, str]:
        return (repr(self.low) if self.low is not None else "(start)",
                repr(self.high) if self.high is not None else "(end)")  # fmt: skip

    def _keys(self) -> tuple[str, ...]:
        columns = table_columns(self.ep, self.db, self.table)
        if not columns:
            raise ConfigError(f"MySQL table {self.db}.{self.table} does not exist (or this user cannot see it)")
        return self.key_columns or tuple(n for n, *_, pk in columns if pk) or tuple(c[0] for c in columns)

    def look(self) -> tuple[dict[str, Row], dict[str, Row]]:
        """Both sides of the current window, keyed alike and rendered alike."""
        columns = table_columns(self.ep, self.db, self.table)
        keys = self._keys()
        types = {name: d.lower() for name, d, *_ in columns}
        expected, _raw = source_window(self.ep, self.db, self.table, keys, self.low, None, self.high)
        ranged = all(types.get(k) in RANGE_KEY_TYPES for k in keys)
        key_range = KeyRange(keys, self.low, self.high) if ranged else None
        sink, typed = delta_rows(self.spark, self.state_path, columns, keys, key_range)
        if not (typed and ranged) and (self.low is not None or self.high is not None):
            sink = {k: row for k, row in sink.items() if k in expected}
        if typed:
            expected = {k: {c: delta_representable(types[c], v) for c, v in row.items()} for k, row in expected.items()}
        return expected, sink


def verify_mysql_delta(
    ep: MySqlEndpoint, db: str, table: str, spark: Any, state_path: str, key_columns: tuple[str, ...] = ()
) -> VerifyReport:
    return compare_tables(*mysql_delta_rows(ep, db, table, spark, state_path, key_columns))
