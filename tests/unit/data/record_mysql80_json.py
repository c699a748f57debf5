"""Re-record tests/unit/data/mysql80_json.binlog from a running stack (not run by the tests).

    CDCFLOW_TEST_STACK_HOME=<stack home> .venv/bin/python tests/unit/data/record_mysql80_json.py

On the stack's MySQL 8.0 it writes one row per JSON document below (every binary JSON type,
opaque DECIMAL / temporal / binary scalars, large objects and arrays), every other transaction
compressed (TRANSACTION_PAYLOAD), and stores the raw events read through COM_BINLOG_DUMP_GTID
([u32 length][event] each) plus what `SELECT id, j` returns for them (`.json`): the unit tests
hold the decoder to MySQL's own rendering, not to anything cdcflow computed.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import orjson

from cdcflow.clients.mysql import BinlogStream, StreamStart, execute, query
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import admin_endpoint, repl_endpoint
from cdcflow.sources.mysql.binlog.events import BinlogDecoder, XidEvent
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.binlog.mysql_events import TransactionPayloadEvent

HERE = Path(__file__).parent
DOCS = [
    "'{\"a\": 1, \"b\": [1, 2]}'", "'null'", "'true'", "'false'", "'[]'", "'{}'",
    "'\"x\\\\u00e9\\\\n\\\\\"q\\\\u0001\"'", "'3.5'", "'-1e300'", "'1e20'", "'0.1'", "'1e-7'", "'1e-16'",
    "'123456789012345678'", "'18446744073709551615'", "'-9223372036854775808'", "'-32768'", "'65535'",
    "'{\"longer key\": {\"nested\": [null, false, true, -32768, 65535, 70000, -70000, 4294967296]}, \"k\": \"v\"}'",
    "'[1.0, 2.50, 100]'", "CAST(3.14 AS JSON)", "CAST(-0.000001 AS JSON)", "CAST(CAST('2024-02-29' AS DATE) AS JSON)",
    "CAST(CAST('2024-02-29 12:34:56.789' AS DATETIME(3)) AS JSON)", "CAST(CAST('-12:34:56.5' AS TIME(1)) AS JSON)",
    "CAST(x'00ff' AS JSON)", "JSON_OBJECT('big', REPEAT('z', 70000), 'arr', JSON_ARRAY(1, 2, 3))",
    "JSON_ARRAY(REPEAT('y', 40000), REPEAT('w', 40000))", "'\"😀 日本\"'",
    "JSON_OBJECT('zz', 1, 'a', 2, 'bbb', 3, 'cc', JSON_OBJECT())",
]  # fmt: skip


def main() -> None:
    ep = Stack(Path(os.environ["CDCFLOW_TEST_STACK_HOME"])).endpoints("mysql")
    admin = admin_endpoint(ep)
    db = unique_name("golden")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.docs (id INT PRIMARY KEY, j JSON)")
    start = GtidSet.parse(str(query(admin, "SELECT @@gtid_executed")[0][0]))
    statements = []
    for i, doc in enumerate(DOCS):
        statements += [f"SET SESSION binlog_transaction_compression = {'ON' if i % 2 else 'OFF'}",
                       f"INSERT INTO {db}.docs VALUES ({i}, {doc})"]  # fmt: skip
    execute(admin, *statements)
    selected = {str(i): j for i, j in query(admin, f"SELECT id, j FROM {db}.docs")}
    stream = BinlogStream(repl_endpoint(ep), server_id=4243)
    stream.open(StreamStart(mysql_gtids=start.encode()))
    decoder = BinlogDecoder()
    decoder.checksum = stream.checksum
    raw_events: list[bytes] = []
    commits = 0
    while commits < len(DOCS):
        raw = stream.read()
        ev = decoder.decode(raw)
        raw_events.append(raw)
        if isinstance(ev, TransactionPayloadEvent):
            commits += sum(isinstance(decoder.decode(r, inner=True), XidEvent) for r in ev.events())
        commits += isinstance(ev, XidEvent)
    stream.close()
    (HERE / "mysql80_json.binlog").write_bytes(b"".join(struct.pack("<I", len(r)) + r for r in raw_events))
    facts = {"server": "MySQL 8.0.31 (cdcflow stack up mysql)", "table": f"{db}.docs", "select": selected}
    (HERE / "mysql80_json.json").write_bytes(orjson.dumps(facts, option=orjson.OPT_INDENT_2))
    print(f"{len(raw_events)} events, {len(selected)} documents")


if __name__ == "__main__":
    main()
