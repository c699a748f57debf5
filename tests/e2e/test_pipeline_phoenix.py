"""The phoenix sink on real Phoenix (in the test HBase), fed crafted MySQL-shaped events through Kafka.

The randomized MariaDB → Kafka → pipeline → Phoenix test is in test_mysql_phoenix.py; this one pins
the sink's rules with literal expectations: exact types, position guard against stale replays
(deletes included), primary-key changes, table creation from the schema history, clear errors.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.kafka import client as k
from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.config import PipelineConfig, SinkConfig
from cdcflow.events.json_codec import SCHEMA_ID
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.runner import Pipeline

# sinks made directly, outside a pipeline: Kafka is not read by what these tests do with them
NO_ENDPOINTS = Endpoints(bootstrap_servers="unused:9092")

COLUMNS = [
    {"name": "id", "type": "BIGINT UNSIGNED", "sql_type": "BIGINT UNSIGNED", "nullable": False, "key": True,
     "key_order": 1},
    {"name": "Region", "type": "VARCHAR", "sql_type": "VARCHAR", "nullable": False, "key": True, "key_order": 0},
    {"name": "price", "type": "DECIMAL", "sql_type": "DECIMAL(12,4)", "nullable": True, "key": False,
     "key_order": None},
    {"name": "qty", "type": "INT UNSIGNED", "sql_type": "INT UNSIGNED", "nullable": True, "key": False,
     "key_order": None},
    {"name": "ratio", "type": "FLOAT", "sql_type": "FLOAT", "nullable": True, "key": False, "key_order": None},
    {"name": "seen", "type": "DATETIME", "sql_type": "DATETIME(6)", "nullable": True, "key": False, "key_order": None},
    {"name": "stamp", "type": "TIMESTAMP", "sql_type": "TIMESTAMP(3)", "nullable": True, "key": False,
     "key_order": None},
    {"name": "born", "type": "DATE", "sql_type": "DATE", "nullable": True, "key": False, "key_order": None},
    {"name": "t", "type": "TIME", "sql_type": "TIME(2)", "nullable": True, "key": False, "key_order": None},
    {"name": "blob", "type": "BLOB", "sql_type": "BLOB", "nullable": True, "key": False, "key_order": None},
    {"name": "code", "type": "BINARY", "sql_type": "BINARY(4)", "nullable": True, "key": False, "key_order": None},
    {"name": "doc", "type": "TEXT", "sql_type": "TEXT", "nullable": True, "key": False, "key_order": None},
    {"name": "select", "type": "BIT", "sql_type": "BIT(64)", "nullable": True, "key": False, "key_order": None},
]  # fmt: skip


def event(db: str, table: str, op: str, key: dict[str, Any], pos: list[int], after: dict[str, Any] | None) -> bytes:
    return json.dumps(
        {
            "schema": SCHEMA_ID, "op": op, "key": key, "before": None, "after": after,
            "source": {"connector": "mysql", "name": "db1", "db": db, "table": table, "ts_ms": 1_700_000_000_000,
                       "snapshot": False, "pos": pos},
            "ts_ms": 1_700_000_000_000,
        }
    ).encode()  # fmt: skip


def row(id_: int, region: str, **values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {c["name"]: None for c in COLUMNS}
    return {**base, "id": id_, "Region": region, **values}


@pytest.fixture(scope="module")
def phoenix_url(services: Any) -> str:
    return str(services.endpoints("phoenix")["jdbc_url"])


def test_a_session_made_without_the_phoenix_jars_gets_them(phoenix_url: str) -> None:
    """In one process the first session wins (getOrCreate ignores spark.jars later): the pipeline
    must add its sinks' jars to it, or the sink's classes are missing (as in a full test run)."""
    from cdcflow.config.sinks import PhoenixOptions
    from cdcflow.pipeline.session import build_session
    from cdcflow.pipeline.sinks.phoenix.sink import PhoenixSink

    spark = build_session("cdcflow-test-no-phoenix")  # exists already, or is made without them
    wanted = PhoenixSink("phoenix", PhoenixOptions(url=phoenix_url), NO_ENDPOINTS).jars()
    build_session("cdcflow-test-no-phoenix", sink_jars=wanted)
    listed = str(spark.sparkContext._jsc.sc().listJars().mkString(" "))  # type: ignore[union-attr]
    assert all(Path(j).name in listed for j in wanted), listed
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()  # type: ignore[union-attr]
    assert loader.loadClass("io.cdcflow.spark.GuardedUpsert").getName().endswith("GuardedUpsert")


def run_pipeline(kafka: dict[str, Any], url: str, prefix: str, checkpoints: Path, **options: Any) -> dict[str, str]:
    cfg = PipelineConfig(
        topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=4,
        sinks=(SinkConfig(name="phoenix", type="phoenix", options={"url": url, **options}),),
    )  # fmt: skip
    context = {"bootstrap_servers": kafka["bootstrap_servers"], "zk_quorum": "unused"}
    return Pipeline(cfg, context, checkpoints).run(available_now=True, max_failures=1)


def table_topics(bootstrap: str, prefix: str, db: str, table: str) -> tuple[str, str]:
    """A schema history holding the table's columns (source db1) and the table's change topic (2 partitions)."""
    history = f"{prefix}-history"
    k.create_topic(bootstrap, history, partitions=1)
    record = {"kind": "table", "source": "db1", "db": db, "table": table, "columns": COLUMNS, "pos": [1, 4, 0]}
    k.produce_sync(bootstrap, history, [(b"db1", json.dumps(record).encode())])
    topic = f"{prefix}.{db}.{table}"
    k.create_topic(bootstrap, topic, partitions=2)
    return history, topic


def test_exact_types_position_guard_and_table_creation(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db, table = f"shop_{prefix}", "Orders"
    bootstrap = kafka["bootstrap_servers"]
    history, topic = table_topics(bootstrap, prefix, db, table)
    key = lambda i, r: {"Region": r, "id": i}  # noqa: E731
    full = row(
        18446744073709551615, "eu", price="12345678.0100", qty=4294967295, ratio=1.1, seen="2024-02-29 23:59:59.123456",
        stamp="2024-01-02T03:04:05.678Z", born="1000-01-01", t="-838:59:59.00", blob="AAEC/w==", code="YWIAAA==",
        doc='{"a": [1, "é"]}', select=18446744073709551615,
    )  # fmt: skip
    events = [
        event(db, table, "c", key(1, "eu"), [1, 100, 0], row(1, "eu", qty=1, doc="first")),
        event(db, table, "c", key(2, "eu"), [1, 110, 0], row(2, "eu", qty=5)),
        event(db, table, "u", key(1, "eu"), [1, 120, 0], row(1, "eu", qty=2)),
        event(db, table, "u", key(1, "eu"), [1, 120, 1], row(1, "eu", qty=3, seen="0000-00-00 00:00:00")),
        event(db, table, "d", key(2, "eu"), [2, 4, 0], None),
        event(db, table, "c", key(full["id"], "eu"), [2, 9, 0], full),
        # a primary-key change: delete the old key, create the new one
        event(db, table, "d", key(3, "us"), [2, 20, 0], None),
        event(db, table, "c", key(3, "apac"), [2, 20, 1], row(3, "apac", qty=9)),
    ]
    k.produce_sync(bootstrap, topic, [(json.dumps(key(0, "x")).encode(), e) for e in events])
    # Stale replays in later batches (to the other partition too): none may win.
    stale = [events[0], events[1], event(db, table, "u", key(3, "apac"), [1, 999, 0], row(3, "apac", qty=0))]
    k.produce_sync(bootstrap, topic, [(b"other", e) for e in stale])

    # Without create_tables, a missing table is a clear failure and nothing is applied.
    failed = run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp-fail")
    assert "does not exist" in failed["phoenix"] and "create_tables" in failed["phoenix"], failed

    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp", create_tables=True,
                        schema_history_topic=history)["phoenix"] == "done"  # fmt: skip
    schema_name = db.upper()
    types = phoenix_jvm.query(
        f"SELECT COLUMN_NAME, DATA_TYPE, COLUMN_SIZE, DECIMAL_DIGITS, KEY_SEQ FROM SYSTEM.CATALOG "
        f"WHERE TABLE_SCHEM = '{schema_name}' AND TABLE_NAME = 'ORDERS__CDCFLOW' AND COLUMN_NAME IS NOT NULL "
        f"ORDER BY ORDINAL_POSITION"
    )
    # what users read: the view named like the table (tombstones left out), the MySQL columns
    names = ", ".join(f'"{t[0]}"' for t in types[:-2])
    got = phoenix_jvm.query(f'SELECT {names} FROM "{schema_name}"."ORDERS" ORDER BY "REGION", "ID"')
    stored = phoenix_jvm.query(f'SELECT "REGION", "ID", "_CDCFLOW_POS", "_CDCFLOW_DELETED" FROM '
                           f'"{schema_name}"."ORDERS__CDCFLOW" ORDER BY "REGION", "ID"')  # fmt: skip
    # what Phoenix stores, read without Java's calendar (Julian before 1582: it shows 0999-12-27)
    born = phoenix_jvm.query(f'SELECT TO_NUMBER("BORN") FROM "{schema_name}"."ORDERS" WHERE "QTY" = 4294967295')
    # key columns first, in MySQL key order (Phoenix's rule), then the others in MySQL order
    assert [t[0] for t in types] == ["REGION", "ID"] + [c["name"].upper() for c in COLUMNS[2:]] + [
        "_CDCFLOW_POS", "_CDCFLOW_DELETED"]  # fmt: skip
    types = types[:-2]
    # the deletes are tombstones holding their positions: a stale create of eu/2 or us/3 cannot return
    p = lambda *parts: ".".join(f"{x:020d}" for x in parts)  # noqa: E731
    assert [tuple(r) for r in stored] == [
        ("apac", "3", p(2, 20, 1), False), ("eu", "1", p(1, 120, 1), False), ("eu", "2", p(2, 4, 0), True),
        ("eu", "18446744073709551615", p(2, 9, 0), False), ("us", "3", p(2, 20, 0), True),
    ]  # fmt: skip
    assert {t[0]: t[4] for t in types if t[4] is not None} == {"REGION": 1, "ID": 2}  # MySQL key order
    assert {t[0]: (t[1], t[2], t[3]) for t in types}["ID"] == (3, 20, 0)  # DECIMAL(20,0)
    assert {t[0]: (t[1], t[2], t[3]) for t in types}["PRICE"] == (3, 12, 4)
    as_dict = [dict(zip([t[0] for t in types], r, strict=True)) for r in got]
    by_key = {(d["REGION"], d["ID"]): d for d in as_dict}
    assert set(by_key) == {("apac", "3"), ("eu", "1"), ("eu", "18446744073709551615")}
    # the stale [1, 999, 0] update lost, and the NULLs it met stayed NULL: Phoenix 5.2 writes a kept
    # NULL back as a value of the column's type (0x00, -1.01E128, false, ...) unless told otherwise
    assert by_key[("apac", "3")] == {**{n: None for n in by_key[("apac", "3")]}, "REGION": "apac", "ID": "3", "QTY": 9}
    one = by_key[("eu", "1")]
    assert one["QTY"] == 3 and one["SEEN"] is None and one["DOC"] is None  # zero date → NULL; full row image
    big = by_key[("eu", "18446744073709551615")]
    assert big == {
        # Phoenix stores DECIMALs without trailing zeros: 12345678.0100 reads back as 12345678.01
        "REGION": "eu", "ID": "18446744073709551615", "PRICE": "12345678.01", "QTY": 4294967295, "RATIO": "1.1",
        "SEEN": "2024-02-29 23:59:59.123456", "STAMP": "2024-01-02 03:04:05.678", "BORN": "0999-12-27",
        "T": "-838:59:59.00", "BLOB": "AAEC/w==", "CODE": "YWIAAA==", "DOC": '{"a": [1, "é"]}',
        "SELECT": "18446744073709551615",
    }  # fmt: skip
    assert int(born[0][0]) == -30610224000000  # 1000-01-01T00:00Z, proleptic Gregorian: MySQL's day


def test_incompatible_table_is_refused_with_the_reason(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db, table = f"shop_{prefix}", "items"
    history = f"{prefix}-history"
    bootstrap = kafka["bootstrap_servers"]
    cols = [
        {"name": "id", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "amount", "sql_type": "DECIMAL(30,10)", "nullable": True, "key": False, "key_order": None},
    ]
    k.create_topic(bootstrap, history, partitions=1)
    k.produce_sync(bootstrap, history, [(b"db1", json.dumps({"kind": "table", "db": db, "table": table,
                                                              "columns": cols}).encode())])  # fmt: skip
    phoenix_jvm.execute(f'CREATE TABLE "{db.upper()}"."ITEMS" ("ID" INTEGER NOT NULL PRIMARY KEY, "AMOUNT" DOUBLE)')
    topic = f"{prefix}.{db}.{table}"
    k.create_topic(bootstrap, topic, partitions=1)
    ev = event(db, table, "c", {"id": 1}, [1, 5, 0], {"id": 1, "amount": "1.0000000001"})
    k.produce_sync(bootstrap, topic, [(b"1", ev)])
    result = run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp", schema_history_topic=history)
    assert "AMOUNT is DOUBLE; it needs DECIMAL(30,10)" in result["phoenix"], result


def test_tables_the_sink_cannot_guard_are_refused_with_what_to_do(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """A table of the design before decision 0016 (a plain table plus CDCFLOW's positions table) and a
    table made by hand without the guard columns: neither is written, each refusal says what to do."""
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db = f"shop_{prefix}"
    schema = db.upper()
    bootstrap = kafka["bootstrap_servers"]
    for name in ("OLD", "MINE"):
        phoenix_jvm.execute(f'CREATE TABLE "{schema}"."{name}" ("ID" INTEGER NOT NULL PRIMARY KEY, "QTY" INTEGER)')
    phoenix_jvm.execute(f'CREATE TABLE "CDCFLOW"."{schema}__OLD__POS" ("ID" INTEGER NOT NULL PRIMARY KEY, '
                    '"CDCFLOW_POS" VARCHAR, "CDCFLOW_DELETED" BOOLEAN)')  # fmt: skip
    results = {}
    for table in ("old", "mine"):
        topic = f"{prefix}{table}.{db}.{table}"  # a topic prefix per table: one pipeline run each
        k.create_topic(bootstrap, topic, partitions=1)
        k.produce_sync(bootstrap, topic, [(b"1", event(db, table, "c", {"id": 1}, [1, 5, 0], {"id": 1, "qty": 7}))])
        results[table] = run_pipeline(kafka, phoenix_url, f"{prefix}{table}", tmp_path / f"cp-{table}")["phoenix"]
    old, mine = results["old"], results["mine"]
    assert "was written by an earlier cdcflow" in old and f"CDCFLOW.{schema}__OLD__POS" in old, old
    assert "cdcflow pipeline offsets reset" in old, old
    assert "without cdcflow's guard columns" in mine and '"_CDCFLOW_POS" VARCHAR' in mine, mine
    for name in ("OLD", "MINE"):  # nothing written
        assert phoenix_jvm.query(f'SELECT COUNT(*) FROM "{schema}"."{name}"') == [[0]]


def test_a_column_added_in_mysql_shows_in_the_view(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """ADD COLUMN in MySQL: the sink adds it to the table it writes, and the view users read shows it."""
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db = f"shop_{prefix}"
    history, topic = f"{prefix}-history", f"{prefix}.{db}.items"
    bootstrap = kafka["bootstrap_servers"]
    k.create_topic(bootstrap, history, partitions=1)
    k.create_topic(bootstrap, topic, partitions=1)
    cols = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "qty", "type": "INT", "sql_type": "INT", "nullable": True, "key": False, "key_order": None},
    ]
    note = {"name": "note", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False,
            "key_order": None}  # fmt: skip

    def shape(columns: list[dict[str, Any]], pos: list[int]) -> None:
        record = {"kind": "table", "source": "db1", "db": db, "table": "items", "columns": columns, "pos": pos}
        k.produce_sync(bootstrap, history, [(b"db1", json.dumps(record).encode())])

    shape(cols, [1, 1, 0])
    k.produce_sync(bootstrap, topic, [(b"1", event(db, "items", "c", {"id": 1}, [1, 5, 0], {"id": 1, "qty": 7}))])
    options = {"create_tables": True, "schema_history_topic": history}
    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp", **options)["phoenix"] == "done"
    shape([*cols, note], [1, 6, 0])  # ALTER TABLE items ADD note VARCHAR(20)
    k.produce_sync(bootstrap, topic, [
        (b"2", event(db, "items", "c", {"id": 2}, [1, 7, 0], {"id": 2, "qty": 8, "note": "new"})),
        (b"1", event(db, "items", "d", {"id": 1}, [1, 8, 0], None)),
    ])  # fmt: skip
    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp", **options)["phoenix"] == "done"
    rows = phoenix_jvm.query(f'SELECT "ID", "QTY", "NOTE" FROM "{db.upper()}"."ITEMS"')
    assert [(int(r[0]), int(r[1]), r[2]) for r in rows] == [(2, 8, "new")]  # the deleted row is a hidden tombstone


def test_a_value_that_does_not_fit_refuses_the_batch_naming_it_and_applies_nothing(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """A table made by hand with a narrower column than MySQL's: the value that does not fit fails the
    stage write (the check rides inside it), the error names key, position and value, and no row of
    that batch reaches the table; the batch before it stays applied."""
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db, table = f"shop_{prefix}", "items"
    bootstrap = kafka["bootstrap_servers"]
    # a table of the user's own, with the guard columns cdcflow needs (docs/phoenix_jvm.md)
    phoenix_jvm.execute(f'CREATE TABLE "{db.upper()}"."ITEMS" ("ID" INTEGER NOT NULL PRIMARY KEY, "QTY" SMALLINT, '
                    '"_CDCFLOW_POS" VARCHAR, "_CDCFLOW_DELETED" BOOLEAN)')  # fmt: skip
    topic = f"{prefix}.{db}.{table}"
    k.create_topic(bootstrap, topic, partitions=1)
    k.produce_sync(bootstrap, topic, [(b"1", event(db, table, "c", {"id": 1}, [1, 5, 0], {"id": 1, "qty": 7}))])
    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp")["phoenix"] == "done"
    late = [
        event(db, table, "u", {"id": 1}, [1, 6, 0], {"id": 1, "qty": 8}),
        event(db, table, "c", {"id": 2}, [1, 7, 0], {"id": 2, "qty": 70000}),  # past SMALLINT
    ]
    k.produce_sync(bootstrap, topic, [(b"1", e) for e in late])
    result = run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp")["phoenix"]
    assert "values that do not fit the Phoenix column types" in result and "QTY=70000" in result, result
    rows = phoenix_jvm.query(f'SELECT "ID", "QTY" FROM "{db.upper()}"."ITEMS" ORDER BY "ID"')
    assert [(int(r[0]), int(r[1])) for r in rows] == [(1, 7)]


def test_a_batch_that_dies_during_its_write_is_replayed_exactly(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """The sink dies at the two points where a replay matters (its process killed there; here the
    write raises): part-way through the executors' write (some rows committed, others not) and
    after the values were checked but before any row was written. The batch is not committed, so
    the next run replays it: the table must end as if nothing had happened, and a stale event after
    a delete must not bring the row back. (The randomized SIGKILL tests run in make soak.)"""
    from cdcflow.pipeline.sinks.phoenix.sink import PhoenixSink

    prefix = f"pc{uuid.uuid4().hex[:8]}"
    db = f"shop_{prefix}"
    history, topic = f"{prefix}-history", f"{prefix}.db1.{db}.items"
    bootstrap = kafka["bootstrap_servers"]
    k.create_topic(bootstrap, history, partitions=1)
    columns = [
        {"name": "id", "type": "INT", "sql_type": "INT", "nullable": False, "key": True, "key_order": 0},
        {"name": "v", "type": "VARCHAR", "sql_type": "VARCHAR(20)", "nullable": True, "key": False, "key_order": None},
    ]  # fmt: skip
    record = {"kind": "table", "source": "db1", "db": db, "table": "items", "columns": columns, "pos": [1, 1, 0]}
    k.produce_sync(bootstrap, history, [(b"db1", json.dumps(record).encode())])
    k.create_topic(bootstrap, topic, partitions=1)
    cfg = PipelineConfig(
        topics=f"{prefix}\\..*", dead_letter_topic=f"{prefix}-dead", max_offsets_per_trigger=1000,
        sinks=(SinkConfig(name="phoenix", type="phoenix", options={"url": phoenix_url, "create_tables": True,
                                                                   "schema_history_topic": history}),),
    )  # fmt: skip
    context = {"bootstrap_servers": bootstrap, "zk_quorum": "unused"}
    checkpoints = tmp_path / "checkpoints"
    view, table = f'"{db.upper()}"."ITEMS"', f'"{db.upper()}"."ITEMS__CDCFLOW"'

    def produce(*changes: tuple[str, int, list[int], str | None]) -> None:
        k.produce_sync(bootstrap, topic, [
            (json.dumps({"id": i}).encode(), event(db, "items", op, {"id": i}, pos, {"id": i, "v": v} if v else None))
            for op, i, pos, v in changes
        ])  # fmt: skip

    def run(crash: str | None = None) -> tuple[str, list[int]]:
        """One --available-now run; with `crash`, the sink dies "before" its write or "during" it,
        after the rows of odd keys were written and committed."""
        pipeline = Pipeline(cfg, context, checkpoints)
        written: list[int] = []
        if crash:
            sink = pipeline.sinks[0]
            assert isinstance(sink, PhoenixSink)
            write = sink._write

            def dying_write(rows: Any, *how: Any) -> int:
                if crash == "during":  # the batch's one table is table 0, its first column the key
                    written.append(write(rows.where("`_0_0` % 2 = 1"), *how))
                raise RuntimeError(f"injected: the sink died {crash} its write")

            sink._write = dying_write  # type: ignore[method-assign]
        return pipeline.run(available_now=True, max_failures=1)["phoenix"], written

    def state() -> tuple[dict[int, str], dict[int, tuple[str, bool]]]:
        rows = {int(r[0]): r[1] for r in phoenix_jvm.query(f'SELECT "ID", "V" FROM {view}')}
        pos = {int(r[0]): (r[1], bool(r[2])) for r in phoenix_jvm.query(
            f'SELECT "ID", "_CDCFLOW_POS", "_CDCFLOW_DELETED" FROM {table}')}  # fmt: skip
        return rows, pos

    def p(*parts: int) -> str:
        return ".".join(f"{x:020d}" for x in parts)

    produce(*[("c", i, [1, 10, i], f"v{i}") for i in range(1, 6)])
    assert run() == ("done", [])

    # 1. dies part-way through the write: the odd keys are written, the even ones are not
    produce(("u", 1, [1, 20, 0], "one"), ("d", 2, [1, 21, 0], None), ("c", 7, [1, 22, 0], "seven"),
            ("u", 3, [1, 23, 0], "x"), ("u", 3, [1, 23, 1], "three"), ("u", 4, [1, 24, 0], "four"))  # fmt: skip
    result, written = run(crash="during")
    assert "injected: the sink died during its write" in result and written == [3], (result, written)
    rows, pos = state()
    assert rows == {1: "one", 2: "v2", 3: "three", 4: "v4", 5: "v5", 7: "seven"}  # half applied
    assert pos[2] == (p(1, 10, 2), False) and pos[1] == (p(1, 20, 0), False)
    assert run() == ("done", [])  # the replay writes every row again; the written ones stay
    rows, pos = state()
    assert rows == {1: "one", 3: "three", 4: "four", 5: "v5", 7: "seven"}
    assert pos[1] == (p(1, 20, 0), False) and pos[2] == (p(1, 21, 0), True) and pos[3] == (p(1, 23, 1), False)

    # 2. dies after the check, before anything is written; the batch holds a stale create of
    # the deleted row, which neither the dying run nor the replay may apply
    produce(("c", 2, [1, 5, 0], "stale"), ("u", 4, [1, 30, 0], "four!"), ("d", 5, [1, 31, 0], None))
    result, written = run(crash="before")
    assert "injected: the sink died before its write" in result and written == [], result
    rows, _ = state()
    assert rows == {1: "one", 3: "three", 4: "four", 5: "v5", 7: "seven"}  # nothing applied
    assert run() == ("done", [])
    rows, pos = state()
    assert rows == {1: "one", 3: "three", 4: "four!", 7: "seven"}
    assert pos[2] == (p(1, 21, 0), True) and pos[4] == (p(1, 30, 0), False) and pos[5] == (p(1, 31, 0), True)


def test_rows_a_hand_made_table_had_before_cdcflow_take_changes_and_show(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """A table the user made with the guard columns (docs/phoenix.md), already holding rows: those rows have no
    position. Before, every guarded update of them was ignored (NULL < position is not true) and the documented
    read (`_CDCFLOW_DELETED = FALSE`) hid them. Now they count as older than any change, and are marked live."""
    prefix = f"px{uuid.uuid4().hex[:8]}"
    db, table = f"shop_{prefix}", "items"
    bootstrap = kafka["bootstrap_servers"]
    name = f'"{db.upper()}"."ITEMS"'
    phoenix_jvm.execute(f'CREATE TABLE {name} ("ID" INTEGER NOT NULL PRIMARY KEY, "QTY" INTEGER, '
                        '"_CDCFLOW_POS" VARCHAR, "_CDCFLOW_DELETED" BOOLEAN)')  # fmt: skip
    phoenix_jvm.execute(f'UPSERT INTO {name} ("ID", "QTY") VALUES (1, 10)')
    phoenix_jvm.execute(f'UPSERT INTO {name} ("ID", "QTY") VALUES (2, 20)')
    topic = f"{prefix}.{db}.{table}"
    k.create_topic(bootstrap, topic, partitions=1)
    k.produce_sync(
        bootstrap,
        topic,
        [
            (b"1", event(db, table, "u", {"id": 1}, [1, 5, 0], {"id": 1, "qty": 11})),
            (b"3", event(db, table, "c", {"id": 3}, [1, 6, 0], {"id": 3, "qty": 30})),
        ],
    )
    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp")["phoenix"] == "done"
    live = phoenix_jvm.query(f'SELECT "ID", "QTY" FROM {name} WHERE "_CDCFLOW_DELETED" = FALSE ORDER BY "ID"')
    assert [(int(r[0]), int(r[1])) for r in live] == [(1, 11), (2, 20), (3, 30)]
    # the untouched row is still older than any change: a later delete of it applies
    k.produce_sync(bootstrap, topic, [(b"2", event(db, table, "d", {"id": 2}, [1, 7, 0], None))])
    assert run_pipeline(kafka, phoenix_url, prefix, tmp_path / "cp")["phoenix"] == "done"
    live = phoenix_jvm.query(f'SELECT "ID" FROM {name} WHERE "_CDCFLOW_DELETED" = FALSE ORDER BY "ID"')
    assert [int(r[0]) for r in live] == [1, 3]


def test_the_executors_keep_one_phoenix_driver_from_batch_to_batch(
    kafka: dict[str, Any], phoenix_url: str, tmp_path: Path, phoenix_jvm: PhoenixJvm
) -> None:
    """A Phoenix driver connects to the cluster anew (seconds under load): the executors keep one per sink from
    one batch to the next while no table changed, and the sink's close releases it."""
    from pyspark.sql import SparkSession

    prefix = f"px{uuid.uuid4().hex[:8]}"
    db, table = f"shop_{prefix}", "Kept"
    bootstrap = kafka["bootstrap_servers"]
    history, topic = table_topics(bootstrap, prefix, db, table)
    events = [event(db, table, "c", {"Region": "eu", "id": i}, [1, 100 + i, 0], row(i, "eu", qty=i)) for i in range(16)]
    k.produce_sync(bootstrap, topic, [(str(i % 2).encode(), e) for i, e in enumerate(events)])
    jvm = SparkSession.builder.getOrCreate().sparkContext._jvm
    assert jvm is not None
    helper = jvm.io.cdcflow.spark.GuardedUpsert
    made = helper.driversMade()

    checkpoints = tmp_path / "cp"
    status = run_pipeline(kafka, phoenix_url, prefix, checkpoints, create_tables=True, schema_history_topic=history)

    assert status["phoenix"] == "done", status
    batches = len([p for p in (checkpoints / "phoenix").rglob("commits/*") if p.name.isdigit()])
    assert batches >= 4  # 16 events, 4 per trigger: the later batches are where a driver is kept
    assert helper.driversMade() - made == 1  # two tasks a batch; one driver (the table was made in batch 0)
    assert not helper.keeps(f"{phoenix_url}|phoenix")  # released when the pipeline closed the sink
    got = phoenix_jvm.query(f'SELECT "ID", "QTY" FROM "{db.upper()}"."KEPT" ORDER BY "QTY"')
    assert [(int(i), q) for i, q in got] == [(i, i) for i in range(16)]


def test_a_write_without_a_kept_driver_closes_each_tasks_own(phoenix_url: str, phoenix_jvm: PhoenixJvm) -> None:
    """`write_from_executors` keeps no driver: each task makes one and closes it at its end (its ZooKeeper session
    and HBase connection with it)."""
    from pyspark.sql import SparkSession

    from cdcflow.clients.phoenix import write_from_executors
    from cdcflow.pipeline.sinks.phoenix.guarded import PLAIN

    table = f"PX{uuid.uuid4().hex[:8].upper()}.UNKEPT"
    phoenix_jvm.execute(f"CREATE TABLE {table} (ID BIGINT NOT NULL PRIMARY KEY, V VARCHAR)")
    spark = SparkSession.builder.getOrCreate()
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    helper = jvm.io.cdcflow.spark.GuardedUpsert
    made, closed = helper.driversMade(), helper.driversClosed()
    rows = spark.createDataFrame([(i, f"v{i}") for i in range(10)], "ID BIGINT, V STRING").repartition(2)
    types = [jvm.java.sql.Types.BIGINT, jvm.java.sql.Types.VARCHAR]
    written = write_from_executors(rows, phoenix_url, f"UPSERT INTO {table} (ID, V) VALUES (?, ?)", [0, 1], types,
                                   [PLAIN, PLAIN], 100, "unkept")  # fmt: skip
    assert written == 10
    assert helper.driversMade() - made == 2  # one per task
    assert helper.driversClosed() - closed == 2
    got = phoenix_jvm.query(f"SELECT ID, V FROM {table} ORDER BY ID")
    assert [(int(i), v) for i, v in got] == [(i, f"v{i}") for i in range(10)]
