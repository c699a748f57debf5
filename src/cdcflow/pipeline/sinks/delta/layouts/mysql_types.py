"""MySQL tables as typed Delta tables: the source's columns with exact types, plus cdcflow's
position columns. Types (from the capture's schema-history topic; values from the events' JSON,
docs/mysql.md "Values"):

    TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT   tinyint/smallint/int/int/bigint
      ... UNSIGNED                          the next wider type; BIGINT UNSIGNED → decimal(20,0)
    DECIMAL(p,s)                            decimal(p,s) (p ≤ 38), else string (the exact text)
    FLOAT / DOUBLE                          float / double
    YEAR, BIT(n)                            smallint, bigint (BIT(64) → decimal(20,0))
    DATE                                    date (proleptic Gregorian, as MySQL; zero dates → null)
    DATETIME(n)                             timestamp_ntz (wall clock, microseconds)
    TIMESTAMP(n)                            timestamp (an instant, microseconds)
    TIME(n), CHAR/VARCHAR/TEXT/ENUM/SET/JSON string
    BINARY/VARBINARY/BLOB/GEOMETRY          binary

cdcflow's columns: `_cdcflow_deleted` (a delete keeps the row, key columns set and the others
null, so an older change replayed later cannot bring it back), `_cdcflow_op`, `_cdcflow_pos`
(the MERGE's guard: a row changes only for a greater position) and `_cdcflow_source_ts_ms`.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.sql import quoted, sql_string
from cdcflow.pipeline.sinks.mysql_history import ZERO_DATE_PATTERN, MySqlColumn, parse_sql_type

DELETED, OP, POS, SOURCE_TS = "_cdcflow_deleted", "_cdcflow_op", "_cdcflow_pos", "_cdcflow_source_ts_ms"
META_FIELDS = (
    StructField(DELETED, BooleanType()),
    StructField(OP, StringType()),
    StructField(POS, ArrayType(LongType())),
    StructField(SOURCE_TS, LongType()),
)
# Hidden columns of a table that keeps history (decision 0027): the change log's key text of the row, and the row
# image it had before a rewrite of the table for a DDL (null once the row changes again). Never in the views.
KEY_TEXT, IMAGE = "_cdcflow_key", "_cdcflow_image"
HIDDEN_FIELDS = (StructField(KEY_TEXT, StringType()), StructField(IMAGE, StringType()))
HIDDEN = frozenset(f.name for f in HIDDEN_FIELDS)
_SIGNED = {"TINYINT": "tinyint", "SMALLINT": "smallint", "MEDIUMINT": "int", "INT": "int", "BIGINT": "bigint"}
_UNSIGNED = {"TINYINT": "smallint", "SMALLINT": "int", "MEDIUMINT": "int", "INT": "bigint", "BIGINT": "decimal(20,0)"}
_TEXT = frozenset({"CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON", "TIME"})
_BYTES = frozenset({"BINARY", "VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "GEOMETRY"})
# Type changes Delta's type widening makes in place (ALTER COLUMN ... TYPE, no rewrite; Delta 4.0
# "Delta type widening"); any other change of a column's type needs the table rebuilt.
_WIDER = {
    "tinyint": ("smallint", "int", "bigint"),
    "smallint": ("int", "bigint"),
    "int": ("bigint",),
    "float": ("double",),
    "date": ("timestamp_ntz",),
}


def delta_type(sql_type: str) -> str:
    """The Spark/Delta type that holds every value of a MySQL column type exactly."""
    base, args, unsigned = parse_sql_type(sql_type)
    if base in _SIGNED:
        return (_UNSIGNED if unsigned else _SIGNED)[base]
    if base in ("DECIMAL", "NUMERIC"):
        if len(args) != 2:
            raise ConfigError(f"{sql_type}: precision and scale are needed to map a DECIMAL")
        return f"decimal({args[0]},{args[1]})" if args[0] <= 38 else "string"
    if base in ("FLOAT", "DOUBLE"):
        return base.lower()
    if base == "YEAR":
        return "smallint"
    if base == "BIT":
        return "decimal(20,0)" if args and args[0] > 63 else "bigint"
    if base in ("DATE", "NEWDATE"):
        return "date"
    if base == "DATETIME":
        return "timestamp_ntz"
    if base == "TIMESTAMP":
        return "timestamp"
    if base in _TEXT:
        return "string"
    if base in _BYTES:
        return "binary"
    raise ConfigError(f"MySQL column type {sql_type} has no Delta mapping")


def key_columns(columns: Sequence[MySqlColumn]) -> list[str]:
    return [c.name for c in sorted((c for c in columns if c.key_order is not None), key=lambda c: c.key_order or 0)]


def table_schema(columns: Sequence[MySqlColumn]) -> StructType:
    """The Delta table: the source's columns in source order, then cdcflow's."""
    taken = [c.name for c in columns if c.name.lower() in {f.name for f in META_FIELDS}]
    if taken:
        raise ConfigError(f"column(s) {taken} collide with cdcflow's own columns of a typed Delta table")
    fields = [StructField(c.name, _parsed(delta_type(c.sql_type))) for c in columns]
    return StructType([*fields, *META_FIELDS])


_SPARK_TYPES: dict[str, DataType] = {
    "tinyint": ByteType(), "smallint": ShortType(), "int": IntegerType(), "bigint": LongType(),
    "float": FloatType(), "double": DoubleType(), "date": DateType(), "timestamp_ntz": TimestampNTZType(),
    "timestamp": TimestampType(), "string": StringType(), "binary": BinaryType(),
}  # fmt: skip


def _parsed(type_name: str) -> DataType:
    if type_name.startswith("decimal("):
        precision, scale = type_name[8:-1].split(",")
        return DecimalType(int(precision), int(scale))
    return _SPARK_TYPES[type_name]


def convert_sql(raw: str, type_name: str) -> str:
    """An event value (JSON text, the SQL expression `raw`) as `type_name`; null when it does not fit
    (the caller counts those) and for MySQL's zero dates, which no Delta type holds."""
    if type_name == "string":
        return raw
    if type_name == "binary":
        return f"try_to_binary({raw}, 'base64')"
    if type_name in _DATES:
        return f"CASE WHEN {_zero_date(raw)} THEN NULL ELSE try_cast({raw} AS {type_name}) END"
    return f"try_cast({raw} AS {type_name})"


