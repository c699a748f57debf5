"""The consistent cut's rule (pipeline/sinks/delta/cut/tally.py) and the transaction records it reads
(events/transactions.py), on generated transactions."""

from __future__ import annotations

import random
import threading

import orjson
import pytest

from cdcflow.clients.kafka import KafkaEndpoint, KafkaRecord
from cdcflow.events.json_codec import MalformedEvent
from cdcflow.events.transactions import TransactionEnd, read_transaction_record, transaction_record
from cdcflow.pipeline.sinks.delta.cut import tracker
from cdcflow.pipeline.sinks.delta.cut.tally import Pending, add_records, advance

TABLES = ["shop.accounts", "shop.lines", "shop.audit"]


def _transactions(rng: random.Random, n: int) -> list[TransactionEnd]:
    seq, out = 100, []
    for _ in range(n):
        seq += rng.randint(1, 3)  # transactions of tables nobody captures leave gaps
        tables = rng.sample(TABLES, rng.randint(1, 3))
        out.append(TransactionEnd("src", f"0-1-{seq}", seq, seq * 1000, {t: rng.randint(1, 4) for t in tables}))
    return out


def test_the_cut_is_the_last_transaction_before_the_first_one_not_whole_in_the_sink() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        ends = _transactions(rng, rng.randint(1, 30))
        takes = set(rng.sample(TABLES, 2))  # the sink takes two of the three tables
        applied: dict[tuple[str, int], int] = {}
        for end in ends:
            for table, n in end.counts.items():
                if rng.random() < 0.9:
                    applied[(table, end.seq)] = n
                else:
                    applied[(table, end.seq)] = rng.randrange(n)  # some of it still on its way
        pending = {e.seq: Pending(e, i) for i, e in enumerate(ends)}
        moved = advance(pending, applied, takes.__contains__)
        # the oracle: the newest transaction with every one up to it whole in the tables the sink takes
        whole = [all(applied.get((t, e.seq), 0) == n for t, n in e.counts.items() if t in takes) for e in ends]
        prefix = next((i for i, ok in enumerate(whole) if not ok), len(ends))
        expected = ends[prefix - 1] if prefix else None
        assert (moved.cut.end if moved.cut else None) == expected, seed
        assert sorted(moved.pending) == [e.seq for e in ends[prefix:]]
        if prefix < len(ends):
            first = ends[prefix]
            assert moved.waiting_for == {t: (applied.get((t, first.seq), 0), n) for t, n in first.counts.items()
                                         if t in takes and applied.get((t, first.seq), 0) < n}  # fmt: skip


def test_more_changes_than_the_record_counts_stops_the_cut_with_a_problem() -> None:
    a = TransactionEnd("src", "0-1-1", 1, 1000, {"shop.accounts": 2})
    b = TransactionEnd("src", "0-1-2", 2, 2000, {"shop.accounts": 1})
    moved = advance({1: Pending(a, 0), 2: Pending(b, 1)}, {("shop.accounts", 1): 2, ("shop.accounts", 2): 3},
                    lambda _t: True)  # fmt: skip
    assert moved.cut == Pending(a, 0) and list(moved.pending) == [2]
    assert moved.problem and "3 changes at position 2" in moved.problem


def test_records_read_twice_are_kept_once_from_their_first_copy_and_records_behind_the_cut_are_dropped() -> None:
    ends = _transactions(random.Random(3), 5)
    pending: dict[int, Pending] = {}
    add_records(pending, [Pending(e, i) for i, e in enumerate(ends)], cut_seq=ends[1].seq)
    add_records(pending, [Pending(e, 10 + i) for i, e in enumerate(ends)], cut_seq=ends[1].seq)  # sent again
    assert {s: p.offset for s, p in pending.items()} == {e.seq: i for i, e in enumerate(ends) if i > 1}


def test_transaction_records_read_back_and_refuse_anything_else() -> None:
    end = TransactionEnd("src", "0-1-7", 7, 7000, {"shop.accounts": 2, "shop.lines": 1})
    key, value = transaction_record(end)
    assert key == b"src" and read_transaction_record(value) == end and end.event_count == 3
    doc = orjson.loads(value)
    bad = [b"not json", b"[]", orjson.dumps({**doc, "schema": "x"}), orjson.dumps({**doc, "pos": ["7"]}),
           orjson.dumps({**doc, "data_collections": [{"data_collection": "t", "event_count": -1}]}),
           orjson.dumps({k: v for k, v in doc.items() if k != "ts_ms"})]  # fmt: skip
    for value in bad:
        with pytest.raises(MalformedEvent):
            read_transaction_record(value)


def test_rounds_from_two_threads_read_each_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fold thread's upkeep and an --available-now run's last step (or a job's own call) may both move the
    cut: their rounds take turns, so no record is read twice (the unreadable one below is counted once)."""
    end = TransactionEnd("src", "0-1-7", 7, 7000, {"shop.accounts": 1})
    records = [KafkaRecord("txn", 0, 0, b"src", transaction_record(end)[1]),
               KafkaRecord("txn", 0, 1, b"src", b"{not a transaction record")]  # fmt: skip
    inside, reads = threading.Event(), []

    def read_from(_bootstrap: object, _topic: str, _partition: int, offset: int, _most: int) -> list[KafkaRecord]:
        reads.append(offset)
        if len(reads) == 1:
            inside.wait(1.0)  # the first round waits for a second one to come in beside it, if one can
        else:
            inside.set()
        return [r for r in records if r.offset >= offset]

    class NoChanges:
        def collect(self) -> list[object]:
            return []

    monkeypatch.setattr(tracker, "read_from", read_from)
    monkeypatch.setattr(tracker, "read_cuts", lambda _spark, _path: {})
    monkeypatch.setattr(tracker, "write_cuts", lambda _spark, _path, _cuts: None)
    monkeypatch.setattr(tracker, "past_the_cut", lambda *_args: NoChanges())
    cuts = tracker.CutTracker("s", "/log", [tracker.TransactionSource("src", "txn", "cdcflow.src")],
                              KafkaEndpoint.of("localhost:1"), None, every_s=60.0)  # fmt: skip
    rounds = [threading.Thread(target=cuts.step, args=(None, 5, True)) for _ in range(2)]
    for t in rounds:
        t.start()
    for t in rounds:
        t.join(10.0)
    assert reads == [0, 2] and cuts.malformed == 1 and cuts.steps == 2
    assert list(cuts._pending["src"]) == [7]  # the readable record kept once
