"""HBase rows for upserting consumers (`hbase.output.format: upsert`, decision 0018), proven by Flink SQL.

Two peers capture the same tables under a randomized workload (puts in and out of timestamp order, every
delete type, whole-row deletes): one writes JSON values, one Avro values registered in the stack's schema
registry. Each changed row is read back from HBase and published whole, or as a tombstone when it is gone.
Then (1) the last record of each key in each topic equals the source row by row (a tombstone exactly where
the row is gone), and (2) Flink SQL's `upsert-kafka` connector (a raw key, `json` and `avro-confluent`
values) rebuilds each table equal to a scan of the source.
"""

from __future__ import annotations

import base64
import io
import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import fastavro
import orjson

from cdcflow.clients import kafka as k
from cdcflow.clients.hbase import HBaseClient, NativeHBaseClient, admin
from cdcflow.clients.registry import SchemaRegistry
from cdcflow.dev.demo.hbase_workload import HBaseWorkload
from cdcflow.dev.testing.flink import FlinkReader, FlinkTable
from cdcflow.events.debezium.avro import split_frame

from .hbase_capture import PeerSetup

ROUTE = {"table": "*", "values": {"cf:name": "utf8", "cf:n": "long"}, "fields": {"cf:name": "name", "cf:n": "n"}}
FLINK_COLUMNS = [("row", "BYTES"), ("name", "STRING"), ("n", "BIGINT"), ("cells", "MAP<STRING, BYTES>")]


def expected_rows(client: HBaseClient, table: str) -> dict[bytes, dict[str, Any]]:
    """The source's rows as the upsert form must carry them, made here from a scan (newest versions)."""
    rows: dict[bytes, dict[str, Any]] = {}
    for c in client.scan(table, max_versions=1):
        row = rows.setdefault(c.row, {"row": c.row, "name": None, "n": None, "cells": {}})
        column = f"{c.family.decode()}:{c.qualifier.decode()}"
        if column == "cf:name":
            row["name"] = c.value.decode()
        elif column == "cf:n" and len(c.value) == 8:
            row["n"] = struct.unpack(">q", c.value)[0]
        else:
            row["cells"][column] = c.value
    return rows


def json_row(value: bytes) -> dict[str, Any]:
    v = orjson.loads(value)
    return {"row": base64.b64decode(v["row"]), "name": v["name"], "n": v["n"],
            "cells": {col: base64.b64decode(b) for col, b in v["cells"].items()}}  # fmt: skip


def avro_reader(registry_url: str) -> Callable[[bytes], dict[str, Any]]:
    registry = SchemaRegistry(registry_url)

    def read(value: bytes) -> dict[str, Any]:
        schema_id, body = split_frame(value)
        schema = fastavro.parse_schema(orjson.loads(registry.schema(schema_id)))
        return dict(fastavro.schemaless_reader(io.BytesIO(body), schema))  # type: ignore[arg-type]

    return read


def last_per_key(
    bootstrap: str, topic: str, read: Callable[[bytes], dict[str, Any]], counts: dict[str, int] | None = None
) -> dict[bytes, Any]:
    """What a compacted topic keeps: the last record of each key (a tombstone removes the key). `counts`:
    records, and tombstones that removed a row a record had given."""
    rows: dict[bytes, Any] = {}
    total = sum(k.end_offsets(bootstrap, topic).values())
    removed = 0
    for rec in k.consume(bootstrap, topic, expected=total, timeout_s=60):
        assert rec.key is not None
        if rec.value is None:
            removed += rows.pop(rec.key, None) is not None
        else:
            rows[rec.key] = read(rec.value)
    if counts is not None:
        counts.update(records=total, removed=removed)
    return rows


