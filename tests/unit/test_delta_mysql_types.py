"""The MySQL → typed Delta mapping (pure parts): types, keys, evolution rules."""

from __future__ import annotations

import pytest

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("mysql", "delta"),
    [
        ("TINYINT", "tinyint"), ("TINYINT UNSIGNED", "smallint"), ("SMALLINT UNSIGNED", "int"),
        ("MEDIUMINT", "int"), ("MEDIUMINT UNSIGNED", "int"), ("INT", "int"), ("INT UNSIGNED", "bigint"),
        ("BIGINT", "bigint"), ("BIGINT UNSIGNED", "decimal(20,0)"), ("DECIMAL(10,2)", "decimal(10,2)"),
        ("DECIMAL(38,10)", "decimal(38,10)"), ("DECIMAL(65,30)", "string"), ("FLOAT", "float"), ("DOUBLE", "double"),
        ("YEAR", "smallint"), ("BIT(8)", "bigint"), ("BIT(64)", "decimal(20,0)"), ("DATE", "date"),
        ("DATETIME(6)", "timestamp_ntz"), ("TIMESTAMP(3)", "timestamp"), ("TIME(6)", "string"),
        ("VARCHAR(20)", "string"), ("ENUM", "string"), ("JSON", "string"), ("BINARY(4)", "binary"),
        ("LONGBLOB", "binary"), ("GEOMETRY", "binary"),
    ],
)  # fmt: skip
def test_each_mysql_type_maps_to_a_delta_type_that_holds_it_exactly(mysql: str, delta: str) -> None:
    assert mt.delta_type(mysql) == delta


def test_unknown_types_and_cdcflow_column_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="no Delta mapping"):
        mt.delta_type("SERIAL")
    with pytest.raises(ConfigError, match="precision and scale"):
        mt.delta_type("DECIMAL")
    with pytest.raises(ConfigError, match="collide"):
        mt.table_schema([MySqlColumn("_cdcflow_pos", "INT", False, 0)])


def test_key_columns_follow_the_key_order_not_the_column_order() -> None:
    cols = [MySqlColumn("a", "INT", False, 1), MySqlColumn("b", "INT", True, None), MySqlColumn("c", "INT", False, 0)]
    assert mt.key_columns(cols) == ["c", "a"]
    schema = mt.table_schema(cols)
    assert schema.fieldNames() == ["a", "b", "c", "_cdcflow_deleted", "_cdcflow_op", "_cdcflow_pos",
                                   "_cdcflow_source_ts_ms"]  # fmt: skip


def test_type_changes_split_into_widenings_delta_makes_in_place_and_the_rest() -> None:
    def schema(*types: str) -> object:
        return mt.table_schema([MySqlColumn(f"c{i}", t, True, None) for i, t in enumerate(types)])

    old = schema("INT", "TINYINT", "FLOAT", "DECIMAL(10,2)", "INT", "DATE", "BIGINT", "DECIMAL(10,2)")
    new = schema("BIGINT", "INT", "DOUBLE", "DECIMAL(12,3)", "VARCHAR(5)", "DATETIME", "BIGINT UNSIGNED",
                 "DECIMAL(11,4)")  # fmt: skip
    widen, refuse = mt.type_changes(old, new)  # type: ignore[arg-type]
    assert widen == ["c0: int → bigint", "c1: tinyint → int", "c2: float → double", "c3: decimal(10,2) → decimal(12,3)",
                     "c5: date → timestamp_ntz", "c6: bigint → decimal(20,0)"]  # fmt: skip
    # a string is not wider than an int; decimal(11,4) has fewer digits before the point than (10,2)
    assert refuse == ["c4: int → string", "c7: decimal(10,2) → decimal(11,4)"]
    assert mt.type_changes(old, old) == ([], [])  # type: ignore[arg-type]
