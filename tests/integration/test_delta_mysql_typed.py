"""MySQL event values (the capture's JSON, docs/mysql.md "Values") converted to typed Delta
columns by Spark, compared with values written out by hand; and typed rows written back as row
images (`row_image_sql`) that convert to the same values again."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import struct
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.layouts.mysql_types import row_image_sql, typed_rows
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


def _decimal(precision: int, scale: int) -> Callable[[random.Random], str]:
    def value(rng: random.Random) -> str:
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, precision)))
        whole, frac = digits[: max(1, len(digits) - scale)], digits[max(1, len(digits) - scale) :].ljust(scale, "0")
        return ("-" if rng.random() < 0.5 else "") + (whole.lstrip("0") or "0") + ("." + frac[:scale] if scale else "")

    return value


def _float32(rng: random.Random) -> float:
    bits = rng.getrandbits(32)
    while (bits >> 23) & 0xFF == 0xFF:  # no infinities or NaN: MySQL stores neither
        bits = rng.getrandbits(32)
    return float(repr(struct.unpack("<f", struct.pack("<I", bits))[0]))


def _double(rng: random.Random) -> float:
    bits = rng.getrandbits(64)
    while (bits >> 52) & 0x7FF == 0x7FF:
        bits = rng.getrandbits(64)
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


def _moment(rng: random.Random) -> dt.datetime:
    start, end = dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    return start + dt.timedelta(microseconds=rng.randrange(int((end - start).total_seconds() * 10**6)))


def _time(rng: random.Random) -> str:
    sign, hours, minutes, seconds = rng.choice(["", "-"]), rng.randint(0, 838), rng.randint(0, 59), rng.randint(0, 59)
    return f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}.{rng.randint(0, 999999):06d}"


def _text(rng: random.Random) -> str:
    return "".join(rng.choice(["a", "é", "😀", '"', "\\", "\n", " ", "0", "{"]) for _ in range(rng.randint(0, 12)))


# Every family of MySQL column type, and values as the capture writes them (docs/mysql.md, "Values").
VALUE_OF: dict[str, Callable[[random.Random], Any]] = {
    "TINYINT": lambda r: r.randint(-128, 127), "SMALLINT UNSIGNED": lambda r: r.randint(0, 65535),
    "MEDIUMINT": lambda r: r.randint(-8388608, 8388607), "INT UNSIGNED": lambda r: r.randint(0, 2**32 - 1),
    "BIGINT": lambda r: r.randint(-(2**63), 2**63 - 1), "BIGINT UNSIGNED": lambda r: r.randint(0, 2**64 - 1),
    "DECIMAL(38,10)": _decimal(38, 10), "DECIMAL(5,2)": _decimal(5, 2), "DECIMAL(10,0)": _decimal(10, 0),
    "DECIMAL(65,30)": _decimal(65, 30), "FLOAT": _float32, "DOUBLE": _double,
    "YEAR": lambda r: r.choice([0, 1901, 2155]),
    "BIT(1)": lambda r: r.randint(0, 1), "BIT(64)": lambda r: r.randint(0, 2**64 - 1),
    "DATE": lambda r: _moment(r).date().isoformat(),
    "DATETIME(6)": lambda r: _moment(r).isoformat(sep=" ", timespec="microseconds"),
    "DATETIME(0)": lambda r: _moment(r).isoformat(sep=" ", timespec="seconds"),
    "TIMESTAMP(6)": lambda r: _moment(r).isoformat(timespec="microseconds") + "Z",
    "TIME(6)": _time,
    "VARCHAR(20)": _text, "ENUM": lambda r: r.choice(["red", "green", ""]),
    "SET": lambda r: r.choice(["", "a", "a,c", "a,b,c"]), "JSON": lambda r: json.dumps({"k": _text(r)}),
    "VARBINARY(8)": lambda r: base64.b64encode(r.randbytes(r.randint(0, 8))).decode(),
    "BLOB": lambda r: base64.b64encode(r.randbytes(r.randint(0, 40))).decode(),
}  # fmt: skip


def test_typed_rows_written_back_as_row_images_read_as_the_same_values(spark: SparkSession) -> None:
    """row_image_sql's images, read by the same conversion as the capture's events, give every typed value back,
    in a session of another time zone too (decision 0027: the history would keep state rows replaced by a fold
    as such images)."""
    names = {sql_type: f"c{i}" for i, sql_type in enumerate(VALUE_OF)}
    columns = [MySqlColumn("id", "BIGINT UNSIGNED", False, 0),
               *(MySqlColumn(name, sql_type, True, None) for sql_type, name in names.items())]  # fmt: skip
    rng = random.Random(27)
    events = []
    for i in range(400):
        after = {name: None if rng.random() < 0.1 else VALUE_OF[t](rng) for t, name in names.items()}
        events.append((json.dumps({"id": i}), json.dumps({"id": i, **after}), "c", [1, i, 0], 1000 + i))
    schema = "key string, after string, op string, pos array<bigint>, source_ts_ms bigint"
    typed = typed_rows(spark.createDataFrame(events, schema), columns).drop("_event_columns")
    first = typed.collect()
    assert [r["_misfits"] for r in first] == [[]] * len(events)
    assert sum(r[n] is not None for r in first for n in names.values()) > len(events) * len(names) * 0.8
    image = f"{row_image_sql(columns)} AS after"
    images = typed.selectExpr("to_json(named_struct('id', id)) AS key", image, "'u' AS op", "_cdcflow_pos AS pos",
                              "_cdcflow_source_ts_ms AS source_ts_ms").collect()  # fmt: skip
    zone = "spark.sql.session.timeZone"
    spark.conf.set(zone, "Asia/Kolkata")  # the images were written in UTC
    try:
        again = typed_rows(spark.createDataFrame(images, schema), columns)
        both = typed.alias("a").join(again.alias("b"), "id")
        compared = [c.name for c in columns if c.name != "id"]
        differing = F.array_compact(F.array(*(F.when(~F.col(f"a.{n}").eqNullSafe(F.col(f"b.{n}")), F.lit(n))
                                              for n in compared)))  # fmt: skip
        found = both.select("id", differing.alias("differing")).where("size(differing) > 0").collect()
        joined = both.count()
    finally:
        spark.conf.set(zone, "UTC")
    assert joined == len(events)
    assert not found, [(r["id"], r["differing"]) for r in found[:5]]
