"""The Delta state sink's SQL merge equals the Python row-state merge, on real Spark.

`cdcflow.events.row_state.merge` is the reference (its properties are tested in
tests/unit/test_row_state.py); the sink runs `state_sql.merged_state_sql` inside its MERGE. Both
run here on thousands of random stored states and batches, evaluated in one Spark query.
"""

from __future__ import annotations

import math
import random
import re
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StructField, StructType

from cdcflow.events.cells import CellType, column_name
from cdcflow.events.json_codec import CELL_TYPE_NAMES, CELL_TYPES, render_value
from cdcflow.events.row_state import RowState, StateCell, merge
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.hbase_state import STATE_CELL
from cdcflow.pipeline.sinks.delta.state_sql import (
    column_name_sql,
    decode_value_sql,
    merged_state_sql,
    visible_cells_sql,
)


def decode_typed(value: bytes, encoding: str) -> Any:
    """The reference for `decode_value_sql`: the value in the column's Spark type, None when the
    bytes do not fit the encoding (as `render_value` decides)."""
    if encoding == "base64":
        return value
    if encoding == "utf8":
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    decoded = render_value(value, encoding)
    return None if isinstance(decoded, str) else decoded  # render_value's base64 fallback


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-state-sql")


def random_cells(rng: random.Random, count: int, first_pos: int) -> list[StateCell]:
    families, qualifiers = [b"cf", b"cg"], [b"a", b"b", b"\xff", b"\\xff", b""]
    types = [CellType.PUT] * 6 + [CellType.DELETE, CellType.DELETE_COLUMN, CellType.DELETE_FAMILY,
                                  CellType.DELETE_FAMILY_VERSION]  # fmt: skip
    out = []
    for i in range(count):
        t = rng.choice(types)
        family_level = t in (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION)
        qualifier = b"" if family_level else rng.choice(qualifiers[:4])
        value = rng.choice([b"v1", b"v2", b"", b"\x00\x01"]) if t is CellType.PUT else b""
        # positions repeat now and then (a replayed event), timestamps collide often
        pos = (rng.choice([first_pos + i, first_pos]), rng.randrange(3))
        out.append(StateCell(rng.choice(families), qualifier, rng.randint(1, 6), t, value, pos))
    return out


def cell_row(c: StateCell) -> tuple[Any, ...]:
    return (c.family, c.qualifier, c.ts, CELL_TYPE_NAMES[c.type], c.value, list(c.pos))


def cells_of(rows: list[Any] | None) -> list[StateCell]:
    return [StateCell(bytes(r["family"]), bytes(r["qualifier"]), r["ts"], CELL_TYPES[r["type"]], bytes(r["value"]),
                      tuple(r["pos"])) for r in rows or ()]  # fmt: skip


@pytest.mark.parametrize("retained", [1, 3])
def test_sql_merge_equals_the_python_merge_on_random_batches(spark: SparkSession, retained: int) -> None:
    rng = random.Random(retained)
    cases, expected = [], []
    for case in range(3000):
        stored = merge(RowState(), random_cells(rng, rng.randrange(0, 12), 0), retained) if case % 5 else RowState()
        new = random_cells(rng, rng.randrange(1, 12), 100)
        absent = case % 5 == 0
        puts = None if absent else [cell_row(c) for c in stored.puts]
        tombstones = None if absent else [cell_row(c) for c in stored.tombstones]
        cases.append((case, puts, tombstones, [cell_row(c) for c in new]))
        expected.append(merge(stored, new, retained))
    cell_array = ArrayType(STATE_CELL)
    schema = StructType([StructField("case", IntegerType()), StructField("puts", cell_array),
                         StructField("tombstones", cell_array), StructField("new", cell_array)])  # fmt: skip
    df = spark.createDataFrame(cases, schema)
    merged = df.select("case", F.expr(merged_state_sql("puts", "tombstones", "new", retained)).alias("m"))
    merged = merged.select("case", "m", F.expr(visible_cells_sql("m.puts")).alias("cells"))
    got = {r["case"]: r for r in merged.collect()}
    mismatches = []
    for case, want in enumerate(expected):
        row = got[case]
        puts, tombstones = cells_of(row["m"]["puts"]), cells_of(row["m"]["tombstones"])
        if (puts, tombstones) != (want.puts, want.tombstones):
            mismatches.append((case, cases[case], want, puts, tombstones))
        cells = {k: (bytes(v["value"]), v["ts"], tuple(v["pos"])) for k, v in row["cells"].items()}
        want_cells = {column_name(f, q): (c.value, c.ts, c.pos) for (f, q), c in want.newest().items()}
        assert cells == want_cells, case
    assert not mismatches, f"{len(mismatches)} of 3000 differ; first: {mismatches[0]}"


