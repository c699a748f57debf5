"""Plain data for HBase mutations, table names and column families: no I/O. Cells are part of the
event model (cdcflow.events.cells); the client reads and writes them too."""

from __future__ import annotations

from dataclasses import dataclass, field

from cdcflow.events.cells import CellType

# HBase's "latest" timestamp: the server replaces it with its own clock.
LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF


@dataclass(frozen=True)
class TableName:
    namespace: str
    qualifier: str

    @classmethod
    def parse(cls, name: str) -> TableName:
        namespace, sep, qualifier = name.partition(":")
        if not sep:
            namespace, qualifier = "default", name
        if not namespace or not qualifier:
            raise ValueError(f"invalid HBase table name {name!r}")
        return cls(namespace, qualifier)

    def __str__(self) -> str:
        return self.qualifier if self.namespace == "default" else f"{self.namespace}:{self.qualifier}"


@dataclass(frozen=True)
class ColumnFamily:
    """A column family to create. Replication scope 1 (GLOBAL) makes it visible to peers."""

    name: str
    max_versions: int = 1
    replication_scope: int = 1
    ttl_s: int | None = None  # TTL: cells older than this many seconds expire (None: never)

    def attributes(self) -> dict[str, str]:
        attrs = {"VERSIONS": str(self.max_versions), "REPLICATION_SCOPE": str(self.replication_scope)}
        if self.ttl_s is not None:
            attrs["TTL"] = str(self.ttl_s)
        return attrs


@dataclass(frozen=True)
class ColumnOp:
    """One column-level item of a mutation. `value` is unused for deletes."""

    family: bytes
    qualifier: bytes | None
    timestamp: int | None
    value: bytes = b""
    delete: CellType | None = None


@dataclass
class Mutation:
    """A row mutation: build it with Put / Delete / Increment / Append below."""

    row: bytes
    kind: str  # "put" | "delete" | "increment" | "append"
    timestamp: int | None = None
    ops: list[ColumnOp] = field(default_factory=list)


def Put(row: bytes, timestamp: int | None = None) -> PutBuilder:
    return PutBuilder(Mutation(row, "put", timestamp))


def Delete(row: bytes, timestamp: int | None = None) -> DeleteBuilder:
    """A delete; with no column ops it deletes the whole row (all families) up to `timestamp`."""
    return DeleteBuilder(Mutation(row, "delete", timestamp))


def Increment(row: bytes) -> CounterBuilder:
    return CounterBuilder(Mutation(row, "increment"))


def Append(row: bytes) -> PutBuilder:
    return PutBuilder(Mutation(row, "append"))


@dataclass
class PutBuilder:
    mutation: Mutation

    def add(self, family: bytes, qualifier: bytes, value: bytes, timestamp: int | None = None) -> PutBuilder:
        self.mutation.ops.append(ColumnOp(family, qualifier, timestamp, value))
        return self


@dataclass
class CounterBuilder:
    mutation: Mutation

    def add(self, family: bytes, qualifier: bytes, amount: int) -> CounterBuilder:
        self.mutation.ops.append(ColumnOp(family, qualifier, None, amount.to_bytes(8, "big", signed=True)))
        return self


@dataclass
class DeleteBuilder:
    mutation: Mutation

    def family(self, family: bytes, timestamp: int | None = None) -> DeleteBuilder:
        """All columns of `family` with timestamp <= `timestamp` (default: all)."""
        self.mutation.ops.append(ColumnOp(family, None, timestamp, delete=CellType.DELETE_FAMILY))
        return self

    def family_version(self, family: bytes, timestamp: int) -> DeleteBuilder:
        """Every column of `family` at exactly `timestamp`."""
        self.mutation.ops.append(ColumnOp(family, None, timestamp, delete=CellType.DELETE_FAMILY_VERSION))
        return self

    def column(self, family: bytes, qualifier: bytes, timestamp: int | None = None) -> DeleteBuilder:
        """All versions of one column with timestamp <= `timestamp` (default: all)."""
        self.mutation.ops.append(ColumnOp(family, qualifier, timestamp, delete=CellType.DELETE_COLUMN))
        return self

    def column_version(self, family: bytes, qualifier: bytes, timestamp: int | None = None) -> DeleteBuilder:
        """Exactly one version of one column (default: the latest)."""
        self.mutation.ops.append(ColumnOp(family, qualifier, timestamp, delete=CellType.DELETE))
        return self
