"""MySQL → Phoenix mapping, DDL, compatibility and verify's value rendering (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn
from cdcflow.pipeline.sinks.phoenix import guarded
from cdcflow.pipeline.sinks.phoenix import schema as ps
from cdcflow.verify.phoenix import phoenix_representable, render_phoenix_value


@pytest.mark.parametrize(
    ("mysql", "phoenix"),
    [
        ("TINYINT", "TINYINT"), ("TINYINT UNSIGNED", "SMALLINT"), ("SMALLINT UNSIGNED", "INTEGER"),
        ("MEDIUMINT", "INTEGER"), ("MEDIUMINT UNSIGNED", "INTEGER"), ("INT", "INTEGER"), ("INT UNSIGNED", "BIGINT"),
        ("BIGINT", "BIGINT"), ("BIGINT UNSIGNED", "DECIMAL(20,0)"), ("DECIMAL(10,2)", "DECIMAL(10,2)"),
        ("DECIMAL(38,0) UNSIGNED", "DECIMAL(38,0)"), ("DECIMAL(65,30)", "VARCHAR"), ("FLOAT", "FLOAT"),
        ("DOUBLE", "DOUBLE"), ("YEAR", "SMALLINT"), ("BIT(1)", "BIGINT"), ("BIT(63)", "BIGINT"),
        ("BIT(64)", "DECIMAL(20,0)"), ("DATE", "DATE"), ("DATETIME(6)", "TIMESTAMP"), ("TIMESTAMP(0)", "TIMESTAMP"),
        ("TIME(2)", "VARCHAR"), ("CHAR", "VARCHAR"), ("TEXT", "VARCHAR"), ("ENUM", "VARCHAR"), ("SET", "VARCHAR"),
        ("BINARY(6)", "BINARY(6)"), ("VARBINARY", "VARBINARY"), ("BLOB", "VARBINARY"), ("GEOMETRY", "VARBINARY"),
    ],
)  # fmt: skip
def test_every_mysql_type_maps_to_a_phoenix_type_that_holds_it(mysql: str, phoenix: str) -> None:
    assert ps.phoenix_type(mysql) == phoenix


def test_unmappable_types_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="precision and scale"):
        ps.phoenix_type("DECIMAL")
    with pytest.raises(ConfigError, match="no Phoenix mapping"):
        ps.phoenix_type("JSON(binary)".replace("(binary)", "X"))


def test_holds_accepts_only_lossless_targets() -> None:
    assert ps.holds("BIGINT", "INTEGER") and ps.holds("DECIMAL(20,0)", "BIGINT")
    assert not ps.holds("INTEGER", "BIGINT") and not ps.holds("DECIMAL(18,0)", "BIGINT")
    assert ps.holds("DECIMAL(14,4)", "DECIMAL(12,2)") and not ps.holds("DECIMAL(12,4)", "DECIMAL(12,2)")
    assert not ps.holds("DOUBLE", "DECIMAL(30,10)") and not ps.holds("VARCHAR(10)", "VARCHAR")
    assert ps.holds("VARBINARY", "BINARY(6)") and not ps.holds("DATE", "TIMESTAMP")


def cols(*spec: tuple[str, str, int | None]) -> list[MySqlColumn]:
    return [MySqlColumn(n, t, True, k) for n, t, k in spec]


def test_create_table_declares_key_columns_first_in_mysql_key_order_and_quotes_names() -> None:
    table = ps.expected_table(
        "SHOP", "ORDER", cols(("id", "INT", 1), ("select", "TEXT", None), ("Region", "CHAR", 0)), "upper"
    )
    assert table.primary_key == ("REGION", "ID")
    assert ps.create_table_sql(table) == (
        'CREATE TABLE IF NOT EXISTS "SHOP"."ORDER" ("REGION" VARCHAR NOT NULL, "ID" INTEGER NOT NULL, '
        '"SELECT" VARCHAR, CONSTRAINT PK PRIMARY KEY ("REGION", "ID"))'
    )
    preserved = ps.expected_table("shop", "Order", cols(("Id", "INT", 0)), "preserve")
    assert preserved.qualified == '"shop"."Order"' and preserved.primary_key == ("Id",)


def test_a_table_without_primary_key_cannot_be_created() -> None:
    with pytest.raises(ConfigError, match="no primary key"):
        ps.expected_table("S", "T", cols(("a", "INT", None)), "upper")


def test_quote_refuses_what_cannot_be_quoted() -> None:
    with pytest.raises(ConfigError):
        ps.quote('a"b')
    with pytest.raises(ConfigError):
        ps.map_name("x", "lower")


def test_table_map_and_internal_table_names() -> None:
    assert ps.target_name("shop", "orders", {"shop.orders": "SALES.ORDERS_V2"}, "upper") == ("SALES", "ORDERS_V2")
    assert ps.target_name("shop", "orders", {"shop.orders": "ORDERS"}, "upper") == ("", "ORDERS")
    assert ps.target_name("shop", "orders", {}, "preserve") == ("shop", "orders")
    target = ps.PhoenixTable("my-db", "t", (ps.PhoenixColumn("ID", "INTEGER"),), ("ID",))
    other = ps.PhoenixTable("my_db", "t", (ps.PhoenixColumn("ID", "INTEGER"),), ("ID",))
    # the positions table of the design before decision 0016, looked for to refuse its tables
    legacy, legacy_other = (ps.legacy_position_table_name(t.schema, t.name) for t in (target, other))
    assert legacy != legacy_other  # '-' → '_' must not collide
    assert all(c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_" for c in legacy)
    assert ps.legacy_position_table_name("SHOP", "ITEMS") == "SHOP__ITEMS__POS"


def test_compatibility_problems_name_each_problem() -> None:
    expected = ps.expected_table("S", "T", cols(("id", "INT", 0), ("amount", "DECIMAL(30,10)", None),
                                                ("_cdcflow_pos", "INT", None)), "upper")  # fmt: skip
    actual = ps.PhoenixTable(
        "S", "T",
        (ps.PhoenixColumn("ID", "BIGINT", False), ps.PhoenixColumn("AMOUNT", "DOUBLE"),
         ps.PhoenixColumn("EXTRA", "VARCHAR", False), ps.PhoenixColumn("_CDCFLOW_POS", "INTEGER")),
        ("ID",),
    )  # fmt: skip
    problems = ps.compatibility_problems(expected, actual)
    assert problems == [
        "column AMOUNT is DOUBLE; it needs DECIMAL(30,10) to hold the MySQL values exactly",
        "column _CDCFLOW_POS clashes with a cdcflow column name",
        "column EXTRA is NOT NULL but has no MySQL column to fill it",
    ]
    wrong_key = ps.PhoenixTable("S", "T", (ps.PhoenixColumn("ID", "INTEGER"), ps.PhoenixColumn("AMOUNT", "VARCHAR")),
                                ("AMOUNT",))  # fmt: skip
    assert any("primary key is (AMOUNT)" in p for p in ps.compatibility_problems(expected, wrong_key))


def test_table_from_catalog_rows() -> None:
    rows = [
        [None, None, None, None, None, None, None],  # the table's header row
        ["AMOUNT", 3, 12, 4, 1, None, 3],
        ["ID", -5, None, None, 0, 2, 2],
        ["REGION", 12, None, None, 0, 1, 1],
        ["CODE", -2, 6, None, 1, None, 4],
    ]
    table = ps.table_from_catalog("S", "T", rows)
    assert table is not None
    assert [(c.name, c.type) for c in table.columns] == [
        ("REGION", "VARCHAR"), ("ID", "BIGINT"), ("AMOUNT", "DECIMAL(12,4)"), ("CODE", "BINARY(6)"),
    ]  # fmt: skip
    assert table.primary_key == ("REGION", "ID")
    assert ps.table_from_catalog("S", "T", [[None] * 7]) is None


@given(st.lists(st.integers(0, 2**63 - 1), min_size=3, max_size=3), st.lists(st.integers(0, 2**63 - 1), min_size=3,
                                                                                max_size=3))  # fmt: skip
def test_sortable_position_sorts_like_the_position(a: list[int], b: list[int]) -> None:
    assert (ps.sortable_position(a) < ps.sortable_position(b)) == (a < b)


def test_verify_renders_phoenix_values_like_change_events() -> None:
    assert render_phoenix_value("decimal", "decimal(12,4)", 0, "12345678.01") == "12345678.0100"
    assert render_phoenix_value("bigint", "bigint(20) unsigned", 0, "18446744073709551615") == 18446744073709551615
    assert render_phoenix_value("float", "float", 0, "1.1") == 1.1
    assert (
        render_phoenix_value("datetime", "datetime(6)", 6, (1709251199123, "2024-02-29 23:59:59.1234"))
        == "2024-02-29 23:59:59.123400"
    )
    assert (
        render_phoenix_value("datetime", "datetime", 0, (1709251199000, "2024-02-29 23:59:59.0"))
        == "2024-02-29 23:59:59"
    )
    assert (
        render_phoenix_value("timestamp", "timestamp(3)", 3, (1704164645678, "2024-01-02 03:04:05.678"))
        == "2024-01-02T03:04:05.678Z"
    )
    assert render_phoenix_value("time", "time(2)", 2, "-838:59:59.00") == "-838:59:59.00"
    assert render_phoenix_value("varchar", "varchar(3)", 0, None) is None
    assert (
        phoenix_representable("date", "0000-00-00") is None
        and phoenix_representable("datetime", "2024-00-01 x") is None
    )
    assert phoenix_representable("varchar", "") is None and phoenix_representable("date", "2024-01-01") == "2024-01-01"


def test_verify_renders_dates_from_epoch_milliseconds_in_the_proleptic_calendar() -> None:
    """The rendering must not go through Java's calendar (Julian before 1582-10-15),
    or a date stored 6 days late reads back as right. Milliseconds are what Phoenix stores."""
    assert render_phoenix_value("date", "date", 0, (-27564624000000, "1096-06-30")) == "1096-07-06"
    assert render_phoenix_value("date", "date", 0, (-12219724800000, "1582-09-30")) == "1582-10-10"
    assert render_phoenix_value("date", "date", 0, (-62135596800000, "0000-12-30")) == "0001-01-01"
    assert render_phoenix_value("date", "date", 0, (253402214400000, "9999-12-31")) == "9999-12-31"
    # a Julian-calendar store of 1096-07-06 (the old defect) reads back as the day it really is
    assert render_phoenix_value("date", "date", 0, (-27564105600000, "1096-07-06")) == "1096-07-12"
    # before 1970 with sub-millisecond digits: floor milliseconds + the fraction's microseconds
    assert (
        render_phoenix_value("datetime", "datetime(6)", 6, (-1, "1969-12-31 23:59:59.999001"))
        == "1969-12-31 23:59:59.999001"
    )
    assert (
        render_phoenix_value("datetime", "datetime(6)", 6, (-62135596800000, "0000-12-30 00:00:00.000001"))
        == "0001-01-01 00:00:00.000001"
    )


def test_verify_renders_decimal_65_30() -> None:
    """More than 28 digits crashed quantize (decimal.InvalidOperation)."""
    value = "12345678901234567890123456789012345.123456789012345678901234567890"
    assert render_phoenix_value("decimal", "decimal(65,30)", 0, value) == value
    assert render_phoenix_value("decimal", "decimal(65,30)", 0, "-1.5") == "-1.500000000000000000000000000000"


def test_the_guarded_upsert_binds_each_value_where_its_clause_needs_it() -> None:
    view = ps.PhoenixTable("S", "T", (ps.PhoenixColumn("K", "INTEGER"), ps.PhoenixColumn("D", "DATE"),
                                      ps.PhoenixColumn("V", "VARCHAR")), ("K",))  # fmt: skip
    table = guarded.physical_table(view)
    assert table.name == "T__CDCFLOW" and guarded.is_guarded(table) and not guarded.is_guarded(view)
    assert guarded.data_columns(table) == view.columns
    sql, params = guarded.upsert_sql(table)
    newer = '("_CDCFLOW_POS" IS NULL OR "_CDCFLOW_POS" < ?)'  # a row put there before cdcflow is older
    assert sql == (
        'UPSERT INTO "S"."T__CDCFLOW" ("K", "D", "V", "_CDCFLOW_POS", "_CDCFLOW_DELETED") VALUES (?, ?, ?, ?, ?) '
        f'ON DUPLICATE KEY UPDATE "D" = CASE WHEN {newer} THEN ? WHEN "D" IS NULL THEN NULL ELSE "D" END, '
        f'"V" = CASE WHEN {newer} THEN ? WHEN "V" IS NULL THEN NULL ELSE "V" END, '
        f'"_CDCFLOW_DELETED" = CASE WHEN {newer} THEN ? ELSE "_CDCFLOW_DELETED" END, '
        f'"_CDCFLOW_POS" = CASE WHEN {newer} THEN ? ELSE "_CDCFLOW_POS" END'
    )  # the key is never updated, the position last (the clauses before it compare the stored one)
    # row layout: K=0, D=1, V=2, position=3, deleted=4
    assert params == [0, 1, 2, 3, 4, 3, 1, 3, 2, 3, 4, 3, 3]
    assert sql.count("?") == len(params)
    assert [guarded.bind_kind(t) for t in ("DATE", "TIMESTAMP", "DECIMAL(20,0)")] == [1, 2, 0]
    assert guarded.create_view_sql(view, table) == (
        'CREATE VIEW IF NOT EXISTS "S"."T" AS SELECT * FROM "S"."T__CDCFLOW" WHERE "_CDCFLOW_DELETED" = FALSE'
    )


def test_selected_dates_before_the_year_1000_keep_four_digits() -> None:
    """The snapshot and verify render SELECTed dates; strftime's %Y gave "1-01-01" where the binlog
    decoder gives "0001-01-01" (found by the edge-values e2e test)."""
    import datetime as dt

    from cdcflow.sources.mysql.selected_values import render_selected

    assert render_selected("date", "date", 0, dt.date(1, 1, 1)) == "0001-01-01"
    assert (
        render_selected("datetime", "datetime(6)", 6, dt.datetime(999, 2, 3, 4, 5, 6, 7))
        == "0999-02-03 04:05:06.000007"
    )
    assert render_selected("timestamp", "timestamp", 0, dt.datetime(1970, 1, 1)) == "1970-01-01T00:00:00Z"


def test_binary_columns_outside_the_key_are_varbinary() -> None:
    """Phoenix 5.2 stores a NULL that an UPSERT ... ON DUPLICATE KEY inserts into BINARY(n) as n zero bytes."""
    table = ps.expected_table("S", "T", cols(("k", "BINARY(16)", 0), ("code", "BINARY(4)", None)), "upper")
    assert [(c.name, c.type) for c in table.columns] == [("K", "BINARY(16)"), ("CODE", "VARBINARY")]
    by_hand = (ps.PhoenixColumn("K", "BINARY(16)"), ps.PhoenixColumn("CODE", "BINARY(4)"))
    made_by_hand = ps.PhoenixTable("S", "T", by_hand, ("K",))
    assert ps.compatibility_problems(table, made_by_hand) == [
        "column CODE is BINARY(4); it needs VARBINARY (Phoenix 5.2 turns a NULL written by a guarded upsert into "
        "zero bytes in a BINARY column)"
    ]
