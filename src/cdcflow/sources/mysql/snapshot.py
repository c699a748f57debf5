"""Initial snapshot of selected tables, interleaved with the binlog stream (the DBLog watermark algorithm).

Per chunk, on a separate SQL connection in a worker thread (so the binlog loop never waits for SQL):
  1. write a low watermark  (a row update of the watermark table: it appears in the binlog),
  2. SELECT the next chunk  (`WHERE pk > last ORDER BY pk LIMIT n`, one short statement, no locks),
  3. write a high watermark (only after the chunk's rows are handed over).
The capture loop keeps reading the binlog. Between the low and the high watermark it notes the key
of every change to the chunk's table; at the high watermark it emits the chunk's rows whose keys
were not changed in that window, as `op: r` events positioned at the high watermark. A row changed
in the window is left to its binlog event, which is newer than the SELECT; a row the SELECT saw is
older than any later binlog event (their positions are greater). So the hand-off neither loses nor
duplicates anything, and no lock is held for longer than one chunk's SELECT.

Progress (last key and row count per table) rides in the stream checkpoint, committed with the
high watermark's transaction only once every row of the chunk is acknowledged; after a crash the
snapshot resumes from the last acknowledged chunk.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from cdcflow.clients.mysql import MySqlEndpoint, connect, execute, query
from cdcflow.errors import CdcflowError, ServiceUnavailable, TerminalError
from cdcflow.events.model import ChangeEvent, Op, SourceInfo
from cdcflow.patterns import matches_any
from cdcflow.sources.mysql.changes import TxnContext
from cdcflow.sources.mysql.selected_values import render_selected, table_columns

log = logging.getLogger(__name__)


@dataclass
class Chunk:
    table: str  # db.table
    low: str
    high: str
    # Filled by the worker thread before it writes the high watermark:
    rows: dict[bytes, dict[str, Any]] = field(default_factory=dict)  # key bytes -> row, rendered like events
    last_key: list[Any] | None = None  # the chunk's greatest key (None: empty chunk, the table is done)
    selected: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None  # the worker's failure, raised in the capture loop
    # Kept by the capture loop:
    in_window: bool = False
    changed: set[bytes] = field(default_factory=set)


@dataclass
class TablePlan:
    db: str
    table: str
    columns: list[tuple[str, str, str, int, bool]]
    key: list[str]
    estimated_rows: int


class Snapshotter:
    def __init__(
        self, ep: MySqlEndpoint, source_name: str, watermark_table: str, chunk_size: int,
        progress: dict[str, Any], key_columns: Mapping[str, Sequence[str]] | None = None,
    ) -> None:  # fmt: skip
        self.ep = ep
        # Tables without a primary key: the columns the config says identify a row (mysql.key_columns)
        self.key_columns = dict(key_columns or {})
        self.source_name = source_name
        self.watermark_table = watermark_table
        self.chunk_size = chunk_size
        self.progress = (
            progress  # {"db.table": {"last_key": [...], "rows": n, "done": bool}}; shared with the checkpoint
        )
        self.plans: dict[str, TablePlan] = {}
        self.chunk: Chunk | None = None
        self._last_report = 0.0

    # -- set-up ----------------------------------------------------------------------------------------

    def prepare(self, patterns: tuple[str, ...], keep: Any) -> None:
        """Find the tables to snapshot (those `patterns` match, and tables an earlier signal asked for that are not
        done); create the watermark table. `keep(db, table)`: the capture filter."""
        db, table = self.watermark_table.split(".", 1)
        execute(self.ep, f"CREATE DATABASE IF NOT EXISTS `{db}`",
                f"CREATE TABLE IF NOT EXISTS `{db}`.`{table}` (source VARCHAR(190) PRIMARY KEY, mark VARCHAR(64), "
                "written TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6))")  # fmt: skip
        unfinished = {name for name, p in self.progress.items() if not p.get("done")}
        self._plan(lambda name: matches_any(name, patterns) or name in unfinished, keep)

    def request(self, patterns: tuple[str, ...], keep: Any, signal_id: str) -> list[str]:
        """An ad-hoc snapshot asked for by a signal: the tables `patterns` match are read again from their start
        (also those snapshotted before). A table being snapshotted now just goes on. The tables added."""
        busy = set(self.plans)
        added = self._plan(lambda name: matches_any(name, patterns) and name not in busy, keep,
                           restart={"signal": signal_id})  # fmt: skip
        if added:
            log.info("signal %s: snapshot of %d table(s): %s", signal_id, len(added), ", ".join(added))
        return added

    def again(self, name: str, keep: Any, reason: str) -> list[str]:
        """Read `name` again from its start (a DDL changed its rows): also when it is being read now, since rows
        a chunk selected before the DDL must not be released after it (that chunk's watermarks are then ignored)."""
        if self.chunk is not None and self.chunk.table == name:
            self.chunk = None
        self.plans.pop(name, None)
        return self._plan(lambda table: table == name, keep, restart={"signal": reason})

    def _plan(self, wanted: Any, keep: Any, restart: dict[str, Any] | None = None) -> list[str]:
        """Plan the tables `wanted(name)` selects among the server's base tables; `restart`: start them over (with
        these fields in their progress), else tables already done are left out."""
        rows = query(self.ep, "SELECT TABLE_SCHEMA, TABLE_NAME, COALESCE(TABLE_ROWS, 0) FROM information_schema.TABLES "
                              "WHERE TABLE_TYPE = 'BASE TABLE'")  # fmt: skip
        added = []
        for db_name, table_name, estimate in rows:
            name = f"{db_name}.{table_name}"
            if not wanted(name) or not keep(db_name, table_name) or name == self.watermark_table:
                continue
            if restart is None and self.progress.get(name, {}).get("done"):
                continue
            cols = table_columns(self.ep, db_name, table_name)
            key = self._key(name, cols)
            if not key:
                log.warning("snapshot: %s has no primary key (nor mysql.key_columns); it is not snapshotted (only "
                            "streamed)", name)  # fmt: skip
                continue
            if restart is not None:
                self.progress[name] = {"last_key": None, "rows": 0, "done": False, **restart}
            self.plans[name] = TablePlan(db_name, table_name, cols, key, int(estimate))
            self.progress.setdefault(name, {"last_key": None, "rows": 0, "done": False})
            added.append(name)
        if self.plans and restart is None:
            log.info("snapshot of %d table(s): %s", len(self.plans), ", ".join(sorted(self.plans)))
        return sorted(added)

    @property
    def pending_tables(self) -> int:
        """Tables planned and not done yet (the one a chunk is reading included)."""
        return len(self.plans)

    @property
    def active(self) -> bool:
        return bool(self.plans) or self.chunk is not None

    # -- one chunk -------------------------------------------------------------------------------------

    def step(self) -> None:
        """Between binlog events: raise what the chunk worker failed with, or start the next chunk when
        none is in flight. Never waits for SQL."""
        chunk = self.chunk
        if chunk is not None:
            if chunk.error is not None:
                self.chunk = None
                if isinstance(chunk.error, CdcflowError):
                    raise chunk.error
                # (a lost connection, a lock wait: the capture resumes from its checkpoint and reads again)
                raise ServiceUnavailable(f"snapshot of {chunk.table}: {chunk.error}") from chunk.error
            return
        if not self.plans:
            return
        name = min(self.plans)
        chunk = Chunk(name, uuid.uuid4().hex, uuid.uuid4().hex)
        self.chunk = chunk
        worker = threading.Thread(
            target=self._select_chunk, args=(chunk, self.plans[name], self.progress[name]["last_key"]),
            name=f"snapshot-{name}", daemon=True,
        )  # fmt: skip
        worker.start()

    def _key(self, name: str, columns: Sequence[tuple[str, str, str, int, bool]]) -> list[str]:
        """The columns a chunk is ordered and resumed by: the primary key, else the configured key columns."""
        named = {n for n, *_ in columns}
        return [c[0] for c in columns if c[4]] or [c for c in self.key_columns.get(name, ()) if c in named]

    def _select_chunk(self, chunk: Chunk, plan: TablePlan, last_key: list[Any] | None) -> None:
        """The worker: low watermark, SELECT, rows handed to `chunk`, then the high watermark."""
        try:
            # The table as it is now: a DDL the capture has not read yet may have changed it since it was planned.
            columns = table_columns(self.ep, plan.db, plan.table)
            key = self._key(f"{plan.db}.{plan.table}", columns)
            if columns and key != plan.key:
                last_key = None  # another key: its last value means nothing now; read the table from its start
            plan.columns, plan.key = columns, key
            conn = connect(self.ep)
            try:
                with conn.cursor() as cur:
                    self._mark(cur, chunk.low)
                    if not columns or not key:  # dropped (or its key dropped) since: nothing (more) to read
                        chunk.rows, chunk.last_key = {}, None
                        chunk.selected.set()
                        self._mark(cur, chunk.high)
                        return
                    cur.execute("SET time_zone = '+00:00'")
                    select = ", ".join(
                        f"CAST(`{n}` AS DOUBLE)" if d == "float" else f"`{n}`" for n, d, *_ in plan.columns
                    )
                    key_list = ", ".join(f"`{k}`" for k in plan.key)
                    sql = f"SELECT {select} FROM `{plan.db}`.`{plan.table}`"
                    args: tuple[Any, ...] = ()
                    if last_key is not None:
                        sql += f" WHERE ({key_list}) > ({', '.join(['%s'] * len(plan.key))})"
                        args = tuple(_sql_value(v) for v in last_key)
                    sql += f" ORDER BY {key_list} LIMIT {self.chunk_size}"
                    cur.execute(sql, args)
                    raw_rows = cur.fetchall()
                    names = [c[0] for c in plan.columns]
                    raw_last = [raw_rows[-1][names.index(k)] for k in plan.key] if raw_rows else None
                    rows: dict[bytes, dict[str, Any]] = {}
                    for raw in raw_rows:
                        row = {
                            n: render_selected(d, c, f, v) for (n, d, c, f, _), v in zip(plan.columns, raw, strict=True)
                        }
                        rows[orjson.dumps({k: row[k] for k in sorted(plan.key)})] = row
                    chunk.rows = rows
                    chunk.last_key = [_plain(v) for v in raw_last] if raw_last else None
                    chunk.selected.set()  # before the high watermark: the loop may see it at once
                    self._mark(cur, chunk.high)
            finally:
                conn.close()
        except BaseException as exc:  # handed to the capture loop, which retries from its checkpoint
            chunk.error = exc

    def _mark(self, cur: Any, mark: str) -> None:
        db, table = self.watermark_table.split(".", 1)
        cur.execute(f"INSERT INTO `{db}`.`{table}` (source, mark) VALUES (%s, %s) "
                    "ON DUPLICATE KEY UPDATE mark = VALUES(mark)", (self.source_name, mark))  # fmt: skip

    def is_watermark_table(self, qualified: str) -> bool:
        return qualified == self.watermark_table

    def observe(self, qualified: str, key: bytes) -> None:
        """A binlog change of `qualified`: inside a chunk's window, its row is left to the binlog."""
        chunk = self.chunk
        if chunk is not None and chunk.in_window and chunk.table == qualified:
            chunk.changed.add(key)

    def on_watermark(self, row: dict[str, Any], ctx: TxnContext, pos: int, ts_ms: int) -> list[ChangeEvent]:
        """A watermark row from the binlog. Returns the chunk's events when it is the high watermark."""
        chunk = self.chunk
        if chunk is None or row.get("source") != self.source_name:
            return []
        mark = row.get("mark")
        if mark == chunk.low:
            chunk.in_window = True
            return []
        if mark != chunk.high or not chunk.in_window:
            return []  # a watermark of an earlier (interrupted) run: ignored
        if not chunk.selected.is_set():  # cannot happen: the worker writes the high mark after the rows
            raise TerminalError(f"snapshot of {chunk.table}: high watermark seen before the chunk's rows")
        plan = self.plans[chunk.table]
        events = []
        for index, (key, row_values) in enumerate(chunk.rows.items()):
            if key in chunk.changed:
                continue
            source = SourceInfo(
                connector="mysql", name=self.source_name, db=plan.db, table=plan.table, ts_ms=ts_ms,
                pos=(ctx.seq, ctx.event_index, index), snapshot=True,
                extra={"gtid": ctx.gtid, "file": ctx.file, "position": pos, "row": index},
            )  # fmt: skip
            events.append(ChangeEvent(key=key, op=Op.READ, source=source, after=row_values))
        progress = self.progress[chunk.table]
        progress["rows"] += len(events)
        if chunk.last_key is None:
            progress["done"] = True
            del self.plans[chunk.table]
            log.info("snapshot of %s complete: %d rows", chunk.table, progress["rows"])
        else:
            progress["last_key"] = chunk.last_key
        self.chunk = None
        self._report(chunk.table, plan)
        return events

    def _report(self, name: str, plan: TablePlan) -> None:
        now = time.monotonic()
        if now - self._last_report < 2 and not self.progress[name]["done"]:
            return
        self._last_report = now
        done = self.progress[name]["rows"]
        total = max(plan.estimated_rows, done, 1)
        share = 1.0 if self.progress[name]["done"] else min(done / total, 0.99)
        bar = "#" * int(share * 30)
        log.info("snapshot %s [%-30s] %3.0f%% %d of ~%d rows", name, bar, share * 100, done, total)


def _plain(value: Any) -> Any:
    """A key value as JSON can carry it (in the checkpoint) back into a later chunk's WHERE."""
    if isinstance(value, bytes | bytearray):
        return {"hex": bytes(value).hex()}
    if isinstance(value, int | str | float) or value is None:
        return value
    return str(value)  # DECIMAL, dates and times: the server compares their text form correctly


def _sql_value(value: Any) -> Any:
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(value["hex"])
    return value
