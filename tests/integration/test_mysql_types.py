"""Every MariaDB column type, through the real binlog and the capture, equals SELECT * rendered the same way.

The expected JSON of the tricky values is also spelled out, so a mistake shared by the decoder
and the SELECT renderer cannot pass unnoticed.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, read_all, source_config
from cdcflow.events.json_codec import decode
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows

COLUMNS = """
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, u16 SMALLINT UNSIGNED, i24 MEDIUMINT, u24 MEDIUMINT UNSIGNED,
  i32 INT, u32 INT UNSIGNED, i64 BIGINT, u64 BIGINT UNSIGNED, bool1 BOOLEAN,
  d1 DECIMAL(5,2), d2 DECIMAL(30,10), d3 DECIMAL(65,30), d4 DECIMAL(10,0), d5 DECIMAL(4,4),
  f FLOAT, db DOUBLE,
  dt0 DATE, dtm0 DATETIME, dtm3 DATETIME(3), dtm6 DATETIME(6),
  ts0 TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, ts6 TIMESTAMP(6) NULL,
  t0 TIME, t1 TIME(1), t4 TIME(4), t6 TIME(6), y YEAR,
  b1 BIT(1), b10 BIT(10), b64 BIT(64),
  e ENUM('red','green','blue'), s SET('a','b','c','d'),
  j JSON, c5 CHAR(5), c300 CHAR(100) CHARACTER SET utf8mb4, vc VARCHAR(300), l1 VARCHAR(20) CHARACTER SET latin1,
  tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  bn BINARY(4), vb VARBINARY(50), tb TINYBLOB, bl BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  g GEOMETRY
