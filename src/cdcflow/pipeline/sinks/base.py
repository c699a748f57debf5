"""The contract every sink fulfils."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pyspark.sql import DataFrame, SparkSession

from cdcflow.config.sinks import SinkOptions
from cdcflow.pipeline.context import Endpoints


class Sink(ABC):
    """Applies micro-batches of valid, deduplicated change events.

    `apply_batch` must be idempotent: after a crash Spark replays the same `batch_id` with the
    same data, and at-least-once delivery upstream means an event can also arrive twice across
    batches. A sink raises to fail its batch; the pipeline then retries that sink alone.
    """

    # True when apply_batch runs exactly one Spark action over `events`: the runner then skips
    # persisting the batch and takes its counts from that action (Dataset.observe) instead of a
    # job of their own. A sink that reads `events` more than once leaves it False.
    reads_events_once: ClassVar[bool] = False
    # False when the sink's own reads absorb duplicates (the Delta change log: its readers and folds
    # see a change once however often it is stored): the runner then skips the dedupe, a shuffle of
    # the whole batch.
    wants_deduplicated_events: ClassVar[bool] = True

    def __init__(self, name: str, options: SinkOptions, context: Endpoints) -> None:
        self.name = name
        self.options = options  # the sink type's options model, validated when the config was loaded
        self.context = context  # endpoints resolved by the runner (zk_quorum, bootstrap_servers, ...)
        # The streaming query's id, kept in its checkpoint (new when the checkpoint is reset); set
        # by the runner before the first batch.
        self.query_id: str | None = None
        # The subscribe pattern of the sink's topics (which source tables it takes); set by the runner.
        self.topics: str | None = None

    def jars(self) -> list[str]:
        """Extra jars the sink needs in Spark's JVM (a JDBC driver, ...); added to the session."""
        return []

    @abstractmethod
    def apply_batch(self, events: DataFrame, batch_id: int) -> None: ...

    def apply_reassembled(self, events: DataFrame, batch_id: int) -> None:
        """Apply the oversize changes of batch `batch_id`, put back together from their parts after
        `apply_batch` applied the rest (pipeline/oversize.py). Idempotent like `apply_batch`, and apart
        from it: a sink whose `apply_batch` is idempotent per batch id (the Delta change log's batch marks)
        keeps this pass under an id of its own. Default: `apply_batch` again, for sinks whose writes are
        decided by each change's position, not by the batch."""
        self.apply_batch(events, batch_id)

    def open(self, spark: SparkSession) -> None:  # noqa: B027 - optional: most sinks start from nothing
        """Pick up work an earlier process left unfinished (a merge-on-read sink's unfolded changes);
        the pipeline calls it once, before the sink's query starts, so it happens with no new batch."""

    def flush(self, spark: SparkSession) -> None:  # noqa: B027 - optional: most sinks write everything in apply_batch
        """Finish work the sink deferred (a merge-on-read sink folds its pending changes); the pipeline
        calls it when an --available-now run has applied every batch."""

    def status(self) -> dict[str, Any]:
        """What the sink adds to its progress document (`cdcflow pipeline status`, the status page)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional: most sinks hold nothing across batches
        """Release what the sink holds across batches (connections, writer leases); the pipeline
        calls it once its queries have stopped."""