def test_column_names_and_typed_values_equal_the_python_decoding(spark: SparkSession) -> None:
    rng = random.Random(5)
    values = [b"", b"\x00", b"\x01", b"\xff", b"a\\b", b"caf\xc3\xa9", b"\xc3\x28", bytes(range(256))]
    for fmt in (">q", ">i", ">h", ">d", ">f"):
        values += [struct.pack(fmt, x) for x in (0, 1, -1)]
    values += [struct.pack(">q", x) for x in (2**63 - 1, -(2**63))] + [struct.pack(">i", -(2**31))]
    values += [struct.pack(">d", x) for x in (math.pi, -1e-310, 5e-324, 1.7976931348623157e308, math.inf, -math.inf)]
    values += [struct.pack(">f", x) for x in (3.25, -1e-40, math.inf)] + [rng.randbytes(rng.randrange(0, 10))
                                                                        for _ in range(500)]  # fmt: skip
    encodings = ["utf8", "long", "int", "short", "double", "float", "boolean", "base64"]
    schema = StructType([StructField("family", BinaryType()), StructField("qualifier", BinaryType())])
    df = spark.createDataFrame([(v, v) for v in values], schema)
    got = df.select(
        F.expr(column_name_sql("struct(family, qualifier)")).alias("name"),
        *[F.expr(decode_value_sql("family", e)).alias(e) for e in encodings],
    ).collect()
    for value, row in zip(values, got, strict=True):
        assert row["name"] == column_name(value, value), value
        for e in encodings:
            want, have = decode_typed(value, e), row[e]
            if isinstance(want, float) and math.isnan(want):
                assert have is not None and math.isnan(have), (value, e)
            elif e == "base64":
                assert bytes(have) == want, (value, e)
            else:
                assert have == want, (value, e, have, want)


def test_state_rows_of_a_key_range_follow_hbase_order(spark: SparkSession, tmp_path: Any) -> None:
    """`verify hbase-delta --sample` reads the state table by key range: Spark must compare binary keys
    unsigned, byte by byte, as HBase orders them (0x80 after 0x7f, a prefix before its extensions)."""
    from pyspark.sql.types import BooleanType

    from cdcflow.pipeline.sinks.delta.views import hbase_state_rows

    keys = [b"", b"\x00", b"a", b"ab", b"\x7f", b"\x80", b"\xff", b"\xff\x01"]
    schema = StructType([StructField("row_key", BinaryType()), StructField("exists", BooleanType()),
                         StructField("puts", ArrayType(STATE_CELL))])  # fmt: skip
    rows = [(bytearray(k), True, [(bytearray(b"cf"), bytearray(b"q"), 1, "Put", bytearray(k + b"!"), [1, i])])
            for i, k in enumerate(keys) if k]  # fmt: skip
    path = str(tmp_path / "state")
    spark.createDataFrame(rows, schema).write.format("delta").save(path)

    def read(start: bytes, stop: bytes) -> list[bytes]:
        return [row for row, _cells in hbase_state_rows(spark, path, 1, start, stop)]

    assert read(b"", b"") == sorted(k for k in keys if k)
    assert read(b"\x7f", b"\xff") == [b"\x7f", b"\x80"]
    assert read(b"a", b"a\x00") == [b"a"]  # one row: the check's second look at a differing row
    assert read(b"\x80", b"") == [b"\x80", b"\xff", b"\xff\x01"]
    assert list(hbase_state_rows(spark, path, 1, b"\xff\x01", b"\xff\x01\x00")) == [
        (b"\xff\x01", frozenset({(b"cf", b"q", 1, b"\xff\x01!")}))
    ]


