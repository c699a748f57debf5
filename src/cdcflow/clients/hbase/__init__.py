"""HBase client for tests, admin and verification.

The rest of cdcflow depends on the `HBaseClient` protocol below, not on an implementation.
The one implementation, `NativeHBaseClient`, speaks HBase's native RPC with our own protobuf
subset; docs/decisions/0001-hbase-client.md records why (Thrift2 and REST servers are not
published for HBase 2.6 -hadoop3 on Maven Central; hbase-driver drops timestamps in scans).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from cdcflow.clients.hbase.model import ColumnFamily
from cdcflow.clients.hbase.native import MutationLike, NativeHBaseClient
from cdcflow.events.cells import Cell


class HBaseClient(Protocol):
    def ping(self) -> bool: ...
    def list_tables(self) -> list[str]: ...
    def table_exists(self, table: str) -> bool: ...
    def create_table(
        self, table: str, families: Sequence[ColumnFamily | str], split_keys: Sequence[bytes] = ()
    ) -> None: ...
    def delete_table(self, table: str) -> None: ...
    def family_attributes(self, table: str) -> dict[str, dict[str, str]]: ...
    def mutate(self, table: str, mutation: MutationLike) -> list[Cell]: ...
    def mutate_batch(self, table: str, mutations: Sequence[MutationLike]) -> None: ...
    def get_rows(self, table: str, rows: Sequence[bytes]) -> dict[bytes, list[Cell]]: ...
    def scan(
        self,
        table: str,
        *,
        start_row: bytes = b"",
        stop_row: bytes = b"",
        max_versions: int = 1,
        batch_rows: int = 500,
    ) -> Iterator[Cell]: ...
    def scan_rows(
        self,
        table: str,
        *,
        start_row: bytes = b"",
        stop_row: bytes = b"",
        max_versions: int = 1,
        raw: bool = False,
        batch_rows: int = 500,
    ) -> Iterator[list[Cell]]: ...
    def close(self) -> None: ...


def connect(zk_quorum: str, znode_parent: str = "/hbase", op_timeout_s: float = 120.0) -> HBaseClient:
    """Open a client on the cluster whose ZooKeeper is `zk_quorum` ("host:port")."""
    return NativeHBaseClient(zk_quorum, znode_parent, op_timeout_s=op_timeout_s)


__all__ = ["HBaseClient", "NativeHBaseClient", "connect"]
