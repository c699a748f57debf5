"""The Delta sink's consistent cut after every batch (real Spark, Delta and Kafka), against what the test itself
delivered: transactions that change two tables reach the sink with the tables at different speeds (as two topics
read up to different offsets), a quarter of the changes twice, the transaction records (in Kafka) some twice and
one unreadable record among them; some folds in between. After each batch the cut must be the newest transaction
whose every change, and every earlier transaction's, the test has delivered (computed here from the deliveries),
and the tables read at it must equal the workload's own record of both tables after that transaction."""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from cdcflow.clients import kafka as k
from cdcflow.config.sinks import DeltaStateOptions
from cdcflow.dev.testing import soak_size
from cdcflow.events.debezium.envelope import transaction_begin, transaction_end
from cdcflow.events.json_codec import encode
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.events.transactions import TransactionEnd, transaction_record
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.envelope import events_of, parse
from cdcflow.pipeline.library import at_cut, consistent_cut
from cdcflow.pipeline.session import build_session
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink

SOURCE, DB = "bank", "shop"
TABLES = ("accounts", "transfers")
BASE_TS = 1_700_000_000_000
FIRST_SEQ = 500

Tables = dict[str, dict[int, int]]  # table -> id -> value


@dataclass(frozen=True)
class Change:
    table: str
    op: str  # c, u, d, t
    key: int | None
    value: int | None
    before: int | None
    pos: tuple[int, int, int]


class Bank:
    """The workload: transfers (two accounts and a transfer row), interest (accounts only), a transfer removed,
    now and then `transfers` truncated; it keeps the tables as they are after each transaction."""

    def __init__(self) -> None:
        self.rows: Tables = {t: {} for t in TABLES}
        self.changes: list[Change] = []
        self.seq = 0

    def change(self, table: str, key: int | None, value: int | None, op: str | None = None) -> None:
        before = self.rows[table].get(key) if key is not None else None
        kind = op or ("d" if value is None else "u" if before is not None else "c")
        self.changes.append(Change(table, kind, key, value, before, (self.seq, len(self.changes) + 1, 0)))
        if kind == "t":
            self.rows[table] = {}
        elif value is None:
            self.rows[table].pop(key, None)  # type: ignore[arg-type]
        else:
            self.rows[table][key] = value  # type: ignore[index]


def run_workload(rng: random.Random, transactions: int) -> tuple[list[list[Change]], list[tuple[int, Tables]]]:
    """The transactions' changes, and the tables after each transaction (with its position)."""
    bank = Bank()
    done: list[list[Change]] = []
    after: list[tuple[int, Tables]] = []
    next_transfer = 0
    for i in range(transactions):
        bank.seq, bank.changes = FIRST_SEQ + 2 * i, []  # (transactions of other tables between: gaps)
        accounts, transfers = bank.rows["accounts"], bank.rows["transfers"]
        roll = rng.random()
        if i == 0:
            for a in range(8):
                bank.change("accounts", a, 1000)
        elif roll < 0.04:
            bank.change("transfers", None, None, "t")
        elif roll < 0.12:
            for a in sorted(accounts):
                bank.change("accounts", a, accounts[a] + 1)
        elif roll < 0.18 and transfers:
            bank.change("transfers", min(transfers), None)
        else:
            a, b = rng.sample(sorted(accounts), 2)
            amount = rng.randint(1, 50)
            next_transfer += 1
            bank.change("accounts", a, accounts[a] - amount)
            bank.change("accounts", b, accounts[b] + amount)
            bank.change("transfers", next_transfer, amount)
        done.append(bank.changes)
        after.append((bank.seq, {t: dict(r) for t, r in bank.rows.items()}))
    return done, after


def event_bytes(c: Change) -> bytes:
    source = SourceInfo("mysql", SOURCE, DB, c.table, BASE_TS + c.pos[0], c.pos, extra={"gtid": f"0-1-{c.pos[0]}"})
    if c.op == "t":
        return encode(ChangeEvent(b"{}", Op.TRUNCATE, source, truncate={"cause": "truncate", "ddl": "TRUNCATE"}))
    key = json.dumps({"id": c.key}, separators=(",", ":")).encode()
    before = None if c.before is None else {"id": c.key, "v": c.before}
    after = None if c.value is None else {"id": c.key, "v": c.value}
    return encode(ChangeEvent(key, Op(c.op), source, before=before, after=after))


def events_frame(spark: SparkSession, values: list[bytes]) -> DataFrame:
    raw = spark.createDataFrame(
        [("t", 0, i, json.dumps(json.loads(v)["key"]).encode(), v) for i, v in enumerate(values)],
        "topic string, partition int, offset long, key binary, value binary",
    )
    return events_of(parse(raw))


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session("cdcflow-test-cut")


