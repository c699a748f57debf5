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
        # On a cluster, start once the executors asked for are there (up to 30 s), so the first tasks
        # spread over all of them instead of queueing on the first to register.
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "30s")
        .getOrCreate()
    )
    try:
        sc = spark.sparkContext
        log.info("%s: %d tasks on %s (application %s)", app_name, len(items), sc.master, sc.applicationId)
        return sc.parallelize(list(items), len(items)).map(fn).collect()
    finally:
        spark.stop()
