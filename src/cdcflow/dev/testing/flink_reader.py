"""Read Kafka topics with Flink SQL and write the tables they rebuild, as one JSON document.

Runs in PyFlink's own virtualenv (cdcflow.dev.testing.flink makes it), so it imports nothing of cdcflow. The
jobs run on Flink's own local mini-cluster, one table after the other; each is declared with a PRIMARY KEY
and its format (`debezium-json`, `debezium-avro-confluent`; with the `upsert-kafka` connector, a raw key and
`json` or `avro-confluent` values), read from the earliest offset up to the offsets at start
(`scan.bounded.mode = latest-offset`), so the query ends. Each changelog row Flink emits (+I, -U, +U, -D)
is applied to a dict by key; what is left is written, with the count of each kind.

Specs come on stdin, one JSON document per line, and are read one after another in the same JVM (a test session
starts it once: the JVM's start and its warm-up are paid once); the process ends when stdin closes. A spec:
{"jars": [...], "bootstrap": ..., "tables": [{"topic": ..., "columns": [[name, flink type], ...], "key": [...],
 "format": ..., "connector": "kafka" | "upsert-kafka", "options": {...}}, ...], "out": path}; written to `out`
(whole, by a rename): {"tables": {topic: {"rows": [...], "changelog": {"+I": n, ...}}}}, or {"error": traceback}.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
import sys
import traceback
from typing import Any


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, dt.date | dt.datetime | dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, dict):  # a MAP
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "as_dict"):  # a nested ROW
        return {k: _plain(v) for k, v in value.as_dict().items()}
    return value


def read(spec: dict[str, Any]) -> dict[str, Any]:
    from pyflink.common import RowKind  # type: ignore[import-not-found]
    from pyflink.table import EnvironmentSettings, TableEnvironment  # type: ignore[import-not-found]

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())  # a fresh catalog per spec
    conf = env.get_config()
    conf.set("pipeline.jars", ";".join(f"file://{jar}" for jar in spec["jars"]))
    conf.set("parallelism.default", "1")
    out: dict[str, Any] = {}
    for n, table in enumerate(spec["tables"]):
        columns = ", ".join(f"`{name}` {flink_type}" for name, flink_type in table["columns"])
        key = ", ".join(f"`{k}`" for k in table["key"])
        options = {
            "topic": table["topic"],
            "properties.bootstrap.servers": spec["bootstrap"],
            "properties.group.id": "cdcflow-flink-reader",
            "scan.bounded.mode": "latest-offset",
        }
        if table.get("connector", "kafka") == "upsert-kafka":  # the key's bytes as is; always from the start
            options |= {"connector": "upsert-kafka", "key.format": "raw", "value.format": table["format"]}
        else:
            options |= {"connector": "kafka", "scan.startup.mode": "earliest-offset", "format": table["format"]}
        options |= table.get("options", {})
        with_clause = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        env.execute_sql(f"CREATE TABLE src{n} ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH ({with_clause})")
        names = [name for name, _ in table["columns"]]
        key_index = [names.index(k) for k in table["key"]]
        state: dict[str, list[Any]] = {}
        counts = {"+I": 0, "-U": 0, "+U": 0, "-D": 0}
        with env.execute_sql(f"SELECT * FROM src{n}").collect() as rows:
            for row in rows:
                values = [_plain(v) for v in row]
                row_key = json.dumps([values[i] for i in key_index], sort_keys=True)
                kind = row.get_row_kind()
                if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                    state[row_key] = values
                    counts["+I" if kind == RowKind.INSERT else "+U"] += 1
                else:
                    state.pop(row_key, None)
                    counts["-D" if kind == RowKind.DELETE else "-U"] += 1
        out[table["topic"]] = {"rows": [dict(zip(names, v, strict=True)) for v in state.values()], "changelog": counts}
    return out


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        spec = json.loads(line)
        try:
            result: dict[str, Any] = {"tables": read(spec)}
        except Exception:  # told to the test that asked; the next spec is read all the same
            result = {"error": traceback.format_exc()}
        # A file, not stdout: the JVM's loggers write to stdout too (a Kafka admin client's error once did)
        partial = spec["out"] + ".partial"
        with open(partial, "w") as f:
            json.dump(result, f)
        os.replace(partial, spec["out"])


if __name__ == "__main__":
    main()
