"""Edge values from a real MariaDB through the capture and the pipeline
into Phoenix, Delta and Parquet, compared with literal expectations (not with a second pass
through the same rendering), and `verify mysql-phoenix` on them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from cdcflow.clients import kafka as k
from cdcflow.clients.mysql import execute
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.dev.testing import ServiceHarness, unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, source_config
from cdcflow.pipeline.runner import Pipeline
from cdcflow.verify.phoenix import verify_mysql_phoenix

DEC_MAX = "99999999999999999999999999999999999.999999999999999999999999999999"  # DECIMAL(65,30)
DEC_MIN = "-" + DEC_MAX
# id: (DATE, DATETIME(6), DECIMAL(65,30)), and what each must be everywhere
ROWS = {
    1: ("0001-01-01", "0001-01-01 00:00:00.000001", DEC_MIN),
    2: ("1096-07-06", "1096-07-06 12:34:56.789012", "0.000000000000000000000000000001"),
    3: ("1582-10-10", "1582-10-10 23:59:59.999999", "12345678901234567890123456789.123456789012345678901234567890"),
    4: ("9999-12-31", "9999-12-31 23:59:59.999999", DEC_MAX),
    5: ("1969-12-31", "1969-12-31 23:59:59.999001", "-0.500000000000000000000000000000"),
}
# What typed Delta tables hold (proleptic Gregorian, as MySQL; microseconds), spelled out by hand.
DELTA_VALUES = {
    1: (dt.date(1, 1, 1), dt.datetime(1, 1, 1, 0, 0, 0, 1), DEC_MIN),
    2: (dt.date(1096, 7, 6), dt.datetime(1096, 7, 6, 12, 34, 56, 789012), "0.000000000000000000000000000001"),
    3: (
        dt.date(1582, 10, 10),
        dt.datetime(1582, 10, 10, 23, 59, 59, 999999),
        "12345678901234567890123456789.123456789012345678901234567890",
    ),
    4: (dt.date(9999, 12, 31), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), DEC_MAX),
    5: (dt.date(1969, 12, 31), dt.datetime(1969, 12, 31, 23, 59, 59, 999001), "-0.500000000000000000000000000000"),
}
UNSIGNED_MAX = {"u8": 255, "u16": 65535, "u24": 16777215, "u32": 4294967295, "u64": 18446744073709551615}
# What Phoenix must store, as epoch milliseconds (proleptic Gregorian, the calendar MySQL uses) and
# the sub-millisecond microseconds; computed outside cdcflow (Python's datetime) once, written here.
PHOENIX_MILLIS = {
    1: (-62135596800000, -62135596800000, 1),
    2: (-27564624000000, -27564578703211, 12),
    3: (-12219724800000, -12219638400001, 999),
    4: (253402214400000, 253402300799999, 999),
    5: (-86400000, -1, 1),
}


def test_edge_values_reach_phoenix_delta_and_parquet_exactly(
    mariadb: dict[str, Any], kafka: dict[str, Any], services: ServiceHarness, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("e2e_edge")
    admin = admin_endpoint(mariadb)
    execute(
        admin, f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.edge (id INT PRIMARY KEY, d DATE, dt DATETIME(6), dec65 DECIMAL(65,30), "
        "u8 TINYINT UNSIGNED, u16 SMALLINT UNSIGNED, u24 MEDIUMINT UNSIGNED, u32 INT UNSIGNED, u64 BIGINT UNSIGNED)",
    )  # fmt: skip
    source = source_config(unique_name("edge"), [db])
    capture = CaptureThread(source, mariadb, bootstrap).start()
    try:
        execute(admin, *(
            f"INSERT INTO {db}.edge VALUES ({i}, '{d}', '{dt}', {dec}, 255, 65535, 16777215, 4294967295, "
            "18446744073709551615)" for i, (d, dt, dec) in ROWS.items()
        ))  # fmt: skip
        topic = f"{source.topic_prefix}.{db}.edge"
        assert len(k.consume(bootstrap, topic, expected=len(ROWS), timeout_s=60)) == len(ROWS)
    finally:
        capture.stop()

    state, parquet = tmp_path / "state", tmp_path / "parquet"
    cfg = PipelineConfig(
        topics=source.topic_prefix.replace(".", "\\.") + "\\..*", dead_letter_topic=f"{source.name}-dead",
        sinks=(
            SinkConfig(name="phoenix", type="phoenix", options={
                "url": phoenix_url, "create_tables": True, "schema_history_topic": source.schema_history_topic}),
            SinkConfig(name="state", type="delta", options={
                "path": str(state), "schema_history_topic": source.schema_history_topic}),
            SinkConfig(name="parquet", type="parquet", options={"path": str(parquet)}),
        ),
    )  # fmt: skip
    pipeline = Pipeline(cfg, {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}, tmp_path / "checkpoints")
    result = pipeline.run(available_now=True, max_failures=1)
    assert set(result.values()) == {"done"}, result

    expected_after = {i: {"id": i, "d": d, "dt": dt, "dec65": dec, **UNSIGNED_MAX} for i, (d, dt, dec) in ROWS.items()}
    spark = pipeline.spark
    assert spark is not None
    delta = spark.read.format("delta").load(str(state / source.name / db / "edge"))
    assert [(f.name, f.dataType.simpleString()) for f in delta.schema.fields][:9] == [
        ("id", "int"), ("d", "date"), ("dt", "timestamp_ntz"), ("dec65", "string"), ("u8", "smallint"),
        ("u16", "int"), ("u24", "int"), ("u32", "bigint"), ("u64", "decimal(20,0)")]  # fmt: skip
    typed = {r["id"]: (r["d"], r["dt"], r["dec65"], r["u8"], r["u16"], r["u24"], r["u32"], r["u64"])
             for r in delta.collect()}  # fmt: skip
    assert typed == {i: (*DELTA_VALUES[i], *UNSIGNED_MAX.values()) for i in ROWS}
    parquet_rows = spark.read.parquet(str(parquet)).select("after").collect()
    assert {json.loads(r["after"])["id"]: json.loads(r["after"]) for r in parquet_rows} == expected_after

    stored = phoenix_jvm.query(
        f'SELECT ID, TO_NUMBER(D), TO_NUMBER(DT), DT, DEC65, U8, U16, U24, U32, U64 FROM "{db.upper()}"."EDGE"'
    )
    got = {int(r[0]): (int(r[1]), int(r[2]), int(str(r[3]).partition(".")[2].ljust(6, "0")[3:6])) for r in stored}
    assert got == PHOENIX_MILLIS
    assert {int(r[0]): r[4] for r in stored} == {i: dec for i, (_, _, dec) in ROWS.items()}
    assert all([int(v) for v in r[5:]] == list(UNSIGNED_MAX.values()) for r in stored)
    report = verify_mysql_phoenix(admin, db, "edge", phoenix_jvm, source=source.name)
    assert report.clean and report.rows_compared == len(ROWS), report.summary() + str(report.examples)
