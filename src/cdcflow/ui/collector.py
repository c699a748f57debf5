"""Gathers what the status page shows, on a schedule, in a background thread: the metrics endpoints
(every `scrape_seconds`), and less often the sinks' progress files, the verify topic, the tail of the
dead-letter topics and the HBase peer's state on the source cluster (every `state_seconds`). A source
that cannot be read becomes a warning on the page, never an error of the page."""

from __future__ import annotations

import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cdcflow.clients.kafka import KafkaEndpoint, tail
from cdcflow.errors import CdcflowError
from cdcflow.ui.status import PeerState, TargetHistory, build_status, parse_metrics

log = logging.getLogger(__name__)


class Collector:
    def __init__(
        self,
        targets: list[str],
        *,
        scrape_seconds: float = 5.0,
        state_seconds: float = 30.0,
        history_minutes: int = 60,
        stalled_after_s: float = 120.0,
        checkpoint_root: Path | None = None,
        kafka: KafkaEndpoint | None = None,
        verify_topic: str | None = None,
        dead_letter_topics: tuple[str, ...] = (),
        peer_state: Callable[[], PeerState] | None = None,  # None: no HBase source to ask
        backfill_topic: str | None = None,  # the HBase backfills' progress topic
    ) -> None:
        self.targets = [TargetHistory(url) for url in targets]
        self.scrape_seconds, self.state_seconds, self.keep_s = scrape_seconds, state_seconds, history_minutes * 60.0
        self.stalled_after_s = stalled_after_s
        self.checkpoint_root, self.kafka, self.verify_topic = checkpoint_root, kafka, verify_topic
        self.dead_letter_topics = dead_letter_topics
        self.peer_state_fn = peer_state
        self.backfill_topic = backfill_topic
        self.backfills: list[dict[str, Any]] = []
        self.progress: dict[str, dict[str, Any]] = {}
        self.verify: dict[str, dict[str, Any]] = {}
        self.dead_letters: list[dict[str, Any]] = []
        self.peer: PeerState | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_slow = 0.0

    # -- gathering -----------------------------------------------------------------------------------

    def scrape(self) -> None:
        now = time.time()
        for target in self.targets:
            try:
                with urllib.request.urlopen(target.url, timeout=min(5.0, self.scrape_seconds)) as response:
                    text = response.read().decode("utf-8", errors="replace")
                samples = parse_metrics(text)
            except (OSError, urllib.error.URLError, ValueError) as exc:
                with self._lock:
                    target.error = str(getattr(exc, "reason", None) or exc)
                continue
            with self._lock:
                target.answered(now, samples, self.keep_s)

    def read_slow(self) -> None:
        """The sources that change slowly or cost more to read."""
        if self.checkpoint_root is not None:
            from cdcflow.pipeline.progress import read_progress

            try:
                progress = read_progress(self.checkpoint_root)
            except OSError as exc:
                log.debug("progress files under %s: %s", self.checkpoint_root, exc)
            else:
                with self._lock:
                    self.progress = progress
        if self.kafka is not None and self.verify_topic:
            from cdcflow.verify.publish import latest_results

            try:
                results = latest_results(self.kafka, self.verify_topic)
            except CdcflowError as exc:
                log.debug("verify topic: %s", exc)
            else:
                with self._lock:
                    self.verify = {k: orjson.loads(v.to_json()) for k, v in results.items()}
        if self.kafka is not None and self.dead_letter_topics:
            letters = []
            for topic in self.dead_letter_topics:
                try:
                    letters += [_dead_letter(topic, r.offset, r.value) for r in tail(self.kafka, topic, 5)]
                except CdcflowError as exc:
                    log.debug("dead letters in %s: %s", topic, exc)
            with self._lock:
                self.dead_letters = letters
        if self.kafka is not None and self.backfill_topic:
            self._read_backfills(self.kafka, self.backfill_topic)
        if self.peer_state_fn is not None:
            peer = self.peer_state_fn()
            with self._lock:
                self.peer = peer

    def _read_backfills(self, kafka: KafkaEndpoint, topic: str) -> None:
        from cdcflow.clients.kafka import list_topics
        from cdcflow.sources.hbase.backfill import ProgressStore

        try:
            found = ProgressStore(kafka, topic).status() if topic in list_topics(kafka, timeout_s=3.0) else {}
        except CdcflowError as exc:
            log.debug("backfill progress in %s: %s", topic, exc)
            return
        with self._lock:
            self.backfills = [backfill_view(b) for b in found.values()]

    def collect_once(self) -> None:
        self.scrape()
        if not self._last_slow or time.monotonic() - self._last_slow >= self.state_seconds:
            self._last_slow = time.monotonic()
            self.read_slow()

    def status(self) -> dict[str, Any]:
        with self._lock:
            return build_status(time.time(), self.targets, self.progress, self.peer, self.verify,
                                self.dead_letters, self.stalled_after_s, self.backfills)  # fmt: skip

    # -- the thread --------------------------------------------------------------------------------------

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    self.collect_once()
                except Exception:  # the page must keep running; the next round tries again
                    log.exception("status page: collecting failed")
                self._stop.wait(max(0.0, self.scrape_seconds - (time.monotonic() - started)))

        self._thread = threading.Thread(target=loop, name="ui-collector", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def backfill_view(status: Any) -> dict[str, Any]:
    """One backfill (sources/hbase/backfill.py BackfillStatus) as the page shows it."""
    plan = status.plan
    return {
        "id": plan.backfill_id, "state": plan.state, "tables": ", ".join(t.table for t in plan.tables),
        "regions_done": status.done_regions(), "regions": sum(t.regions for t in plan.tables), "rows": status.rows,
        "started": _local_time(plan.started_ms), "finished": _local_time(plan.finished_ms),
    }  # fmt: skip


def _local_time(ms: int | None) -> str | None:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms else None


def _dead_letter(topic: str, offset: int, raw: bytes | None) -> dict[str, Any]:
    """A dead letter's where and why (the pipeline's and the MySQL capture's records differ in shape)."""
    try:
        doc = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError:
        return {"topic": topic, "offset": offset, "reason": "(not JSON)", "origin": None}
    if not isinstance(doc, dict):
        return {"topic": topic, "offset": offset, "reason": "(not an object)", "origin": None}
    reason = doc.get("error") or doc.get("reason") or doc.get("problem")
    origin = doc.get("sink") or doc.get("source") or doc.get("topic")
    where = f"{doc.get('topic')}/{doc.get('partition')}@{doc.get('offset')}" if doc.get("topic") else None
    return {"topic": topic, "offset": offset, "reason": str(reason)[:300] if reason else "-",
            "origin": str(origin) if origin else None, "where": where}  # fmt: skip


def hbase_peer_state(
    zk_quorum: str, znode_parent: str, peer_zk: str, peer_znode_parent: str, peer_id: str
) -> Callable[[], PeerState]:
    """A function reading the peer's state from the source cluster (HBase master + ZooKeeper)."""

    def read() -> PeerState:
        from cdcflow.clients.hbase import NativeHBaseClient, admin
        from cdcflow.sources.hbase.peer.registry import PeerRegistry

        try:
            reg = PeerRegistry(peer_zk, peer_znode_parent)
            try:
                servers = reg.servers()
            finally:
                reg.close()
            client = NativeHBaseClient(zk_quorum, znode_parent, op_timeout_s=20.0)
            try:
                found = [i for i in admin.list_peers(client) if i.peer_id == peer_id]
                backlog = admin.replication_backlog(client, peer_id) if found else []
            finally:
                client.close()
        except (CdcflowError, OSError) as exc:
            return PeerState(peer_id, False, False, [], error=str(exc))
        if not found:
            return PeerState(peer_id, False, False, servers)
        return PeerState(peer_id, True, found[0].enabled, servers, sum(b.wals_queued for b in backlog),
                         max((b.lag_ms for b in backlog), default=0))  # fmt: skip

    return read
