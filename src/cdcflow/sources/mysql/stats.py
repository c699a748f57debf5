"""What a MySQL capture counts: its metrics (metrics.py), its progress lines and its status-page entries."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from cdcflow.errors import CdcflowError
from cdcflow.sources.mysql.checkpoint import Checkpoint

log = logging.getLogger(__name__)


@dataclass
class CaptureStats:
    events: int = 0  # change events published
    transactions: int = 0
    ddl: int = 0
    truncates: int = 0  # tables emptied by a DDL (TRUNCATE, DROP, RENAME, a new key), published as op t events
    ddl_rereads: int = 0  # tables read again because a DDL changed their rows without row events
    ddl_not_followed: int = 0  # such DDLs the capture could not follow (no snapshot possible): the sinks differ
    # db.table -> why its sinks differ from it since (a DDL changed its rows and it could not be read again)
    not_followed: dict[str, str] = field(default_factory=dict)
    dead_letters: int = 0
    restarts: int = 0
    snapshot_rows: int = 0
    rolled_back_rows: int = 0  # rows MariaDB wrote that a ROLLBACK (TO SAVEPOINT) or XA ROLLBACK undid
    rolled_back_groups: int = 0  # event groups that ended in ROLLBACK
    # XA transactions that changed captured tables (others on the server are followed, not counted)
    xa_prepared: int = 0
    xa_committed: int = 0
    xa_rolled_back: int = 0
    xa_waiting: int = 0  # prepared XA transactions not completed yet
    xa_unknown: int = 0  # XA COMMIT/ROLLBACK of a transaction prepared before the capture's start
    oversize: int = 0  # changes too large for their topic, published as a marker and parts
    heartbeats: int = 0  # heartbeat records sent (output.heartbeat_topic)
    transaction_records: int = 0  # transaction records sent (output.transaction_topic)
    signals: int = 0  # signal rows acted on (snapshot.signal_table)
    signals_refused: int = 0  # signal rows that could not be acted on (logged with the reason)
    partial_json_rows: int = 0  # MySQL: rows of Update_rows_partial events (JSON diffs applied to the before image)
    checkpoints: int = 0
    last_source_ts_ms: int = 0
    checkpoint: Checkpoint | None = None
    started: float = field(default_factory=time.monotonic)


def summary(s: CaptureStats) -> str:
    return (
        f"{s.events} events, {s.snapshot_rows} snapshot rows, {s.transactions} groups, {s.ddl} DDL "
        f"({s.truncates} tables emptied, {s.ddl_rereads} read again, {s.ddl_not_followed} not followed), "
        f"{s.rolled_back_rows} rows rolled back "
        f"({s.rolled_back_groups} groups ended in ROLLBACK), "
        f"XA {s.xa_prepared} prepared/{s.xa_committed} committed/{s.xa_rolled_back} rolled back/{s.xa_waiting} "
        f"waiting, {s.oversize} oversize, {s.dead_letters} dead letters, {s.restarts} restarts"
    )


class Capture(Protocol):
    @property
    def stats(self) -> CaptureStats: ...

    def run(self, stop: threading.Event) -> CaptureStats: ...


def run_forever(capture: Capture, stop: threading.Event) -> CaptureStats:
    """Run until `stop`; log progress every 10 s and a summary at the end."""

    def report() -> None:
        last = 0
        while not stop.wait(10.0):
            s = capture.stats
            rate = (s.events - last) / 10.0
            last = s.events
            lag = time.time() * 1000 - s.last_source_ts_ms if s.last_source_ts_ms else 0
            log.info("mysql: %s; %.0f events/s, source lag %.1f s, checkpoint %s", summary(s), rate, lag / 1000,
                     s.checkpoint.gtid_state if s.checkpoint else None)  # fmt: skip

    threading.Thread(target=report, name="mysql-progress", daemon=True).start()
    try:
        stats = capture.run(stop)
    except CdcflowError as exc:
        log.error("mysql capture stopped after %s: %s", summary(capture.stats), exc)
        raise
    log.info("mysql capture stopped: %s; checkpoint %s", summary(stats),
             stats.checkpoint.gtid_state if stats.checkpoint else None)  # fmt: skip
    return stats