_DATES = ("date", "timestamp", "timestamp_ntz")


def _zero_date(raw: str) -> str:
    return f"{raw} RLIKE {sql_string(ZERO_DATE_PATTERN)}"


def misfit_sql(raw: str, converted: str, type_name: str) -> str:
    """True where a value is present but did not convert (zero dates excepted: null by design), or converted
    with a loss: digits past a DECIMAL's scale, a time of day in a DATE, an integer whose text is not the
    event's ('01234'). Such a value comes from a column the source has changed since the known shape (MODIFY
    price DECIMAL(12,4), DATE to DATETIME, INT to VARCHAR): the sink then reads the schema history again."""
    zero = _zero_date(raw) if type_name in _DATES else "false"
    lost = "false"
    if type_name.startswith("decimal("):
        scale = int(type_name[8:-1].split(",")[1])
        beyond_scale = "\\.[0-9]{" + str(scale) + "}[0-9]*[1-9]"  # a nonzero digit past the scale
        lost = f"{raw} RLIKE {sql_string(beyond_scale)}"
    elif type_name == "date":
        lost = f"{raw} RLIKE {sql_string('[ T][0-9:.]*[1-9]')}"
    elif type_name in ("tinyint", "smallint", "int", "bigint"):
        lost = f"CAST({converted} AS STRING) != {raw}"
    return f"({raw} IS NOT NULL AND (({converted} IS NULL AND NOT ({zero})) OR ({converted} IS NOT NULL AND {lost})))"


def typed_columns_sql(columns: Sequence[MySqlColumn]) -> list[str]:
    """The typed table's columns as SQL over a relation of the newest event per key (key, op, pos,
    source_ts_ms) and `_values`, the event's values as map<string,string> (`VALUES_SQL`). A delete
    keeps its key columns (from the event's key) and nulls the others. The fold and the views
    (`views.py`, SQL a catalog can store) both build rows from these."""
    meta = [f"op = 'd' AS {DELETED}", f"op AS {OP}", f"pos AS {POS}", f"source_ts_ms AS {SOURCE_TS}"]
    return [*source_columns_sql(columns), *meta]