def _read(frames: dict[str, DataFrame]) -> Tables:
    out: Tables = {t: {} for t in TABLES}
    for name, frame in frames.items():
        for r in frame.collect():
            row = json.loads(r["after"])
            out[name.split(".", 1)[1]][row["id"]] = row["v"]
    return out


def test_the_cut_after_every_batch_is_the_newest_transaction_delivered_whole_and_reads_as_the_source_then(
    spark: SparkSession, kafka: dict[str, Any], tmp_path: Path
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    rng = random.Random(26)
    transactions, after = run_workload(rng, soak_size(100, 500))
    # the transaction records, as the capture writes them: in commit order, some again, one unreadable; in either
    # output format
    topic = f"cut-{uuid.uuid4().hex[:8]}-transactions"
    k.create_topic(bootstrap, topic, partitions=1)
    records: list[tuple[bytes | None, bytes | None]] = []
    for changes in transactions:
        counts: dict[str, int] = {}
        for c in changes:
            counts[f"{DB}.{c.table}"] = counts.get(f"{DB}.{c.table}", 0) + 1
        seq, gtid = changes[0].pos[0], f"0-1-{changes[0].pos[0]}"
        if rng.random() < 0.5:
            records.append(transaction_record(TransactionEnd(SOURCE, gtid, seq, BASE_TS + seq, counts)))
        else:  # the debezium format's BEGIN and END (the reader takes either; a capture writes one)
            records.append(transaction_begin(gtid, BASE_TS + seq, schemas=True))
            records.append(transaction_end(gtid, BASE_TS + seq, counts, schemas=True, seq=seq))
        if rng.random() < 0.1:
            records.append(records[rng.randrange(len(records))])  # a capture that resumed sends some again
    records.insert(len(records) // 2, (b"x", b"{not a transaction record"))
    k.produce_sync(bootstrap, topic, records)

    # each table's changes in order (a topic each), the two read at different speeds, a quarter twice
    queues = {t: [(c, event_bytes(c)) for changes in transactions for c in changes if c.table == t] for t in TABLES}
    options = DeltaStateOptions(path=str(tmp_path / "delta"), mysql_layout="json", consistent_cut=True,
                                fold_rows=10**9, fold_interval_s=10**6, register_in_catalog=False)  # fmt: skip
    endpoints = Endpoints(bootstrap_servers=bootstrap, transaction_topics=((SOURCE, topic, "cdcflow.bank"),))
    sink = DeltaStateSink("cut", options, endpoints)
    assert sink.cuts is not None
    delivered: set[tuple[str, tuple[int, int, int]]] = set()
    sent: list[bytes] = []
    batch_id, checked, moved = 0, 0, set()
    while any(queues.values()):
        batch: list[bytes] = []
        for t in TABLES:
            n = rng.choice([0, 0, 3, 8, 20])
            for c, value in queues[t][:n]:
                batch.append(value)
                delivered.add((c.table, c.pos))
            queues[t] = queues[t][n:]
        batch += rng.sample(sent, min(len(sent), len(batch) // 4))  # delivered twice
        sent += batch
        if not batch:
            continue
        sink.apply_batch(events_frame(spark, batch), batch_id)
        if batch_id % 7 == 3:
            sink.flush(spark)  # folds (and the cut) now and then
        sink.service.update_cut(force=True)
        batch_id += 1
        # the oracle: the newest transaction with it and every one before it delivered whole
        whole = [all((c.table, c.pos) in delivered for c in changes) for changes in transactions]
        prefix = next((i for i, ok in enumerate(whole) if not ok), len(whole))
        if prefix == 0:
            with pytest.raises(LookupError, match="no transaction of bank is whole"):
                consistent_cut(spark, options.path or "")
            continue
        cut = consistent_cut(spark, options.path or "")
        assert cut.position[0] == after[prefix - 1][0], (batch_id, cut)
        moved.add(cut.position[0])
        if (checked < soak_size(4, 20) and rng.random() < 0.2) or not any(queues.values()):  # (reads cost seconds)
            assert _read(at_cut(spark, options.path or "")) == after[prefix - 1][1], (batch_id, cut)
            checked += 1
    assert cut.position[0] == after[-1][0] and cut.gtid == f"0-1-{after[-1][0]}"
    assert len(moved) > 5 and checked >= 3, (moved, checked)
    assert sink.cuts.malformed == 1  # the unreadable record was read, logged and skipped
    status = sink.status()["consistent_cuts"][SOURCE]
    assert status["gtid"] == cut.gtid and status["pending_transactions"] == 0 and status["malformed_records"] == 1
    sink.close()
