"""MySQL tables as Phoenix tables: names, exact types, CREATE TABLE, compatibility. Pure (no I/O).

Type mapping (docs/phoenix.md has the table and the reasons):

    TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT   TINYINT/SMALLINT/INTEGER/INTEGER/BIGINT
      ... UNSIGNED                          the next wider type; BIGINT UNSIGNED → DECIMAL(20,0)
    DECIMAL(p,s)                            DECIMAL(p,s) (p ≤ 38), else VARCHAR (the exact text)
    FLOAT / DOUBLE                          FLOAT / DOUBLE
    YEAR, BIT(n)                            SMALLINT, BIGINT (BIT(64) → DECIMAL(20,0))
    DATE                                    DATE
    DATETIME(n), TIMESTAMP(n)               TIMESTAMP (nanosecond precision; UTC wall clock)
    TIME(n)                                 VARCHAR ('-838:59:59.000000'; Phoenix TIME is a time of day)
    CHAR/VARCHAR/TEXT/ENUM/SET/JSON         VARCHAR (Phoenix CHAR takes single-byte characters only)
    BINARY(n)                               BINARY(n) (MySQL pads it with zero bytes too)
    VARBINARY/BLOB/GEOMETRY                 VARBINARY
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn, parse_sql_type
from cdcflow.pipeline.sinks.naming import mapped_table

# cdcflow's own columns (guarded.py) and the schema of its earlier stage and position tables
INTERNAL_COLUMNS = frozenset({"_CDCFLOW_POS", "_CDCFLOW_DELETED"})
STATE_SCHEMA = "CDCFLOW"

_INTEGERS = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")
_SIGNED = {"TINYINT": "TINYINT", "SMALLINT": "SMALLINT", "MEDIUMINT": "INTEGER", "INT": "INTEGER", "BIGINT": "BIGINT"}
_UNSIGNED = {
    "TINYINT": "SMALLINT", "SMALLINT": "INTEGER", "MEDIUMINT": "INTEGER", "INT": "BIGINT", "BIGINT": "DECIMAL(20,0)",
}  # fmt: skip
# Digits before the point each Phoenix integer type holds in full (for DECIMAL → integer checks).
_INTEGER_DIGITS = {"TINYINT": 2, "SMALLINT": 4, "INTEGER": 9, "BIGINT": 18}
_TEXT = frozenset({"CHAR", "VARCHAR", "TEXT", "ENUM", "SET", "JSON"})
_BYTES = frozenset({"VARBINARY", "BLOB", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "GEOMETRY"})

# java.sql.Types codes as SYSTEM.CATALOG stores them → Phoenix type names
_JDBC_TYPES = {
    -6: "TINYINT", 5: "SMALLINT", 4: "INTEGER", -5: "BIGINT", 6: "FLOAT", 8: "DOUBLE", 3: "DECIMAL",
    12: "VARCHAR", 1: "CHAR", -2: "BINARY", -3: "VARBINARY", 91: "DATE", 92: "TIME", 93: "TIMESTAMP", 16: "BOOLEAN",
}  # fmt: skip
# Phoenix type → the Spark SQL type the pipeline converts event values to before writing.
_SPARK_TYPES = {
    "TINYINT": "tinyint", "SMALLINT": "smallint", "INTEGER": "int", "BIGINT": "bigint", "FLOAT": "float",
    "DOUBLE": "double", "VARCHAR": "string", "CHAR": "string", "BINARY": "binary", "VARBINARY": "binary",
    "DATE": "date", "TIMESTAMP": "timestamp", "BOOLEAN": "boolean",
}  # fmt: skip


@dataclass(frozen=True)
class PhoenixColumn:
    name: str
    type: str  # "DECIMAL(20,0)", "VARCHAR", "BINARY(16)", ...
    nullable: bool = True


@dataclass(frozen=True)
class PhoenixTable:
    schema: str
    name: str
    columns: tuple[PhoenixColumn, ...]
    primary_key: tuple[str, ...]  # in row-key order

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}" if self.schema else quote(self.name)

    @property
    def display(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def column(self, name: str) -> PhoenixColumn | None:
        return next((c for c in self.columns if c.name == name), None)


def quote(identifier: str) -> str:
    """A Phoenix identifier, quoted so it keeps its exact case (unquoted, Phoenix upper-cases)."""
    if '"' in identifier or not identifier:
        raise ConfigError(f"Phoenix identifiers cannot be empty or contain '\"': {identifier!r}")
    return f'"{identifier}"'


def map_name(name: str, case: str) -> str:
    if case == "upper":
        return name.upper()
    if case == "preserve":
        return name
    raise ConfigError(f"name_case must be 'upper' or 'preserve', not {case!r}")


def target_name(
    db: str, table: str, table_map: Mapping[str, str], case: str, source: str | None = None
) -> tuple[str, str]:
    """(schema, table) in Phoenix for a MySQL table: the `table_map` entry "<source>/db.table" or
    "db.table" → "SCHEMA.TABLE" (or "TABLE", with no schema), else the MySQL names with the `case` rule."""
    mapped = mapped_table(table_map, db, table, source)
    if mapped is not None:
        schema, _, name = mapped.rpartition(".")
        return schema, name
    return map_name(db, case), map_name(table, case)


def legacy_position_table_name(schema: str, name: str) -> str:
    """The positions table cdcflow before decision 0016 kept beside a table (in STATE_SCHEMA): its
    presence tells a table written by that design (refused, with what to do)."""
    raw = f"{schema}__{name}"
    safe = re.sub(r"[^A-Za-z0-9_]", "_", raw).upper()
    if safe != raw.upper():  # kept distinct MySQL names distinct after the replacement
        safe += "_" + hashlib.sha1(raw.encode()).hexdigest()[:8].upper()
    return f"{safe}__POS"


def create_table_sql(table: PhoenixTable) -> str:
    # Phoenix wants the key columns declared first, in key order, and allows NOT NULL on them only
    # (unless rows are immutable).
    key = [c for name in table.primary_key if (c := table.column(name)) is not None]
    rest = [c for c in table.columns if c.name not in table.primary_key]
    cols = ", ".join(f"{quote(c.name)} {c.type}{' NOT NULL' if c in key else ''}" for c in (*key, *rest))
    pk = ", ".join(quote(k) for k in table.primary_key)
    return f"CREATE TABLE IF NOT EXISTS {table.qualified} ({cols}, CONSTRAINT PK PRIMARY KEY ({pk}))"


# --- types ------------------------------------------------------------------------------------


def phoenix_type(sql_type: str) -> str:
    """The Phoenix type that holds every value of a MySQL column type exactly."""
    base, args, unsigned = parse_sql_type(sql_type)
    if base in _SIGNED:
        return (_UNSIGNED if unsigned else _SIGNED)[base]
    if base == "DECIMAL":
        if len(args) != 2:
            raise ConfigError(f"{sql_type}: precision and scale are needed to map a DECIMAL")
        return f"DECIMAL({args[0]},{args[1]})" if args[0] <= 38 else "VARCHAR"
    if base in ("FLOAT", "DOUBLE"):
        return base
    if base == "YEAR":
        return "SMALLINT"
    if base == "BIT":
        return "DECIMAL(20,0)" if args and args[0] > 63 else "BIGINT"
    if base in ("DATE", "NEWDATE"):
        return "DATE"
    if base in ("DATETIME", "TIMESTAMP"):
        return "TIMESTAMP"
    if base == "TIME" or base in _TEXT:
        return "VARCHAR"
    if base == "BINARY":
        return f"BINARY({args[0]})" if args else "VARBINARY"
    if base in _BYTES:
        return "VARBINARY"
    raise ConfigError(f"MySQL column type {sql_type} has no Phoenix mapping")


def _decimal_args(t: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", t)
    return (int(m.group(1)), int(m.group(2))) if m else None


def holds(actual: str, expected: str) -> bool:
    """Whether a Phoenix column of type `actual` holds every value of `expected` exactly."""
    if actual == expected:
        return True
    if expected in _INTEGERS:
        if actual in _INTEGERS:
            return _INTEGERS.index(actual) >= _INTEGERS.index(expected)
        dec = _decimal_args(actual)
        return dec is not None and dec[0] - dec[1] > _INTEGER_DIGITS[expected]
    exp_dec, act_dec = _decimal_args(expected), _decimal_args(actual)
    if exp_dec and act_dec:
        return act_dec[1] >= exp_dec[1] and act_dec[0] - act_dec[1] >= exp_dec[0] - exp_dec[1]
    return expected.startswith("BINARY(") and actual == "VARBINARY"


def spark_type(phoenix: str) -> str:
    """The Spark SQL type event values are converted to for a Phoenix column."""
    if phoenix.startswith("DECIMAL("):
        return phoenix.lower()
    base = phoenix.split("(")[0]
    if base not in _SPARK_TYPES:
        raise ConfigError(f"Phoenix type {phoenix} is not supported by the phoenix sink")
    return _SPARK_TYPES[base]


def catalog_type(data_type: int, size: int | None, scale: int | None) -> str:
    """A type as SYSTEM.CATALOG describes it (java.sql.Types code, size, scale) → its DDL name."""
    base = _JDBC_TYPES.get(data_type, f"TYPE#{data_type}")
    if base == "DECIMAL" and size is not None:
        return f"DECIMAL({size},{scale or 0})"
    if base in ("CHAR", "BINARY") and size is not None:
        return f"{base}({size})"
    if base == "VARCHAR" and size is not None:
        return f"VARCHAR({size})"
    return base


def table_from_catalog(schema: str, name: str, rows: Sequence[Sequence[Any]]) -> PhoenixTable | None:
    """A table from SYSTEM.CATALOG rows (COLUMN_NAME, DATA_TYPE, COLUMN_SIZE, DECIMAL_DIGITS,
    NULLABLE, KEY_SEQ, ORDINAL_POSITION); None when there are none (no such table)."""
    cols = [r for r in rows if r[0] is not None]
    if not cols:
        return None
    cols.sort(key=lambda r: int(r[6] or 0))
    columns = tuple(PhoenixColumn(str(r[0]), catalog_type(int(r[1]), r[2], r[3]), bool(r[4])) for r in cols)
    pk = tuple(str(r[0]) for r in sorted((r for r in cols if r[5] is not None), key=lambda r: int(r[5])))
    return PhoenixTable(schema, name, columns, pk)


# --- from MySQL -------------------------------------------------------------------------------


def expected_table(schema: str, name: str, columns: Sequence[MySqlColumn], case: str) -> PhoenixTable:
    """The Phoenix table cdcflow creates for a MySQL table: the same columns, the primary key in the
    MySQL key order (which becomes the HBase row-key order; Phoenix declares key columns first)."""
    keyed = sorted((c for c in columns if c.key_order is not None), key=lambda c: c.key_order or 0)
    if not keyed:
        raise ConfigError(
            f"{schema}.{name}: the MySQL table has no primary key; create the Phoenix table yourself "
            "with the key you configured in mysql.key_columns"
        )
    # nullable: Phoenix cannot declare NOT NULL outside the primary key
    cols = tuple(PhoenixColumn(map_name(c.name, case), _column_type(c)) for c in columns)
    return PhoenixTable(schema, name, cols, tuple(map_name(c.name, case) for c in keyed))


def _column_type(c: MySqlColumn) -> str:
    """phoenix_type, except that a BINARY(n) outside the key is VARBINARY (the same zero-padded
    bytes): Phoenix 5.2 stores a NULL that an UPSERT ... ON DUPLICATE KEY inserts into a BINARY(n)
    column as n zero bytes (found by tests/e2e/test_pipeline_phoenix.py; the guarded writes use it)."""
    mapped = phoenix_type(c.sql_type)
    return "VARBINARY" if mapped.startswith("BINARY(") and c.key_order is None else mapped


def compatibility_problems(expected: PhoenixTable, actual: PhoenixTable) -> list[str]:
    """Why `actual` cannot hold what `expected` describes (empty when it can)."""
    problems = []
    for col in expected.columns:
        have = actual.column(col.name)
        if have is None:
            problems.append(f"column {col.name} ({col.type}) is missing")
        elif have.type.startswith("BINARY(") and col.type == "VARBINARY" and col.name not in expected.primary_key:
            problems.append(f"column {col.name} is {have.type}; it needs VARBINARY (Phoenix 5.2 turns a NULL written "
                            "by a guarded upsert into zero bytes in a BINARY column)")  # fmt: skip
        elif not holds(have.type, col.type):
            problems.append(f"column {col.name} is {have.type}; it needs {col.type} to hold the MySQL values exactly")
    if set(actual.primary_key) != set(expected.primary_key):
        problems.append(
            f"primary key is ({', '.join(actual.primary_key)}); the MySQL key is ({', '.join(expected.primary_key)})"
        )
    problems += [f"column {c.name} clashes with a cdcflow column name" for c in expected.columns
                 if c.name in INTERNAL_COLUMNS]  # fmt: skip
    for col in actual.columns:
        if expected.column(col.name) is None and not col.nullable and col.name not in actual.primary_key:
            problems.append(f"column {col.name} is NOT NULL but has no MySQL column to fill it")
    return problems


def sortable_position(pos: Sequence[int]) -> str:
    """A position as text that sorts like the position (Phoenix compares it as VARCHAR)."""
    return ".".join(f"{p:020d}" for p in pos)
