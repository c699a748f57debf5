"""Plain parallel work on Spark: one task per item (the HBase backfill's regions), results collected.

Not a streaming query: Spark here only places and schedules the work, on the local cores or on a
cluster's executors (which need cdcflow installed, as for `pipeline submit`). A task that raises fails
the job (after Spark's own retries on a cluster), and the caller decides what a rerun resumes."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def run_tasks(fn: Callable[[T], R], items: Sequence[T], *, master: str, app_name: str) -> list[R]:
    """`fn(item)` for every item, each in its own Spark task; the results in the items' order."""
    if not items:
        return []
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        # A task per item, however long each runs: no speculative copies (they would publish twice).
        .config("spark.speculation", "false")
        .getOrCreate()
    )
    try:
        log.info("%s: %d tasks on %s", app_name, len(items), spark.sparkContext.master)
        return spark.sparkContext.parallelize(list(items), len(items)).map(fn).collect()
    finally:
        spark.stop()