def test_a_table_whose_creation_was_killed_is_created_on_the_next_try(spark: SparkSession, tmp_path: Any) -> None:
    """A driver killed between creating `_delta_log` and its first commit (seen in the chain test's CI run):
    the next batch must create the table, not fail with DELTA_TABLE_NOT_FOUND on every retry."""
    from cdcflow.pipeline.sinks.delta.tables import ensure_table

    path = tmp_path / "changelog"
    (path / "_delta_log" / "_staged_commits").mkdir(parents=True)  # what the kill left
    schema = StructType([StructField("k", IntegerType())])
    table = ensure_table(spark, str(path), schema)
    table.toDF().sparkSession.createDataFrame([(1,)], schema).write.format("delta").mode("append").save(str(path))
    assert [r["k"] for r in spark.read.format("delta").load(str(path)).collect()] == [1]
    # a real table is never touched
    assert ensure_table(spark, str(path), schema).toDF().count() == 1


def test_rows_appended_where_no_table_is_yet_create_it_in_one_commit_in_the_schemas_types(
    spark: SparkSession, tmp_path: Any
) -> None:
    """`append_creating`: the first rows make the table (one commit, not an empty table's and then theirs), in the
    schema's types whatever the rows' (an INT position is stored as BIGINT, as later appends write it); later rows
    append; a log a killed creation left without a commit is replaced."""
    from cdcflow.pipeline.sinks.delta.layouts.mysql import DELETED_KEYS
    from cdcflow.pipeline.sinks.delta.tables import append_creating

    def rows(key: str, pos: int) -> Any:
        return spark.createDataFrame([(key, [pos, 1], 7)], "key string, pos array<int>, source_ts_ms int")

    for name, killed in (("fresh", False), ("killed", True)):
        path = tmp_path / name
        if killed:
            (path / "_delta_log" / "_staged_commits").mkdir(parents=True)
        append_creating(spark, str(path), rows("a", 5), DELETED_KEYS)
        history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        assert [(r["version"], r["operation"]) for r in history] == [(0, "WRITE")], name
        table = spark.read.format("delta").load(str(path))
        assert [(f.name, f.dataType) for f in table.schema] == [(f.name, f.dataType) for f in DELETED_KEYS]
        append_creating(spark, str(path), rows("b", 6), DELETED_KEYS)
        got = sorted((r["key"], list(r["pos"]), r["source_ts_ms"]) for r in table.collect())
        assert got == [("a", [5, 1], 7), ("b", [6, 1], 7)], name


def test_a_tables_size_is_known_with_and_without_delta_checksums(spark: SparkSession, tmp_path: Any) -> None:
    """The fold thread sizes its tables (deletion vectors past `deletion_vectors_from_bytes`) from the checksum Delta
    writes with each commit; a session that writes none (`writeChecksumFile.enabled` false) still gets the size."""
    from cdcflow.pipeline.sinks.delta.tables import table_size, turn_on_deletion_vectors

    checksums = "spark.databricks.delta.writeChecksumFile.enabled"
    sizes = {}
    for written in (True, False):
        path = str(tmp_path / f"checksums_{written}")
        assert table_size(spark, path) is None  # no table yet
        spark.conf.set(checksums, str(written).lower())
        try:
            spark.range(1000).selectExpr("id", "repeat('x', 50) AS v").write.format("delta").save(path)
            if not written:
                turn_on_deletion_vectors(spark, path)
        finally:
            spark.conf.unset(checksums)
        log = tmp_path / f"checksums_{written}" / "_delta_log"
        assert any(re.fullmatch(r"\d{20}\.crc", f.name) for f in log.iterdir()) == written  # (not Hadoop's .x.crc)
        # as a restarted sink finds it: the snapshot read from the table's log, not the one its own commit left
        spark.sparkContext._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # type: ignore[union-attr]
        size = table_size(spark, path)
        assert size is not None, f"no size for a table written with checksums {written}"
        files = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["sizeInBytes"]  # type: ignore[index]
        assert size.bytes == files > 1000 and size.deletion_vectors == (not written)
        sizes[written] = size.bytes
    assert sizes[True] == sizes[False]
