"""cdcflow's compiled hot path (Rust, built from native/ by maturin). See native/src/lib.rs."""

from collections.abc import Mapping
from typing import Any

def hbase_records(
    block: bytes,
    entries: list[tuple[int, tuple[bytes, bytes] | None]],
    schema_id: str,
    now_ms: int,
    max_record: int,
) -> list[tuple[int, bytes, bytes, int]] | None: ...
def mysql_rows(
    body: bytes,
    p: int,
    kind: int,
    columns: tuple[tuple[str, int, int, int], ...],
    present: list[int],
    present_after: list[int],
) -> list[tuple[dict[str, object] | None, dict[str, object] | None]] | None: ...
def debezium_avro_rows(
    rows: tuple[tuple[dict[str, object] | None, dict[str, object] | None], ...],
    kind: int,
    plan: list[tuple[str, int, bool, int]],
    key_plan: list[tuple[str, int, bool, int]],
    value_header: bytes,
    key_header: bytes | None,
    source_prefix: bytes,
    source_db: bytes,
    source_table: bytes,
    ts_ms: int,
    server_id: int,
    gtid: str | None,
    file: str,
    pos: int,
    seq: int,
    event_index: int,
    transaction_id: str,
    order: int,
    table_order: int,
    now_us: int,
    tombstones: bool,
    with_images: bool,
) -> tuple[list[tuple[bytes | None, bytes | None, object]], int, int] | None: ...
def hbase_multi_results(
    body: bytes,
    cell_class: type,
    types: Mapping[int, object],
) -> list[list[tuple[int, list[Any]]]] | None: ...
