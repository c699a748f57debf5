"""The contract every sink fulfils."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from pyspark.sql import DataFrame


class Sink(ABC):
    """Applies micro-batches of valid, deduplicated change events.

    `apply_batch` must be idempotent: after a crash Spark replays the same `batch_id` with the
    same data, and at-least-once delivery upstream means an event can also arrive twice across
    batches. A sink raises to fail its batch; the pipeline then retries that sink alone.
    """

    def __init__(self, name: str, options: dict[str, Any], context: dict[str, Any]) -> None:
        self.name = name
        self.options = options
        self.context = context  # endpoints resolved by the runner (zk_quorum, bootstrap_servers, ...)

    def jars(self) -> list[str]:
        """Extra jars the sink needs in Spark's JVM (a JDBC driver, ...); added to the session."""
        return []

    @abstractmethod
    def apply_batch(self, events: DataFrame, batch_id: int) -> None: ...
