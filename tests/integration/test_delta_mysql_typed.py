"""MySQL event values (the capture's JSON, docs/mysql.md "Values") converted to typed Delta
columns by Spark, compared with values written out by hand."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession

from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.layouts.mysql_types import typed_rows
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

COLUMNS = [
    ("id", "BIGINT UNSIGNED"), ("i8", "TINYINT"), ("u32", "INT UNSIGNED"), ("dec", "DECIMAL(38,10)"),
    ("f", "FLOAT"), ("d", "DOUBLE"), ("y", "YEAR"), ("bits", "BIT(64)"), ("day", "DATE"), ("at", "DATETIME(6)"),
    ("ts", "TIMESTAMP(6)"), ("t", "TIME(6)"), ("s", "VARCHAR(10)"), ("b", "VARBINARY(8)"),
]  # fmt: skip
AFTER: dict[str, Any] = {
    "id": 18446744073709551615, "i8": -128, "u32": 4294967295, "dec": "-1234567890123456789012345678.0123456789",
    "f": 3.14159, "d": -2.5e-300, "y": 0, "bits": 18446744073709551615, "day": "0000-00-00",
    "at": "1582-10-04 23:59:59.999999", "ts": "2038-01-19T03:14:07.999999Z", "t": "-838:59:59.000000",
    "s": "héllo", "b": "AP8=",
}  # fmt: skip
EXPECTED = {
    "id": Decimal("18446744073709551615"), "i8": -128, "u32": 4294967295,
    "dec": Decimal("-1234567890123456789012345678.0123456789"), "f": pytest.approx(3.14159, rel=1e-7),
    "d": -2.5e-300, "y": 0, "bits": Decimal("18446744073709551615"), "day": None,  # zero date: null, by design
    "at": dt.datetime(1582, 10, 4, 23, 59, 59, 999999),  # the day before the Julian switch, kept as it is
    "ts": dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC), "t": "-838:59:59.000000", "s": "héllo",
    "b": b"\x00\xff",
}  # fmt: skip


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-delta-mysql")


def test_every_value_converts_exactly_and_deletes_keep_only_their_key(spark: SparkSession) -> None:
    columns = [MySqlColumn(n, t, n != "id", 0 if n == "id" else None) for n, t in COLUMNS]
    key = json.dumps({"id": AFTER["id"]})
    events = spark.createDataFrame(
        [(key, json.dumps(AFTER), "c", [1, 2, 0], 7), ('{"id": 5}', None, "d", [1, 3, 0], 8)],
        "key string, after string, op string, pos array<bigint>, source_ts_ms bigint",
    )
    rows = {r["id"]: r.asDict() for r in typed_rows(events, columns).collect()}
    upsert = rows[Decimal(AFTER["id"])]
    assert upsert["_misfits"] == []
    got = {n: upsert[n] for n, _ in COLUMNS}
    if got["ts"] is not None:  # PySpark hands instants back in the session's zone (UTC here)
        got["ts"] = got["ts"].replace(tzinfo=dt.UTC)
    assert got == EXPECTED
    meta = (upsert["_cdcflow_deleted"], upsert["_cdcflow_pos"], upsert["_cdcflow_source_ts_ms"])
    assert meta == (False, [1, 2, 0], 7)
    tombstone = rows[Decimal(5)]
    assert tombstone["_cdcflow_deleted"] and all(tombstone[n] is None for n, _ in COLUMNS[1:])


def test_a_value_that_does_not_fit_its_type_is_reported_not_written_as_null(spark: SparkSession) -> None:
    columns = [MySqlColumn("id", "INT", False, 0), MySqlColumn("n", "TINYINT", True, None),
               MySqlColumn("day", "DATE", True, None)]  # fmt: skip
    events = spark.createDataFrame(
        [('{"id": 1}', json.dumps({"id": 1, "n": 300, "day": "2024-02-30", "new": 1}), "c", [1, 1, 0], 1)],
        "key string, after string, op string, pos array<bigint>, source_ts_ms bigint",
    )
    row = typed_rows(events, columns).first()
    assert row is not None
    assert row["_misfits"] == ["n", "day"] and sorted(row["_event_columns"]) == ["day", "id", "n", "new"]