"""

ROWS = [
    # extremes and ordinary values
    """(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808,
        18446744073709551615, TRUE, -999.99, 12345678901234567890.0123456789,
        -12345678901234567890123456789012345.123456789012345678901234567891, 9999999999, -0.9999,
        3.14159, -2.718281828459045, '2024-02-29', '1000-01-01 00:00:00', '2026-11-22 13:14:15.678',
        '9999-12-31 23:59:59.999999', '1970-01-01 00:00:01', '2038-01-19 03:14:07.99', '2026-06-30 12:00:00.000001',
        '-838:59:59', '-00:00:01.5', '12:34:56.7891', '838:59:58.999999', 2155,
        b'1', b'1010101010', b'1111111111111111111111111111111111111111111111111111111111111111',
        'blue', 'a,c,d', '{"k": [1, 2.5, "x\\\\u00e9"], "n": null}', 'ab', REPEAT('é', 100), REPEAT('x', 300),
        'caf\xe9', 'tiny', 'text 😀', 'medium', REPEAT('long ', 1000),
        'a\\0', 'v\\0b\\0', 'tb', 'blob', 'mblob', REPEAT('L', 70000),
        ST_GeomFromText('POINT(1 2)'))""",
    # NULL in every nullable column
    "(2" + ", NULL" * 51 + ")",
    # zero / empty / edge values
    """(3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, FALSE, 0, 0, 0, 0, 0, 0, 0, '0000-00-00', '0000-00-00 00:00:00',
        '0000-00-00 00:00:00.000', '2026-01-01 00:00:00.5', '1970-01-01 00:00:01', NULL, NULL,
        '00:00:00', '-00:00:00.1', '-12:00:00.0001', '-00:00:00.000001', 0,
        b'0', b'0', b'0', '', '', '[]', '', '', '', '', '', '', '', '',
        '', '', '', '', '', '', NULL)""",
]


@pytest.fixture(scope="module")
def sql_mode_relaxed() -> str:
    # Zero dates and the invalid ENUM value '' need a permissive sql_mode for this one session.
    return "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'"


def test_every_column_type_matches_select(
    mysql_server: dict[str, Any], kafka: dict[str, Any], sql_mode_relaxed: str
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("types")
    admin = admin_endpoint(mysql_server)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.all_types ({COLUMNS}) DEFAULT CHARSET=utf8mb4")
    cfg = source_config(unique_name("src"), [db])
    capture = CaptureThread(cfg, mysql_server, bootstrap).start()
    try:
        execute(admin, sql_mode_relaxed, "SET time_zone = '+00:00'",
                *(f"INSERT INTO {db}.all_types VALUES {row}" for row in ROWS))  # fmt: skip
        # an update touching every type, then a delete, so before images are decoded too
        execute(admin, sql_mode_relaxed, f"UPDATE {db}.all_types SET u64 = u64 - 1, f = f * 2 WHERE id = 1",
                f"INSERT INTO {db}.all_types (id) VALUES (4)", f"DELETE FROM {db}.all_types WHERE id = 4")  # fmt: skip
        values = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.all_types"], expected=6)
    finally:
        capture.stop()
    assert len(values) == 6, f"expected 6 change events, got {len(values)}"
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    report = compare_tables(source_rows(admin, db, "all_types"), rebuilt[(db, "all_types")])
    assert report.clean, report.summary() + "\n" + "\n".join(report.examples)

    events = [decode(v) for v in values]
    first = next(e.after for e in events if e.op.value == "c" and e.after and e.after["id"] == 1)
    assert first is not None
    expected = {
        "u64": 18446744073709551615, "i64": -9223372036854775808, "u32": 4294967295, "u24": 16777215,
        "bool1": 1, "d1": "-999.99", "d2": "12345678901234567890.0123456789",
        "d3": "-12345678901234567890123456789012345.123456789012345678901234567891",
        "d4": "9999999999", "d5": "-0.9999", "f": 3.14159, "db": -2.718281828459045,
        "dt0": "2024-02-29", "dtm0": "1000-01-01 00:00:00", "dtm3": "2026-11-22 13:14:15.678",
        "dtm6": "9999-12-31 23:59:59.999999", "ts0": "1970-01-01T00:00:01Z", "ts2": "2038-01-19T03:14:07.99Z",
        "ts6": "2026-06-30T12:00:00.000001Z", "t0": "-838:59:59", "t1": "-00:00:01.5", "t4": "12:34:56.7891",
        "t6": "838:59:58.999999", "y": 2155, "b1": 1, "b10": 0b1010101010, "b64": 2**64 - 1,
        "e": "blue", "s": "a,c,d", "c5": "ab", "c300": "é" * 100, "l1": "café", "tx": "text 😀",
        "bn": base64.b64encode(b"a\x00\x00\x00").decode(), "vb": base64.b64encode(b"v\x00b\x00").decode(),
    }  # fmt: skip
    assert {k: first[k] for k in expected} == expected
    assert orjson.loads(first["j"]) == {"k": [1, 2.5, "x\u00e9"], "n": None}
    nulls = next(e.after for e in events if e.after and e.after["id"] == 2)
    assert nulls is not None and set(nulls.values()) == {2, None} and len(nulls) == 52
    zero = next(e.after for e in events if e.after and e.after["id"] == 3)
    assert zero is not None
    assert (zero["dt0"], zero["dtm0"], zero["dtm3"], zero["t1"], zero["t4"], zero["t6"], zero["e"]) == (
        "0000-00-00", "0000-00-00 00:00:00", "0000-00-00 00:00:00.000", "-00:00:00.1", "-12:00:00.0001",
        "-00:00:00.000001", "",
    )  # fmt: skip
    update = next(e for e in events if e.op.value == "u")
    assert update.before is not None and update.after is not None
    assert update.before["u64"] == 2**64 - 1 and update.after["u64"] == 2**64 - 2


COMPILED_COLUMNS = """
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY, i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, u16 SMALLINT UNSIGNED,
  i24 MEDIUMINT, u24 MEDIUMINT UNSIGNED, i32 INT, u32 INT UNSIGNED, i64 BIGINT, u64 BIGINT UNSIGNED,
  d1 DECIMAL(5,2), d3 DECIMAL(65,30), d4 DECIMAL(10,0), db DOUBLE, dt0 DATE, dtm0 DATETIME, dtm3 DATETIME(3),
  dtm6 DATETIME(6), ts0 TIMESTAMP NULL, ts2 TIMESTAMP(2) NULL, y YEAR, c5 CHAR(5), vc VARCHAR(300), tx TEXT,
  a8 VARCHAR(8) CHARACTER SET ascii, bn BINARY(4), vb VARBINARY(50), bl BLOB