def source_columns_sql(columns: Sequence[MySqlColumn]) -> list[str]:
    """The source's columns of `typed_columns_sql`, without cdcflow's."""
    keys = set(key_columns(columns))
    return [f"{convert_sql(_raw(c.name, c.name in keys), delta_type(c.sql_type))} AS {quoted(c.name)}" for c in columns]


# The event's values parsed once, in a projection of their own: every column reads this map (Spark
# keeps an expensive expression that several others use in one place).
VALUES_SQL = "from_json(coalesce(after, key), 'map<string,string>') AS _values"


def typed_rows(latest: DataFrame, columns: Sequence[MySqlColumn], key_text: bool = False) -> DataFrame:
    """The newest event per key (columns key, after, op, pos, source_ts_ms) as rows of the typed
    table, plus `_misfits` (the names of the columns whose value did not convert) and
    `_event_columns` (the columns the event carries); with `key_text`, the event's key as the log has it
    (`KEY_TEXT`). The misfit list avoids higher-order functions, which run interpreted and would parse again."""
    keys = set(key_columns(columns))
    bad = []
    for c in columns:
        type_name, raw = delta_type(c.sql_type), _raw(c.name, c.name in keys)
        bad.append(f"CASE WHEN {misfit_sql(raw, convert_sql(raw, type_name), type_name)} THEN {sql_string(c.name)} END")
    misfits = f"array_compact(array({', '.join(bad)}))" if bad else "array()"
    return latest.selectExpr("*", VALUES_SQL).selectExpr(
        *typed_columns_sql(columns), *([f"key AS {KEY_TEXT}"] if key_text else []),
        f"CAST({misfits} AS array<string>) AS _misfits", "map_keys(_values) AS _event_columns",
    )  # fmt: skip


def row_image_sql(columns: Sequence[MySqlColumn]) -> str:
    """A typed row's source columns written back as a row image (JSON text, an SQL expression over the typed
    table's columns) that `typed_columns_sql` reads as the same values: each value as Spark writes it as text,
    binary as base64, a TIMESTAMP with its zone offset (so any session zone reads the same instant). The history
    keeps the state rows a fold replaced this way (`history/append.py`). Not the capture's own text (its numbers
    are JSON numbers, its keys in the row's order), only its values."""
    pairs = []
    for c in columns:
        type_name, column = delta_type(c.sql_type), quoted(c.name)
        if type_name == "binary":
            text = f"base64({column})"
        elif type_name == "timestamp":
            text = f"date_format({column}, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX\")"
        else:
            text = f"CAST({column} AS STRING)"
        pairs.append(f"{sql_string(c.name)}, {text}")
    return f"to_json(map({', '.join(pairs)}))" if pairs else "'{}'"


def _raw(name: str, key: bool) -> str:
    value = f"try_element_at(_values, {sql_string(name)})"
    return value if key else f"CASE WHEN op != 'd' THEN {value} END"


def type_changes(current: StructType, wanted: StructType) -> tuple[list[str], list[str]]:
    """(widenings Delta applies in place, changes it cannot) between the table and the source."""
    have = {f.name.lower(): f.dataType.simpleString() for f in current.fields}
    widen, refuse = [], []
    for f in wanted.fields:
        old, new = have.get(f.name.lower()), f.dataType.simpleString()
        if old is None or old == new:
            continue
        change = f"{f.name}: {old} → {new}"
        if new in _WIDER.get(old, ()) or _wider_decimal(old, new):
            widen.append(change)
        else:
            refuse.append(change)
    return widen, refuse


def _wider_decimal(old: str, new: str) -> bool:
    def args(t: str) -> tuple[int, int] | None:
        if not t.startswith("decimal("):
            return None
        p, s = t[8:-1].split(",")
        return int(p), int(s)

    o, n = args(old), args(new)
    if n is None:
        return False
    if o is None:  # an integer column into a decimal with room for its digits
        digits = {"tinyint": 10, "smallint": 10, "int": 10, "bigint": 20}.get(old)  # Delta's minimum targets
        return digits is not None and n[0] - n[1] >= digits
    return n[1] >= o[1] and n[0] - n[1] >= o[0] - o[1]