def test_upsert_rows_in_json_and_avro_rebuild_the_source_in_flink(
    hbase_client: HBaseClient, peer_setup: PeerSetup, hbase: dict[str, Any], kafka: dict[str, Any],
    registry: dict[str, Any], flink_reader: FlinkReader,
) -> None:  # fmt: skip
    bootstrap = kafka["bootstrap_servers"]
    tables = [f"{peer_setup.name}_a", f"{peer_setup.name}_b"]
    workload = HBaseWorkload(hbase_client, tables, rows_per_table=300, seed=18)
    workload.create_tables()
    as_avro = PeerSetup(f"p{uuid.uuid4().hex[:10]}", hbase, kafka, peer_setup.workdir)
    peer_setup.write_config(output={"format": "upsert"}, routes=[ROUTE])
    as_avro.write_config(kafka={"schema_registry_url": registry["url"]},
                         output={"format": "upsert", "serialization": "avro"}, routes=[ROUTE])  # fmt: skip
    try:
        for setup in (peer_setup, as_avro):
            setup.add_peer(*tables)
            setup.start()
        workload.step(50)
        for setup in (peer_setup, as_avro):  # replication flows before the rest is written
            while not any(sum(k.end_offsets(bootstrap, f"{setup.name}.default.{t}").values()) for t in tables):
                time.sleep(0.2)
        while workload.mutations < 4000:
            workload.step(50)
            time.sleep(0.15)  # spread over many calls: each row is read back many times, between its edits

        readers = {peer_setup.name: json_row, as_avro.name: avro_reader(registry["url"])}
        deadline = time.monotonic() + 120
        for table in tables:
            want = expected_rows(hbase_client, table)
            assert len(want) > 100
            for setup in (peer_setup, as_avro):
                topic = f"{setup.name}.default.{table}"
                counts: dict[str, int] = {}
                while (got := last_per_key(bootstrap, topic, readers[setup.name], counts)) != want:
                    missing = sorted(set(want) - set(got))[:3]
                    differ = [r for r in want if r in got and got[r] != want[r]][:3]
                    assert time.monotonic() < deadline, (
                        f"{topic}: {len(got)} rows, {len(want)} in the source; missing {missing}, extra "
                        f"{sorted(set(got) - set(want))[:3]}, differing {[(want[r], got[r]) for r in differ]}"
                    )
                    time.sleep(1)
                # each row many times, rows gone after they were given: the reads interleaved with the edits
                assert counts["records"] > 3 * len(want) and counts["removed"] > 10, (topic, counts, len(want))
        logs = peer_setup.full_logs() + as_avro.full_logs()
        assert "output format: upsert, json" in logs and "output format: upsert, avro" in logs
    finally:
        as_avro.stop_all()
        try:
            as_avro.cli("hbase", "peer", "remove", "--config", str(as_avro.config_path))
        except AssertionError:
            pass

    # A third-party consumer: Flink SQL's upsert-kafka rebuilds every table from either topic.
    flink_tables = [FlinkTable(f"{peer_setup.name}.default.{t}", FLINK_COLUMNS, ["row"], "json",
                               connector="upsert-kafka") for t in tables]  # fmt: skip
    flink_tables += [FlinkTable(f"{as_avro.name}.default.{t}", FLINK_COLUMNS, ["row"], "avro-confluent",
                                {"value.avro-confluent.url": registry["url"]}, connector="upsert-kafka")
                     for t in tables]  # fmt: skip
    read = flink_reader.read_tables(bootstrap, flink_tables)
    for t in flink_tables:
        table = t.topic.rsplit(".", 1)[1]
        rebuilt = {}
        for r in read[t.topic]["rows"]:
            row = base64.b64decode(r["row"]["$bytes"])
            cells = {col: base64.b64decode(v["$bytes"]) for col, v in (r["cells"] or {}).items()}
            rebuilt[row] = {"row": row, "name": r["name"], "n": r["n"], "cells": cells}
        want = expected_rows(hbase_client, table)
        assert rebuilt == want, f"{t.topic} ({t.format}): Flink rebuilt {len(rebuilt)} rows, the source has {len(want)}"
        assert read[t.topic]["changelog"]["-D"] > 0, f"Flink took no tombstone as a delete: {read[t.topic]}"


def test_rows_that_cannot_be_read_back_and_a_killed_peer_lose_nothing(
    hbase_client: HBaseClient, peer_setup: PeerSetup, kafka: dict[str, Any]
) -> None:
    """The read-back's error path, forced: HBase ships edits of a table that is offline (disabled after the
    writes), so every read of them fails; each call is answered with an error (`ReadBackFailed` logged) and
    HBase sends it again. The peer is SIGKILLed while those calls fail, restarted while writes go on, the
    table comes back: the last record of each key equals the source row."""
    assert isinstance(hbase_client, NativeHBaseClient)
    bootstrap = kafka["bootstrap_servers"]
    table = f"{peer_setup.name}_t"
    topic = f"{peer_setup.name}.default.{table}"
    workload = HBaseWorkload(hbase_client, [table], rows_per_table=200, seed=7)
    workload.create_tables()
    peer_setup.write_config(output={"format": "upsert", "read_timeout_s": 1}, routes=[ROUTE])
    peer_setup.add_peer(table)
    first = peer_setup.start()
    workload.step(100)
    deadline = time.monotonic() + 60
    while not sum(k.end_offsets(bootstrap, topic).values()):  # replication flows
        assert time.monotonic() < deadline, peer_setup.logs()
        time.sleep(0.2)

    # HBase holds the next edits while the peer is disabled; the table is offline when it ships them
    admin.disable_peer(hbase_client, peer_setup.name)
    workload.step(300)
    hbase_client.disable_table(table)
    admin.enable_peer(hbase_client, peer_setup.name)
    deadline = time.monotonic() + 90
    while "ReadBackFailed: " not in peer_setup.full_logs():  # a call failed (HBase sends it again)
        assert time.monotonic() < deadline, f"no read-back failed:\n{peer_setup.logs()}"
        time.sleep(0.2)
    peer_setup.kill(first)  # while HBase keeps sending those calls
    assert first.returncode == -9
    peer_setup.start(1)
    hbase_client.enable_table(table)
    workload.step(300)  # writes go on under the restarted peer

    want = expected_rows(hbase_client, table)
    deadline = time.monotonic() + 120
    while (got := last_per_key(bootstrap, topic, json_row)) != want:
        assert time.monotonic() < deadline, (
            f"{len(got)} rows in {topic}, {len(want)} in the source; missing {sorted(set(want) - set(got))[:3]}, "
            f"differing {[r for r in want if r in got and got[r] != want[r]][:3]}\n{peer_setup.logs()}"
        )
        time.sleep(1)
    assert "reading rows back from the source cluster failed" in peer_setup.full_logs()
