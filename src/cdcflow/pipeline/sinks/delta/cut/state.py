"""The consistent cut as stored: `<change log>/_cdcflow_cut.json`, one entry per MySQL source, replaced whole
(records.write_text) after each round that moved it. Readers (`reads.py`) and a restarted tracker start from it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from cdcflow.pipeline.sinks.delta.records import read_text, write_text

CUT_FILE = "_cdcflow_cut.json"


@dataclass(frozen=True)
class SourceCut:
    source: str
    transaction_topic: str
    seq: int | None = None  # the cut's position (its changes' pos[0]); None: no transaction complete yet
    id: str | None = None  # its GTID
    ts_ms: int | None = None  # its commit time at the source
    offset: int = 0  # the transaction topic's offset of the first record not passed (read again after a restart)
    from_version: int = -1  # the oldest log version that may hold a change past the cut (-1: the log's start)
    at_ms: int | None = None  # when the cut was last computed
    log_version: int = -1  # the change log's version it was computed from: that version holds every change up to it
    waiting_for: dict[str, list[int]] = field(default_factory=dict)  # the next transaction: table -> [have, want]
    pending: int = 0  # transaction records read and not passed
    problem: str | None = None  # why the cut cannot move, when it is not only waiting

    def summary(self) -> dict[str, Any]:
        """What the status page shows."""
        return {
            "gtid": self.id, "position": self.seq, "source_ts_ms": self.ts_ms, "computed_at_ms": self.at_ms,
            "log_version": self.log_version,
            "waiting_for": self.waiting_for, "pending_transactions": self.pending, "problem": self.problem,
        }  # fmt: skip


def cut_path(log_path: str) -> str:
    return f"{log_path.rstrip('/')}/{CUT_FILE}"


def read_cuts(spark: SparkSession, log_path: str) -> dict[str, SourceCut]:
    text = read_text(spark, cut_path(log_path))
    if text is None:
        return {}
    known = set(SourceCut.__dataclass_fields__)
    return {name: SourceCut(**{k: v for k, v in doc.items() if k in known}) for name, doc in json.loads(text).items()}


def write_cuts(spark: SparkSession, log_path: str, cuts: dict[str, SourceCut]) -> None:
    write_text(spark, cut_path(log_path), json.dumps({n: asdict(c) for n, c in cuts.items()}, sort_keys=True))
