"""Where verification results go: Prometheus metrics (labelled by check) and the verify topic
(compacted, keyed by check: the status page shows the latest of each)."""

from __future__ import annotations

import logging

from prometheus_client import Counter, Gauge

from cdcflow.clients.kafka import KafkaEndpoint, create_store_topic, iter_to_end
from cdcflow.clients.kafka.client import produce_sync
from cdcflow.errors import CdcflowError
from cdcflow.verify.continuous import VerifyRound

log = logging.getLogger(__name__)

ROUNDS = Counter("cdcflow_verify_rounds_total", "Verification rounds, by outcome (clean, different, error)",
                 ["check", "outcome"])  # fmt: skip
ROWS_COMPARED = Gauge("cdcflow_verify_rows_compared", "Rows compared in the last round", ["check"])
DIFFERENCES = Gauge(
    "cdcflow_verify_differences",
    "Confirmed differences known in the table (found by a round, not seen equal again since)",
    ["check"],
)
IN_FLIGHT = Gauge(
    "cdcflow_verify_in_flight", "Rows skipped in the last round: changed in the source meanwhile", ["check"]
)
LAST_ROUND = Gauge("cdcflow_verify_last_round_timestamp_seconds", "When the last round finished", ["check"])


class ResultPublisher:
    def __init__(self, kafka: KafkaEndpoint | None, topic: str) -> None:
        self.kafka, self.topic = kafka, topic
        self._topic_ready = False

    def publish(self, result: VerifyRound) -> None:
        outcome = "error" if result.error else ("clean" if result.clean else "different")
        ROUNDS.labels(result.check, outcome).inc()
        LAST_ROUND.labels(result.check).set(result.finished_ms / 1000)
        if result.error is None:
            ROWS_COMPARED.labels(result.check).set(result.rows_compared)
            DIFFERENCES.labels(result.check).set(result.outstanding)
            IN_FLIGHT.labels(result.check).set(result.in_flight)
        if self.kafka is None:
            return
        try:  # the result is also printed and in the metrics: a Kafka outage costs only the page's copy
            if not self._topic_ready:
                create_store_topic(self.kafka, self.topic, compact=True)
                self._topic_ready = True
            produce_sync(self.kafka, self.topic, [(result.check.encode(), result.to_json())], timeout_s=15.0)
        except CdcflowError as exc:
            log.warning("could not publish the result of %s to %s: %s", result.check, self.topic, exc)


def latest_results(kafka: KafkaEndpoint, topic: str, timeout_s: float = 10.0) -> dict[str, VerifyRound]:
    """The newest result of each check in the verify topic (records that do not parse are skipped)."""
    latest: dict[str, VerifyRound] = {}
    for record in iter_to_end(kafka, topic, timeout_s):
        if record.key is None or record.value is None:
            continue
        try:
            latest[record.key.decode(errors="replace")] = VerifyRound.from_json(record.value)
        except (ValueError, TypeError) as exc:
            log.debug("skipping an unreadable verify result at %s/%d: %s", record.partition, record.offset, exc)
    return latest
