"""The Spark jobs a streaming query ran in each micro-batch, from the session's status store.

Spark's own listener (AppStatusListener) records every job with its description, also when the web UI is
off; Structured Streaming describes the jobs of a batch as `<query name>\\nid = <query id>\\nrunId = ...\\nbatch
= <n>` (Delta adds its step after the batch: `batch = 6: Compute snapshot for version: 6`). Jobs of other
threads, such as a Delta sink's folds, carry none of this and are not counted. The store keeps the newest
`spark.ui.retainedJobs` jobs (1,000 by default)."""

from __future__ import annotations

import re
from collections import defaultdict

from pyspark.sql import SparkSession

_BATCH_JOB = re.compile(r"\nid = (?P<id>[0-9a-f-]+)\nrunId = [0-9a-f-]+\nbatch = (?P<batch>\d+)(?::\s*(?P<step>.*))?")


def _batch_jobs(spark: SparkSession, query_id: str) -> list[tuple[int, int, str, int]]:
    """(batch, job id, description, tasks run) of every job of the streaming query `query_id` the store holds."""
    sc = spark.sparkContext
    assert sc._jsc is not None
    listed = sc._jsc.sc().statusStore().jobsList(None)  # a Scala Seq of v1.JobData, newest first
    jobs: list[tuple[int, int, str, int]] = []
    for i in range(listed.size()):
        job = listed.apply(i)
        description = job.description()
        found = _BATCH_JOB.search(str(description.get())) if description.isDefined() else None
        if found and found["id"] == query_id:
            ran = int(job.numTasks()) - int(job.numSkippedTasks())
            jobs.append((int(found["batch"]), int(job.jobId()), found["step"] or str(job.name()), ran))
    return sorted(jobs)


def jobs_per_batch(spark: SparkSession, query_id: str) -> dict[int, list[str]]:
    """Batch id -> the descriptions of the jobs that batch ran (in the order they started), for the
    streaming query `query_id` (the id kept in its checkpoint)."""
    out: dict[int, list[str]] = defaultdict(list)
    for batch, _job, step, _tasks in _batch_jobs(spark, query_id):
        out[batch].append(step)
    return dict(out)


def tasks_per_batch(spark: SparkSession, query_id: str) -> dict[int, int]:
    """Batch id -> the Spark tasks its jobs ran (stages skipped because their output was there not counted)."""
    out: dict[int, int] = defaultdict(int)
    for batch, _job, _step, tasks in _batch_jobs(spark, query_id):
        out[batch] += tasks
    return dict(out)
