"""HBase sink: writes every cell with its own timestamp and exact delete type, so an HBase → HBase
copy is exact. HBase's rules make it idempotent: rewriting a cell is a no-op, and a delete marker
masks puts at or below its timestamp whichever arrives first, so replays cannot resurrect data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from cdcflow.clients.hbase.model import Mutation
from cdcflow.events.json_codec import cell_from_json
from cdcflow.pipeline.sinks.base import Sink
from cdcflow.pipeline.sinks.hbase.mutations import cell_mutations
from cdcflow.pipeline.sinks.naming import mapped_table


def target_table(options: dict[str, Any], db: str, table: str) -> str:
    source = table if db == "default" else f"{db}:{table}"
    mapped = mapped_table(options.get("table_map", {}), db, table)
    return str(mapped) if mapped else f"{source}{options.get('table_suffix', '_copy')}"


class HBaseSink(Sink):
    def apply_batch(self, events: DataFrame, batch_id: int) -> None:
        hb = events.where(F.col("source.connector") == "hbase").select(
            F.unbase64(F.get_json_object("key", "$.row")).alias("row"),
            F.col("source.db").alias("db"),
            F.col("source.table").alias("table"),
            F.col("source.region").alias("region"),
            F.col("source.pos").alias("pos"),
            "cells",
        )
        zk = self.options.get("zk_quorum") or self.context["zk_quorum"]
        options = dict(self.options)
        hb.sortWithinPartitions("region", "pos").foreachPartition(lambda rows: _write_partition(rows, zk, options))


def _write_partition(rows: Iterator[Row], zk_quorum: str, options: dict[str, Any], batch_size: int = 500) -> None:
    from cdcflow.clients.hbase import connect  # on the executor

    client = connect(zk_quorum)
    pending: dict[str, list[Mutation]] = {}
    try:
        for r in rows:
            table = target_table(options, r["db"], r["table"])
            batch = pending.setdefault(table, [])
            row_key = bytes(r["row"])
            batch.extend(cell_mutations(row_key, (cell_from_json(row_key, c) for c in r["cells"])))
            if len(batch) >= batch_size:
                client.mutate_batch(table, batch)
                pending[table] = []
        for table, batch in pending.items():
            if batch:
                client.mutate_batch(table, batch)
    finally:
        client.close()
