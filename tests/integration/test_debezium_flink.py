"""A real third-party consumer reads cdcflow's `debezium` output format: Flink SQL (PyFlink, its local
mini-cluster, the Kafka SQL connector from Maven Central) with `format = 'debezium-json'` and with
`'debezium-avro-confluent'` against the stack's schema registry rebuilds the tables of a randomized MariaDB
workload equal to SELECT *.

The workload (cdcflow.dev.testing.mysql.MySqlWorkload) has every supported column type, multi-row statements,
primary-key changes (also of a composite key), deletes, rollbacks, savepoints over a MyISAM table and XA
transactions. Three captures read it: one writes Kafka Connect's schema wrapper (Flink's
`debezium-json.schema-include`), one the bare payload (both with decimal.handling.mode=string, as Flink's JSON
format needs, docs/debezium.md), one Avro in Confluent's wire format with precise decimals. Each Flink row
is turned back into cdcflow's rendering with the format's own readers and compared with SELECT * rendered the same way.
"""

from __future__ import annotations

from typing import Any

from cdcflow.clients.mysql import query
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.flink import FlinkReader, FlinkTable, cdcflow_row, flink_type
from cdcflow.dev.testing.mysql import CaptureThread, MySqlWorkload, admin_endpoint, run_and_catch_up, source_config
from cdcflow.sources.mysql.debezium_fields import field_from_information_schema
from cdcflow.verify.mysql import compare_tables, key_json, source_rows

TABLES = ("accounts", "order_lines", "audit", "xa_ledger")


def table_fields(ep: Any, db: str, table: str, handling: str) -> tuple[list[Any], list[int], list[str]]:
    rows = query(ep, "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE = 'YES', "
                     "COALESCE(NUMERIC_PRECISION, 0) FROM information_schema.COLUMNS "
                     "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))  # fmt: skip
    fields = [field_from_information_schema(str(n), str(d), str(c), bool(null), handling) for n, d, c, null, _ in rows]
    key = query(ep, "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
                (db, table))  # fmt: skip
    return fields, [int(p) for *_, p in rows], [str(k) for (k,) in key]


def test_flink_sql_rebuilds_the_tables_from_cdcflows_debezium_json_and_avro(
    mariadb: dict[str, Any], kafka: dict[str, Any], registry: dict[str, Any], flink_reader: FlinkReader,
) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("dbzflink")
    workload = MySqlWorkload(admin, db, seed=35, account_ids=400)
    workload.create()
    output = {"format": "debezium", "decimal_handling": "string"}
    wrapped = source_config(unique_name("dbzw"), [db], output={**output, "schemas": True})
    bare = source_config(unique_name("dbzb"), [db], output=output)
    avro = source_config(unique_name("dbza"), [db], output={"format": "debezium", "serialization": "avro"})
    captures = [CaptureThread(cfg, mariadb, bootstrap, registry_url=registry["url"]).start()
                for cfg in (wrapped, bare, avro)]  # fmt: skip
    stats = run_and_catch_up(workload, 250, captures)
    assert workload.statements > 500 and workload.xa_commits and workload.savepoint_rollbacks
    assert all(s.events > 0 for s in stats)

    readings = (
        (wrapped, "string", "debezium-json", {"debezium-json.schema-include": "true"}),
        (bare, "string", "debezium-json", {"debezium-json.schema-include": "false"}),
        (avro, "precise", "debezium-avro-confluent", {"debezium-avro-confluent.url": registry["url"]}),
    )
    described = {(table, handling): table_fields(admin, db, table, handling)
                 for table in TABLES for handling in ("string", "precise")}  # fmt: skip
    wanted = []
    for cfg, handling, fmt, options in readings:
        for table in TABLES:
            fields, precisions, key = described[(table, handling)]
            columns = [(f.name, flink_type(f, p)) for f, p in zip(fields, precisions, strict=True)]
            wanted.append(FlinkTable(f"{cfg.topic_prefix}.{db}.{table}", columns, key, fmt, options))
    read = flink_reader.read_tables(bootstrap, wanted)

    for cfg, handling, fmt, _ in readings:
        for table in TABLES:
            fields, _, key = described[(table, handling)]
            got = read[f"{cfg.topic_prefix}.{db}.{table}"]
            rebuilt = {key_json(row, key): row for row in (cdcflow_row(fields, r) for r in got["rows"])}
            report = compare_tables(source_rows(admin, db, table), rebuilt)
            where = f"{table} ({fmt}, schemas={cfg.output.schemas}, Flink changelog {got['changelog']})"
            assert report.clean, where + ": " + report.summary() + "\n" + "\n".join(report.examples)
            assert rebuilt, f"{where}: Flink rebuilt no rows"
    # updates came through as updates and deletes as deletes, not only as inserts
    for cfg in (wrapped, avro):
        changelog = read[f"{cfg.topic_prefix}.{db}.accounts"]["changelog"]
        assert changelog["+U"] > 0 and changelog["-D"] > 0, changelog
