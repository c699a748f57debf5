"""A state table's fold record: which change log feeds it and up to which log version it is folded.

Kept beside the state table as `<state path>.cdcflow.json` (not inside it: Delta refuses to create
a table in a folder that already holds files), written by the sink when it first logs a change of
the table and again after each fold. It makes a state path self-describing: the current view of
`<state path>` is the table plus the log's changes after `folded_version`.

The record is written *after* the fold's MERGE commits. A fold killed in between leaves the old
version in the record, so the next fold (and every view meanwhile) applies those changes again:
both merges are idempotent (a position guard; HBase's cell rules), so the result is the same.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from pyspark.sql import SparkSession

RECORD_SUFFIX = ".cdcflow.json"
DELETES_SUFFIX = ".cdcflow_deletes"
HISTORY_SUFFIX = ".cdcflow_history"
Layout = Literal["hbase", "typed", "json"]


@dataclass(frozen=True)
class FoldRecord:
    log: str  # the change log's path
    source: str
    db: str
    table: str
    layout: Layout
    folded_version: int = -1  # log version folded into the state table (-1: nothing yet)
    kept_versions: int = 1  # HBase: unmasked versions kept per column
    typed_columns: dict[str, str] = field(default_factory=dict)  # HBase: decoded copies of visible values
    mysql_columns: list[dict[str, Any]] = field(default_factory=list)  # typed MySQL: the known shape
    # HBase: the source families' TTLs in seconds (families without one left out); views hide older cells
    family_ttls: dict[str, int] = field(default_factory=dict)
    # MySQL: the position of the newest truncate folded (older changes are gone; also in the deletes table)
    truncated_at: list[int] | None = None
    # HBase: the newest truncate folded: every cell older than this (ms) is gone, and stays out when it comes late
    emptied_before_ts: int | None = None
    # MySQL: every version is kept in the history table beside the state (`history_path`), folded with it
    history: bool = False
    history_seeded: bool = False  # the history table holds every change the log held when history began
    history_truncates: list[Any] = field(default_factory=list)  # [[position, source time], ...] in the history
    track_history_on: list[str] | None = None  # the history view's tracked columns (None: every column)
    # How the history is kept: 1, every version in the history table, merged by each fold (decision 0025; JSON
    # layout); 2, the closed versions there, appended, and the open ones the state's rows (decision 0027; typed)
    history_format: int = 1
    # Format 2: the state table's version after the last fold with history (its Change Data Feed is read from
    # the next one; the reads take the state's rows as of it)
    history_state_version: int | None = None
    # Format 2: the newest transaction (a position's first element) folded into the table so far, or None when not
    # known; a fold whose changes all come after it has no late changes to look for
    history_folded_seq: int | None = None
    # Format 2: a fold's append to the history may have committed without its record (set before the append)
    history_appending: bool = False
    folded_at_ms: int | None = None
    fold_ms: int | None = None  # how long the last fold took
    folded_rows: int | None = None  # changes read by the last fold

    def folded(self, version: int, at_ms: int, took_ms: int, rows: int) -> FoldRecord:
        return replace(self, folded_version=version, folded_at_ms=at_ms, fold_ms=took_ms, folded_rows=rows)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FoldRecord:
        doc = json.loads(text)
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in doc.items() if k in known})


def record_path(state_path: str) -> str:
    return state_path.rstrip("/") + RECORD_SUFFIX


def deletes_path(state_path: str) -> str:
    """A MySQL state table's deleted keys (a Delta table beside it: key, pos, source_ts_ms; appended
    to, a key may have several rows). A fold deletes the row from the state table (its Change Data
    Feed reports a delete) and appends the key's delete position here, so an older change replayed
    later cannot bring the row back."""
    return state_path.rstrip("/") + DELETES_SUFFIX


def history_path(state_path: str) -> str:
    """A MySQL state table's history (SCD type 2; a Delta table beside it, `history/`): one row per version of
    a row, with the position and time it was valid from and to."""
    return state_path.rstrip("/") + HISTORY_SUFFIX


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    sc = spark.sparkContext
    assert sc._jvm is not None and sc._jsc is not None
    jpath = sc._jvm.org.apache.hadoop.fs.Path(path)
    return jpath, jpath.getFileSystem(sc._jsc.hadoopConfiguration())


def read_record(spark: SparkSession, state_path: str) -> FoldRecord | None:
    """The fold record of a state table, or None (a table written before merge-on-read)."""
    text = read_text(spark, record_path(state_path))
    return None if text is None else FoldRecord.from_json(text)


def write_record(spark: SparkSession, state_path: str, record: FoldRecord) -> None:
    write_text(spark, record_path(state_path), record.to_json())


def read_text(spark: SparkSession, path: str) -> str | None:
    """A small file's text through Hadoop's file system (any scheme Spark reads), None if absent.

    On the local file system a rename by `write_text` moves the file and then its checksum file: a read in
    between finds the new text with the old checksum (ChecksumException). The text itself is whole (the
    rename is atomic), so such a read is simply done again."""
    for attempt in range(_CHECKSUM_RETRIES):
        try:
            return _read_text_once(spark, path)
        except Exception as exc:
            if "ChecksumException" not in str(exc) or attempt == _CHECKSUM_RETRIES - 1:
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


_CHECKSUM_RETRIES = 20


def _replace_local(path: str, text: str) -> None:
    """On the local file system Hadoop's rename with OVERWRITE deletes the file and then renames (a reader in
    between finds no record: seen as "never folded") and leaves the checksum file a step behind. POSIX rename
    replaces at once; the record is written without a Hadoop checksum file (a stale one is removed first, so a
    reader never checks new text against it)."""
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)  # the first record of a table comes before its folder (Hadoop made it)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    crc = os.path.join(folder, f".{name}.crc")
    if os.path.exists(crc):
        os.unlink(crc)
    os.replace(tmp, path)


def _read_text_once(spark: SparkSession, path: str) -> str | None:
    jpath, fs = _fs(spark, path)
    if not fs.exists(jpath):
        return None
    stream = fs.open(jpath)
    try:
        sc = spark.sparkContext
        assert sc._jvm is not None
        return str(sc._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Replace a small file at once: written beside it, then renamed over it (a reader sees the old
    text or the new, never half of it, never no file)."""
    target, fs = _fs(spark, path)
    if str(fs.getScheme()) == "file":
        _replace_local(str(target.toUri().getPath()), text)
        return
    tmp, fs = _fs(spark, path + ".tmp")
    out = fs.create(tmp, True)
    try:
        out.write(bytearray(text.encode()))
    finally:
        out.close()
    sc = spark.sparkContext
    assert sc._jvm is not None and sc._jsc is not None and sc._gateway is not None
    jvm = sc._jvm
    dst = jvm.org.apache.hadoop.fs.Path(path)
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(dst.toUri(), sc._jsc.hadoopConfiguration())
    options = sc._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    options[0] = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
    context.rename(tmp, dst, options)
    # the local file system leaves a checksum file of the temporary name behind
    crc = jvm.org.apache.hadoop.fs.Path(f"{tmp.getParent()}/.{tmp.getName()}.crc")
    if fs.exists(crc):
        fs.delete(crc, False)
