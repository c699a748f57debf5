"""The pipeline's streaming queries and the sinks each one feeds: a sink's own query, or its group's
(pipeline/groups.py). Data only; pipeline/runner.py runs them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from cdcflow.pipeline import groups
from cdcflow.pipeline.sinks.base import Sink


@dataclass(eq=False)
class QuerySink:
    """One sink of a query: the query is its own, or its group's."""

    name: str
    sink: Sink
    topics: str  # the sink's own subscribePattern
    # Patterns of the sinks before this one (config order): malformed records of those topics are dead-lettered
    # by them, so each malformed record is written once, by the first sink that reads it.
    earlier_topics: tuple[str, ...] = ()
    # In a group: joined, or behind and catching up (pipeline/groups.py). None: the query is the sink's own.
    ledger: groups.Ledger | None = None
    # (batch id, source time) of heartbeats read but not yet counted towards progress (Pipeline._vouched)
    heartbeats: list[tuple[int, int]] = field(default_factory=list)
    # What `cdcflow pipeline status` shows; written to <checkpoint root>/<sink>/cdcflow-progress.json.
    doc: dict[str, Any] = field(default_factory=dict)
    # In a group: guards the ledger between the group's batches and the sink's catch-up thread.
    lock: threading.Lock = field(default_factory=threading.Lock)
    catch_up: threading.Thread | None = None
    failures: int = 0  # in a group: failures in a row of its part of a batch or of its catch-up
    next_try: float = 0.0
    last_error: str | None = None
    gave_up: bool = False  # --available-now: a grouped sink that failed max_failures times

    def __post_init__(self) -> None:
        self.sink.topics = self.topics  # which source tables the sink takes (the Delta sink's consistent cut)

    def owned(self) -> Column:
        return owns_topic(F.col("topic"), self.topics, self.earlier_topics)

    def mine(self) -> Column:
        return F.col("topic").rlike(f"^(?:{self.topics})$")


@dataclass(eq=False)
class Query:
    """One streaming query: a sink's own, or a group's."""

    name: str  # the query's name and checkpoint folder: the sink's name, or group.<group>
    members: list[QuerySink]
    topics: str  # the query's subscribePattern
    group: str | None = None
    query: StreamingQuery | None = None
    failures: int = 0
    topic_restarts: int = 0
    next_start: float = 0.0
    done: bool = False
    last_error: str | None = None
    last_progress_batch: int = -1


def owned_topics(pattern: str, earlier: tuple[str, ...]) -> str:
    """A regex for the topics a query reads (`pattern`) that no earlier query reads: the topics
    whose malformed records it dead-letters. Whole-name matches, as Kafka's subscribePattern."""
    return "".join(f"(?!(?:{other})$)" for other in earlier) + f"(?:{pattern})"


def owns_topic(topic: Column, pattern: str, earlier: tuple[str, ...]) -> Column:
    return topic.rlike(f"^{owned_topics(pattern, earlier)}$")
