"""A randomized HBase workload: the demo behind `make run`, the pipeline e2e tests and benchmarks.

Every put has a unique timestamp, but about one in five is written "in the past" (older than
puts already written), so versions arrive out of order. Deletes of every type use explicit
timestamps from the same clock, so they mask what came before them in that clock, not the
whole future. A row appears at most once per batch, so each mutation becomes exactly one change
event (HBase merges one row's mutations of one batch into one WAL entry).

Why unique timestamps: if the same (row, column, timestamp) is written twice with different
values, HBase keeps the later write; an HBase copy that replays the older write after the newer
one would keep the older value (a limit of HBase, not of cdcflow; the Delta state table breaks
such ties by position). Real clients that let the server assign timestamps avoid it in practice.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from cdcflow.clients.hbase import HBaseClient
from cdcflow.clients.hbase.model import ColumnFamily, Delete, Mutation, Put

FAMILIES = (ColumnFamily("cf", max_versions=1000), ColumnFamily("cg", max_versions=1000))
COLUMNS = ((b"cf", b"name"), (b"cf", b"n"), (b"cf", b"a"), (b"cf", b"b"), (b"cg", b"x"), (b"cg", b"y"))
# Values decodable with the demo's typed columns: cf:name utf8, cf:n long.
TYPED_COLUMNS = {"cf:name": "utf8", "cf:n": "long"}


@dataclass
class HBaseWorkload:
    client: HBaseClient
    tables: Sequence[str]
    rows_per_table: int = 2000
    seed: int = 0
    mutations: int = 0  # written so far
    _clock: int = 100
    _rng: random.Random = field(init=False)
    _put_ts: dict[tuple[str, bytes, bytes, bytes], list[int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def create_tables(self, with_copies: bool = False, exist_ok: bool = False) -> None:
        """The source tables (four regions each) and, optionally, empty `<table>_copy` targets.
        Copies are not replicated (scope 0): capturing them would feed the pipeline its own output."""
        splits = [b"row-%05d" % (self.rows_per_table * i // 4) for i in (1, 2, 3)]
        existing = set(self.client.list_tables()) if exist_ok else set()
        for t in self.tables:
            if t not in existing:
                self.client.create_table(t, list(FAMILIES), split_keys=splits)
            if with_copies and f"{t}_copy" not in existing:
                copy = [ColumnFamily(f.name, f.max_versions, replication_scope=0) for f in FAMILIES]
                self.client.create_table(f"{t}_copy", copy, split_keys=splits)

    def _ts(self) -> int:
        self._clock += 1
        back = self._rng.randint(1, 50) if self._rng.random() < 0.2 else 0
        # unique: two clocks that differ by less than 1000 never share (clock % 1000)
        return (self._clock - back) * 1000 + self._clock % 1000

    def _row(self) -> bytes:
        return b"row-%05d" % self._rng.randrange(self.rows_per_table)

    def _mutation(self, table: str, row: bytes) -> Mutation:
        rng = self._rng
        kind = rng.random()
        ts = self._ts()
        if kind < 0.62:
            p = Put(row)
            for family, qualifier in rng.sample(COLUMNS, rng.randint(1, 4)):
                if qualifier == b"name":
                    value = f"name-{rng.randrange(10**6)}-é".encode()
                elif qualifier == b"n":
                    value = rng.randrange(-(2**40), 2**40).to_bytes(8, "big", signed=True)
                else:
                    value = rng.randbytes(rng.randrange(0, 40))
                p.add(family, qualifier, value, ts)
                self._put_ts.setdefault((table, row, family, qualifier), []).append(ts)
            return p.mutation
        family, qualifier = rng.choice(COLUMNS)
        seen = self._put_ts.get((table, row, family, qualifier))
        if kind < 0.72 and seen:
            return Delete(row).column_version(family, qualifier, rng.choice(seen)).mutation
        if kind < 0.82:
            return Delete(row).column(family, qualifier, ts).mutation
        if kind < 0.90:
            return Delete(row).family(family, ts).mutation
        if kind < 0.94 and seen:
            return Delete(row).family_version(family, rng.choice(seen)).mutation
        return Delete(row, timestamp=ts).mutation  # the whole row

    def step(self, batch: int = 500) -> int:
        """Write one batch (distinct rows) to a random table; returns the mutations written."""
        table = self._rng.choice(self.tables)
        rows = {self._row() for _ in range(batch)}
        muts = [self._mutation(table, r) for r in sorted(rows)]
        self.client.mutate_batch(table, muts)
        self.mutations += len(muts)
        return len(muts)

    def run(self, total: int, batch: int = 500) -> int:
        while self.mutations < total:
            self.step(min(batch, total - self.mutations))
        return self.mutations
