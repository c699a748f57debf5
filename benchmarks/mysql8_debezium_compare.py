"""Event content on Oracle MySQL 8.0: cdcflow's events against Debezium 3.5's MySqlConnector, field
for field where the formats overlap, with `SELECT *` as the arbiter.

Runs the MariaDB kit's compare.py ($CDCFLOW_ANCHORS/debezium: its seeded workload over a 37-column table of
every type and a composite-key table, its per-type normalization and difference classes) unchanged, pointed
at the stack's MySQL 8.0.31 instead of MariaDB: the kit's stack, Debezium user, connector class, cdcflow
source and the one MariaDB-only variable it reads are swapped here, nothing else.

    cdcflow stack up kafka mysql
    cd benchmarks && ../.venv/bin/python mysql8_debezium_compare.py [--transactions 2000]
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from anchors import anchors_dir  # type: ignore[import-not-found]
from mysql8_debezium import LIB, fetch_classpath  # type: ignore[import-not-found]

from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack as CdcflowStack


def main() -> None:
    kit = anchors_dir() / "debezium"
    if not (kit / "compare.py").exists():
        raise SystemExit(f"no Debezium kit at {kit} (set CDCFLOW_ANCHORS to the anchors folder)")
    sys.path.insert(0, str(kit))
    import anchor_lib  # type: ignore[import-not-found]
    import compare  # type: ignore[import-not-found]

    fetch_classpath()
    os.environ["DBZ_LIB"] = str(LIB)
    home = default_stack_home()
    ours = CdcflowStack(home)
    my, kafka = ours.endpoints("mysql"), ours.endpoints("kafka")
    stack = anchor_lib.Stack(home, str(my["host"]), int(my["port"]), str(my["user"]), str(my["password"]),
                             str(kafka["bootstrap_servers"]))  # fmt: skip

    def ensure_dbz_user(stack: Any, user: str, password: str) -> None:  # Debezium's documented MySQL grants
        conn = stack.sql()
        with conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS %s@'127.0.0.1' IDENTIFIED BY %s", (user, password))
            cur.execute("GRANT SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, REPLICATION CLIENT, LOCK TABLES "
                        "ON *.* TO %s@'127.0.0.1'", (user,))  # fmt: skip
        conn.close()

    base_dbz = anchor_lib.DebeziumCapture

    class MySqlDebezium(base_dbz):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["connector_props"] = ["connector.class=io.debezium.connector.mysql.MySqlConnector",
                                         "database.ssl.mode=preferred", *kwargs.get("connector_props", [])]  # fmt: skip
            super().__init__(*args, **kwargs)

    base_cdc = anchor_lib.CdcflowCapture

    class MySqlCdcflow(base_cdc):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            cfg = json.loads(self.config_path.read_text())
            cfg["mysql"].update(host=my["host"], port=my["port"], user=my["repl_user"], password=my["repl_password"])
            self.config_path.write_text(json.dumps(cfg, indent=2) + "\n")

    original_sql_one = compare.sql_one

    def sql_one(conn: Any, statement: str, args: Any = None) -> Any:
        return original_sql_one(conn, statement.replace("@@gtid_binlog_pos", "@@gtid_executed"), args)

    def columns(stack: Any, db: str, table: str) -> tuple[dict[str, Any], list[str]]:
        """The kit's column reader without its MariaDB step (JSON found by a json_valid CHECK): MySQL's
        information_schema names JSON columns `json` itself and has no TABLE_NAME in CHECK_CONSTRAINTS."""
        conn = stack.sql()
        with conn.cursor() as cur:
            cur.execute("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, NUMERIC_SCALE, DATETIME_PRECISION FROM "
                        "information_schema.COLUMNS WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY "
                        "ORDINAL_POSITION", (db, table))  # fmt: skip
            cols = {r[0]: compare.Column(r[0], r[1].lower(), r[2].lower(), r[3], r[4]) for r in cur.fetchall()}
            cur.execute("SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA=%s AND "
                        "TABLE_NAME=%s AND CONSTRAINT_NAME='PRIMARY' ORDER BY ORDINAL_POSITION",
                        (db, table))  # fmt: skip
            pk = [r[0] for r in cur.fetchall()]
        conn.close()
        return cols, pk

    compare.columns = columns
    compare.Stack = type("MySqlStack", (), {"load": staticmethod(lambda: stack)})
    compare.ensure_dbz_user = ensure_dbz_user
    compare.DebeziumCapture = MySqlDebezium
    compare.CdcflowCapture = MySqlCdcflow
    compare.sql_one = sql_one
    print(f"compare.py from {kit}, against MySQL at {stack.host}:{stack.port} (the kit prints 'MariaDB' for it)")
    # The kit's workload writes zero dates, as MariaDB's default sql_mode allows; MySQL 8's default refuses
    # them. Legacy MySQL data holds them too: allow them for the run, then put the server's mode back.
    admin = stack.sql()
    saved = anchor_lib.sql_one(admin, "SELECT @@GLOBAL.sql_mode")
    with admin.cursor() as cur:
        cur.execute("SET GLOBAL sql_mode = 'NO_ENGINE_SUBSTITUTION'")
    try:
        compare.main()
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL sql_mode = %s", (saved,))
        admin.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
