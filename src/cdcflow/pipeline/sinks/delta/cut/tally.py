"""Which source transaction is the newest a sink holds whole, with every one before it: the rule, without I/O.

Inputs: the transaction records read so far (events/transactions.py: per transaction, the change events it
published per table) and the distinct changes the sink's change log holds per (table, transaction). A
transaction is complete when, for every table of it the sink takes, the log holds exactly as many distinct
changes of it as its record counts (tables the sink does not take count for nothing). The cut moves over the
records in position order and stops at the first transaction that is not complete: every transaction up to the
cut is whole in the sink, so reading every table as of the cut shows the source as it was after that commit.

More changes than the record counts stops the cut too, as a problem it reports (two transactions with one
position: MariaDB GTID domains that number their transactions apart, which positions do not tell apart).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cdcflow.events.transactions import TransactionEnd


@dataclass(frozen=True)
class Pending:
    """A transaction record read and not yet passed by the cut, with where it is in the transaction topic."""

    end: TransactionEnd
    offset: int


@dataclass(frozen=True)
class Advance:
    cut: Pending | None  # the newest complete transaction now (None: the cut did not move)
    pending: dict[int, Pending] = field(default_factory=dict)  # the rest, by position
    waiting_for: dict[str, tuple[int, int]] = field(default_factory=dict)  # first incomplete: table -> (have, want)
    problem: str | None = None


def add_records(pending: dict[int, Pending], records: Iterable[Pending], cut_seq: int | None) -> None:
    """Records into `pending`: one per position (a capture that resumed sends a transaction's record again),
    the earliest copy's offset kept; records at or before the cut are done already."""
    for record in records:
        seq = record.end.seq
        if cut_seq is not None and seq <= cut_seq:
            continue
        known = pending.get(seq)
        if known is None or record.offset < known.offset:
            pending[seq] = record


def advance(pending: Mapping[int, Pending], applied: Mapping[tuple[str, int], int],
            takes: Callable[[str], bool]) -> Advance:  # fmt: skip
    """Walk `pending` in position order while each transaction is complete. `applied`: distinct changes the log
    holds per ("db.table", position); `takes`: whether the sink takes a table's changes at all."""
    cut: Pending | None = None
    order = sorted(pending)
    for i, seq in enumerate(order):
        record = pending[seq]
        missing: dict[str, tuple[int, int]] = {}
        over: list[str] = []
        for table, want in record.end.counts.items():
            if not takes(table):
                continue
            have = applied.get((table, seq), 0)
            if have < want:
                missing[table] = (have, want)
            elif have > want:
                over.append(f"{table}: {have} changes at position {seq}, its record ({record.end.id}) says {want}")
        if over:
            problem = "the change log holds more changes than the transaction record counts: " + "; ".join(over)
            return Advance(cut, {s: pending[s] for s in order[i:]}, {}, problem)
        if missing:
            return Advance(cut, {s: pending[s] for s in order[i:]}, missing)
        cut = record
    return Advance(cut, {})