"""
COMPILED_ROWS = [
    """(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808,
        18446744073709551615, -999.99, -12345678901234567890123456789012345.123456789012345678901234567891,
        9999999999, -2.718281828459045, '2024-02-29', '1000-01-01 00:00:00', '2026-11-22 13:14:15.678',
        '9999-12-31 23:59:59.999999', '1970-01-01 00:00:01', '2038-01-19 03:14:07.99', 2155, 'ab',
        REPEAT('é', 300), 'text 😀', 'plain', 'a\\0', 'v\\0b\\0', 'blob')""",
    "(2" + ", NULL" * 28 + ")",
    """(3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00.000',
        '2026-01-01 00:00:00.5', '1970-01-01 00:00:01', NULL, 0, '', '', '', '', '', '', '')""",
]


def test_the_compiled_row_decoder_reads_the_real_binlog_as_select_shows_it(
    mysql_server: dict[str, Any], kafka: dict[str, Any], sql_mode_relaxed: str
) -> None:
    """A table whose every column the compiled decoder (cdcflow._native.mysql_rows) covers: its rows, written by
    MariaDB and read from the real binlog by it, equal SELECT * (the test above holds the Python readers to it)."""
    from unittest import mock

    from cdcflow.sources.mysql.binlog import events as binlog_events

    compiled = binlog_events._native_rows
    assert compiled is not None, "cdcflow._native is not built: run `make install`"
    served: list[int] = []

    def counting(*args: Any) -> Any:
        rows = compiled(*args)
        served.append(0 if rows is None else len(rows))
        return rows

    bootstrap = kafka["bootstrap_servers"]
    db = unique_name("compiled")
    admin = admin_endpoint(mysql_server)
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.t ({COMPILED_COLUMNS}) DEFAULT CHARSET=utf8mb4")
    cfg = source_config(unique_name("src"), [db])
    with mock.patch.object(binlog_events, "_native_rows", counting):
        capture = CaptureThread(cfg, mysql_server, bootstrap).start()
        try:
            execute(admin, sql_mode_relaxed, "SET time_zone = '+00:00'",
                    *(f"INSERT INTO {db}.t VALUES {row}" for row in COMPILED_ROWS),
                    f"UPDATE {db}.t SET u64 = u64 - 1, vc = 'x' WHERE id = 1",
                    f"DELETE FROM {db}.t WHERE id = 3")  # fmt: skip
            values = read_all(bootstrap, [f"{cfg.topic_prefix}.{db}.t"], expected=5)
        finally:
            capture.stop()
    assert len(values) == 5 and sum(served) == 5 and 0 not in served, f"compiled decoder served {served}"
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    report = compare_tables(source_rows(admin, db, "t"), rebuilt[(db, "t")])
    assert report.clean, report.summary() + "\n" + "\n".join(report.examples)
    first = next(e.after for e in map(decode, values) if e.op.value == "c" and e.after and e.after["id"] == 1)
    assert first is not None
    assert (first["u64"], first["d3"], first["dtm6"], first["ts2"], first["tx"], first["bn"]) == (
        18446744073709551615, "-12345678901234567890123456789012345.123456789012345678901234567891",
        "9999-12-31 23:59:59.999999", "2038-01-19T03:14:07.99Z", "text 😀", base64.b64encode(b"a\0\0\0").decode(),
    )  # fmt: skip
