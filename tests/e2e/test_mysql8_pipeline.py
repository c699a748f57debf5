"""Oracle MySQL 8.0 → `cdcflow mysql` capture → Kafka → `cdcflow pipeline run` (a real process) → Phoenix and
Delta.

The randomized workload (every supported column type, key changes, rollbacks, savepoints, XA) runs on
MySQL with compressed transactions and partial JSON updates switched on for every session, while the
capture and a two-sink pipeline run. Afterwards `cdcflow verify mysql-phoenix` (the CLI, as a user runs
it) reports no differences for any table, and every Delta table read through its current view equals
`SELECT *` row by row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from cdcflow.clients.mysql import execute
from cdcflow.dev.testing import ServiceHarness, soak_size, unique_name
from cdcflow.dev.testing.mysql import WORKLOAD_TABLES, CaptureThread, MySqlWorkload, admin_endpoint, source_config
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.views import current_view
from cdcflow.verify.mysql import compare_tables, key_json, source_rows, table_columns

from .test_mysql_phoenix import PipelineProcess, Writer, finish_and_verify, write_config


@pytest.mark.skipif(
    soak_size(0, 1) == 0,
    reason="make soak only (about 2.5 minutes, like the MariaDB → Phoenix e2e); make test reads MySQL 8 with "
    "every feature in tests/integration/test_mysql8_capture.py and applies the same events in the sink tests",
)
def test_mysql8_workload_with_compression_and_partial_json_into_phoenix_and_delta(
    mysql: dict[str, Any], kafka: dict[str, Any], hbase: dict[str, Any], services: ServiceHarness, tmp_path: Path
) -> None:
    phoenix_url = services.endpoints("phoenix")["jdbc_url"]
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mysql)
    db = unique_name("e2e_my8")
    execute(
        admin, "SET GLOBAL binlog_transaction_compression = ON", "SET GLOBAL binlog_row_value_options = 'PARTIAL_JSON'"
    )
    try:
        workload = MySqlWorkload(admin, db, seed=31, account_ids=400)
        workload.create()
        source = source_config(unique_name("my8"), [db])
        capture = CaptureThread(source, mysql, bootstrap).start()
        delta_root = tmp_path / "delta"
        config_path = write_config(tmp_path, bootstrap, hbase["zk_quorum"], mysql, source, phoenix_url)
        config = yaml.safe_load(config_path.read_text())
        config["pipeline"]["sinks"].append({"name": "delta", "type": "delta", "options": {
            "path": str(delta_root), "mysql_layout": "json", "register_in_catalog": False}})  # fmt: skip
        config_path.write_text(yaml.safe_dump(config))
        pipeline = PipelineProcess(config_path, tmp_path / "pipeline.log")
        with Writer(workload, per_second=15):
            pipeline.start()
            pipeline.wait_for_batches(3)
            time.sleep(5)
        sizes = finish_and_verify(mysql, bootstrap, source, capture, pipeline, config_path, db)
    finally:
        execute(admin, "SET GLOBAL binlog_transaction_compression = OFF", "SET GLOBAL binlog_row_value_options = ''")
    assert capture.capture.stats.partial_json_rows > 0, capture.capture.stats  # diffs were really decoded
    assert workload.transactions > 100 and workload.xa_commits > 0

    spark = build_session("cdcflow-test-mysql8-delta")
    for table in WORKLOAD_TABLES:
        keys = tuple(n for n, *_, pk in table_columns(admin, db, table) if pk)
        rows = current_view(spark, str(delta_root / source.name / db / table)).collect()
        rebuilt = {key_json(after, keys): after for after in (orjson.loads(r["after"]) for r in rows)}
        report = compare_tables(source_rows(admin, db, table), rebuilt)
        assert report.clean, f"delta {table}: {report.summary()}\n" + "\n".join(report.examples)
    print(f"mysql 8 → phoenix and delta: {workload.transactions} transactions, "
          f"{capture.capture.stats.partial_json_rows} partial JSON rows, phoenix rows compared {sizes}")  # fmt: skip
