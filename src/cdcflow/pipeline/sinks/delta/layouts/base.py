"""What every layout is given and gives back (`Layout`, `FoldJob`, `Folded`), and the test hooks of a fold."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from cdcflow.config.sinks import DeltaStateOptions, TableHistory
from cdcflow.pipeline.sinks.delta.records import FoldRecord
from cdcflow.pipeline.sinks.delta.tables import DELETION_VECTORS

if TYPE_CHECKING:
    from cdcflow.pipeline.sinks.delta.source_shapes import SourceShapes

log = logging.getLogger(__name__)


class FoldHooks:
    """Points inside a fold where a test steps in (a subclass passed to `DeltaStateSink(hooks=...)`); these do
    nothing."""

    def merge_source(self, path: str, rows: DataFrame) -> DataFrame:
        """The MERGE's source rows for one table."""
        return rows

    def merged(self, path: str) -> None:
        """After a fold's MERGE committed, before its record is written."""

    def history_step(self, path: str) -> None:
        """After the state's MERGE of a fold that keeps history (format 2), before the history's append."""


@dataclass(frozen=True)
class FoldJob:
    """One fold of one table: the changes its record has not folded, up to log version `version`."""

    spark: SparkSession
    sink: str
    options: DeltaStateOptions
    shapes: SourceShapes
    hooks: FoldHooks
    path: str
    record: FoldRecord
    version: int
    history: TableHistory | None = None  # MySQL: the history this table keeps (`history/`), None: none
    # The changes to fold as a query of versions (`history.versions.versions_sql`: each row stands for `_changes`
    # log rows), read once for the state and the history; None: the log rows of the record's versions up to
    # `version`.
    changes: str | None = None
    # Called before the layout rewrites the state table for a DDL (the history reads what it has not read yet)
    before_rewrite: Callable[[], None] | None = None

    def started(self, changes: int) -> None:
        log.info(
            "sink %s: %s: folding %d changes (log versions %d to %d)", self.sink, self.path, changes,
            self.record.folded_version + 1, self.version,
        )  # fmt: skip

    def state_properties(self) -> dict[str, str]:
        """Properties of a new state (or history) table: deletion vectors only when a table gets them from its
        creation (`deletion_vectors_from_bytes: 0`); otherwise the folds turn them on once it is large
        (`FoldService`)."""
        with_them = self.options.deletion_vectors and self.options.deletion_vectors_from_bytes == 0
        return {DELETION_VECTORS: "true"} if with_them else {}


@dataclass(frozen=True)
class Folded:
    changes: int  # the changes read
    truncated_at: list[int] | None  # the newest truncate among them (its position)
    # History kept: every truncate of the table ([position, source time]), for the fold record
    history_truncates: list[Any] | None = None
    # History of format 2 kept: the state table's version the history step read up to (the record's)
    history_state_version: int | None = None
    # History of format 2 kept: the newest transaction (position's first element) folded so far (the record's)
    history_folded_seq: int | None = None


class Layout(Protocol):
    def fold(self, job: FoldJob) -> Folded:
        """Fold the table's pending changes into its state table."""
        ...

    def view_sql(self, spark: SparkSession, state_path: str, state: StructType | None, record: FoldRecord,
                 include_deleted: bool) -> str:  # fmt: skip
        """The table as of the last applied batch: the state table (`state`: its columns, None when it has no
        state table yet) with every change the log holds from the record's folded version on applied."""
        ...
