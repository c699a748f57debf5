"""When a Delta sink folds a table's logged changes into its state table, off the append path.

A table is due when `fold_rows` of its changes are pending or its oldest pending change was logged
`fold_interval_s` ago. A thread of the sink's own looks every second and folds the due tables,
several at once on half the cores (a MERGE is mostly fixed cost on the driver, which overlaps with the
others' jobs; the other half is left to the batches, which keep appending meanwhile). A failed fold is
logged, counted and tried again later: its changes stay in the log, and the current view still shows them.

Folds are paced by their cost: after a round of folds that took R seconds, the thread rests
R * (1 - share) / share before the next round (`fold_time_share`), so folding takes at most that share
of the time whatever the machine. A fold costs mostly the same whatever its size (planning, Delta's
snapshot and commit), so on a busy machine the folds grow and come less often instead of crowding out
the batches; the views stay exact meanwhile (they apply the changes not folded yet). A table with
`fold_rows` pending does not wait.

The counts are what this process logged. After a restart the tables the log has fed are looked at
once: each is folded within `fold_interval_s` (a fold with nothing to do commits nothing).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from cdcflow.pipeline import metrics

log = logging.getLogger(__name__)

LOOK_EVERY_S = 1.0
RETRY_AFTER_S = 10.0  # a failed fold is tried again after this long (its changes stay pending)


@dataclass
class _Pending:
    rows: int = 0
    oldest_ms: int | None = None
    last_fold_ms: int | None = None
    fold_seconds: float | None = None
    error: str | None = None
    retry_at: float = 0.0
    folding: bool = False


class FoldScheduler:
    def __init__(
        self,
        sink: str,
        fold: Callable[[str], int],
        fold_rows: int,
        fold_interval_s: float,
        threads: int,
        housekeeping: Callable[[], None] | None = None,
        time_share: float = 1.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sink = sink
        self._fold = fold
        self._housekeeping = housekeeping
        self.fold_rows = fold_rows
        self.fold_interval_s = fold_interval_s
        self.threads = threads  # folds at once when everything is folded now (`fold_all`)
        self.background_threads = threads  # folds at once beside the batches (`sized_to`)
        self.time_share = time_share
        self._clock = clock
        self.resting_until = 0.0  # no round (but of tables past fold_rows) before this time
        self.rest_s = 0.0  # the last rest imposed
        self._tables: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = False

    # --- told by the append path ----------------------------------------------------------------
    def sized_to(self, cores: int) -> None:
        """Beside the batches, fold on half the cores (at least one table at a time): folds that take every core
        stall the batches, whose lag is what users watch."""
        self.background_threads = max(1, min(self.threads, cores // 2))

    def start(self, known_tables: Iterable[str]) -> None:
        """Start the fold thread; `known_tables` (from earlier runs) are looked at in its first round."""
        now_ms = int(self._clock() * 1000)
        with self._lock:
            for path in known_tables:
                # perhaps behind: folded within fold_interval_s (a fold that finds nothing to do commits nothing)
                self._tables.setdefault(path, _Pending(rows=0, oldest_ms=now_ms))
        self.started = True
        self._thread = threading.Thread(target=self._loop, name=f"cdcflow-folds-{self.sink}", daemon=True)
        self._thread.start()

    def logged(self, rows_per_table: dict[str, int]) -> None:
        now_ms = int(self._clock() * 1000)
        with self._lock:
            for path, rows in rows_per_table.items():
                p = self._tables.setdefault(path, _Pending())
                p.rows += rows
                p.oldest_ms = p.oldest_ms or now_ms
                metrics.DELTA_PENDING_ROWS.labels(self.sink, path).set(p.rows)
        if any(self._is_due(p, self._clock()) for p in self._snapshot()):
            self._wake.set()

    # --- folding --------------------------------------------------------------------------------
    def _is_due(self, p: _Pending, now: float) -> bool:
        if p.folding or p.oldest_ms is None or now < p.retry_at:
            return False
        if p.rows >= self.fold_rows:
            return True
        return now >= self.resting_until and now * 1000 - p.oldest_ms >= self.fold_interval_s * 1000

    def _snapshot(self) -> list[_Pending]:
        with self._lock:
            return list(self._tables.values())

    def _take(self, paths: Iterable[str]) -> dict[str, _Pending]:
        """Mark tables as folding and zero their counts: changes logged from now on count again
        (those logged before the fold reads the log are folded too, and only cause a fold that
        finds little to do)."""
        taken = {}
        with self._lock:
            for path in paths:
                p = self._tables[path]
                taken[path] = _Pending(rows=p.rows, oldest_ms=p.oldest_ms)
                p.rows, p.oldest_ms, p.folding = 0, None, True
        return taken

    def _fold_one(self, path: str, taken: _Pending) -> None:
        started = time.perf_counter()
        try:
            self._fold(path)
        except Exception as exc:
            with self._lock:
                p = self._tables[path]
                p.rows += taken.rows
                known = [t for t in (p.oldest_ms, taken.oldest_ms) if t is not None]
                p.oldest_ms = min(known) if known else None
                p.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
                p.retry_at = self._clock() + RETRY_AFTER_S
                p.folding = False
            metrics.DELTA_FOLD_FAILURES.labels(self.sink).inc()
            raise
        took = time.perf_counter() - started
        with self._lock:
            p = self._tables[path]
            p.folding, p.error = False, None
            p.last_fold_ms = int(self._clock() * 1000)
            p.fold_seconds = round(took, 3)
            metrics.DELTA_PENDING_ROWS.labels(self.sink, path).set(p.rows)
        metrics.DELTA_FOLDS.labels(self.sink).inc()
        metrics.DELTA_FOLD_SECONDS.labels(self.sink, path).set(took)
        metrics.DELTA_LAST_FOLD_TIME.labels(self.sink, path).set(time.time())

    def _run(self, paths: list[str], threads: int) -> list[BaseException]:
        taken = self._take(paths)
        errors: list[BaseException] = []
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(paths)))) as pool:
            futures = {pool.submit(self._fold_one, path, t): path for path, t in taken.items()}
            for future, path in futures.items():
                exc = future.exception()
                if exc is not None:
                    log.error("sink %s: %s: fold failed (its changes stay in the log and the view; tried again "
                              "in %.0f s): %s", self.sink, path, RETRY_AFTER_S, exc)  # fmt: skip
                    errors.append(exc)
        return errors

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(LOOK_EVERY_S)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.round()
            except Exception:  # never let the thread die: the next round tries again
                log.exception("sink %s: fold round failed", self.sink)

    def round(self) -> None:
        """Fold the due tables and do the housekeeping due, then rest in proportion to the time it took."""
        started = self._clock()
        with self._lock:
            due = [path for path, p in self._tables.items() if self._is_due(p, started)]
        try:
            if due:
                self._run(due, self.background_threads)
            if self._housekeeping is not None:
                self._housekeeping()
        finally:
            took = self._clock() - started
            if due or took >= 1.0:  # housekeeping alone counts when it did something (compaction, VACUUM)
                self.rest_s = took * (1 - self.time_share) / self.time_share
                self.resting_until = self._clock() + self.rest_s
                if self.rest_s >= 1.0:
                    log.info("sink %s: folds and upkeep took %.1f s; the next round in %.0f s at the earliest "
                             "(fold_time_share %.2f)", self.sink, took, self.rest_s, self.time_share)  # fmt: skip

    def fold_all(self) -> None:
        """Fold every table with changes pending (or not known to have none), now; raise if one fails."""
        self.stop(wait_s=3600.0)  # a fold of the background thread may be running: let it end first
        with self._lock:
            paths = [path for path, p in self._tables.items() if p.oldest_ms is not None or p.error]
        errors = self._run(paths, self.threads) if paths else []
        if errors:
            raise errors[0]

    def stop(self, wait_s: float = 60.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(wait_s)

    def status(self) -> dict[str, dict[str, Any]]:
        """Per state path: changes pending, the oldest one's age, the last fold's time and duration."""
        now_ms = int(self._clock() * 1000)
        # Late: older than the interval, the folds' rest and half a minute.
        late_ms = (self.fold_interval_s + self.rest_s + 30) * 1000
        with self._lock:
            return {
                path: {
                    "pending_rows": p.rows,
                    "oldest_pending_ms": p.oldest_ms,
                    "pending_age_s": round((now_ms - p.oldest_ms) / 1000, 1) if p.oldest_ms else 0.0,
                    "last_fold_ms": p.last_fold_ms,
                    "fold_seconds": p.fold_seconds,
                    "fold_error": p.error,
                    "stale": bool(p.oldest_ms and now_ms - p.oldest_ms > late_ms),
                }
                for path, p in self._tables.items()
            }
