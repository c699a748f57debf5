"""Re-record tests/unit/data/mariadb_all_types.binlog from a running stack (not run by the tests).

    CDCFLOW_TEST_STACK_HOME=<stack home> .venv/bin/python tests/unit/data/record_binlog_golden.py

It creates a fresh database with the all-types table of tests/integration/test_mysql_types.py,
writes its rows, and stores the raw events of those transactions ([u32 length][event] each),
plus their decoded form (`.json`), which the unit tests compare against.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import orjson

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1] / "integration"))

from test_mysql_types import COLUMNS, ROWS  # noqa: E402

from cdcflow.clients.mysql import BinlogStream, StreamStart, execute, query  # noqa: E402
from cdcflow.dev.stack import Stack  # noqa: E402
from cdcflow.dev.testing import unique_name  # noqa: E402
from cdcflow.dev.testing.mysql import admin_endpoint, repl_endpoint  # noqa: E402
from cdcflow.sources.mysql.binlog.events import BinlogDecoder, RowsEvent, XidEvent  # noqa: E402


def main() -> None:
    ep = Stack(Path(os.environ["CDCFLOW_TEST_STACK_HOME"])).endpoints("mariadb")
    admin = admin_endpoint(ep)
    db = unique_name("golden")
    execute(admin, f"CREATE DATABASE {db}", f"CREATE TABLE {db}.all_types ({COLUMNS}) DEFAULT CHARSET=utf8mb4")
    (start,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
    execute(admin, "SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'", "SET time_zone = '+00:00'",
            *(f"INSERT INTO {db}.all_types VALUES {row}" for row in ROWS),
            f"UPDATE {db}.all_types SET u64 = u64 - 1, f = f * 2 WHERE id = 1",
            f"DELETE FROM {db}.all_types WHERE id = 3")  # fmt: skip
    stream = BinlogStream(repl_endpoint(ep), server_id=4242)
    stream.open(StreamStart(gtid_state=start))
    decoder = BinlogDecoder()
    decoder.checksum = stream.checksum
    raw_events, decoded, commits = [], [], 0
    while commits < 5:
        raw = stream.read()
        ev = decoder.decode(raw)
        raw_events.append(raw)
        if isinstance(ev, RowsEvent):
            decoded.append({"kind": ev.kind, "table": ev.schema.table if ev.schema else None, "rows": ev.rows})
        commits += isinstance(ev, XidEvent)
    stream.close()
    (HERE / "mariadb_all_types.binlog").write_bytes(b"".join(struct.pack("<I", len(r)) + r for r in raw_events))
    (HERE / "mariadb_all_types.json").write_bytes(orjson.dumps(decoded, option=orjson.OPT_INDENT_2))
    print(f"{len(raw_events)} events, {len(decoded)} rows events")


if __name__ == "__main__":
    main()
