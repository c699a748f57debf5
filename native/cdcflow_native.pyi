"""cdcflow's compiled hot path (Rust, built from native/ by maturin). See native/src/lib.rs."""

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
