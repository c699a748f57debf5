"""How many records of each Kafka topic a micro-batch holds, read from the batch's plan without running a job.

A batch of heartbeat records only (events/heartbeats.py) needs no sink work: the runner counts them as progress
and leaves the sink alone (a Delta sink would otherwise commit an empty version per heartbeat). The counts come
from the Kafka offset ranges Spark planned for the batch: the frame foreachBatch gets scans an RDD whose
DataSourceRDD partitions each hold one `KafkaBatchInputPartition` with its `offsetRange`. That is Spark's
internal structure (checked with Spark 4.1); anything unexpected gives None, and the batch takes the usual path.
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
_MAX_DEPTH = 20  # RDDs between the scan and the Kafka data source (three in Spark 4.1)
_warned: list[bool] = []


def records_per_topic(batch: DataFrame) -> dict[str, int] | None:
    """{topic: records} of a foreachBatch frame of Spark's Kafka source, or None when the plan is not the one
    expected."""
    try:
        return _records_per_topic(batch)
    except Exception as exc:  # Py4J errors of any kind: internal API, it may change
        if not _warned:
            _warned.append(True)
            log.info("the Kafka offset ranges of a batch are not readable from its plan (%s): batches of heartbeats "
                     "only are applied like others", str(exc).splitlines()[0][:200])  # fmt: skip
        return None


def _records_per_topic(batch: DataFrame) -> dict[str, int] | None:
    plan = batch._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves().iterator()
    out: dict[str, int] = {}
    while leaves.hasNext():
        leaf = leaves.next()
        if not leaf.getClass().getName().endswith("RDDScanExec"):
            return None
        rdd: Any = leaf.rdd()
        for _ in range(_MAX_DEPTH):
            if rdd.getClass().getName().endswith(".DataSourceRDD"):
                break
            dependencies = rdd.dependencies()
            if dependencies.size() != 1:
                return None
            rdd = dependencies.head().rdd()
        else:
            return None
        for part in rdd.partitions():
            held = part.inputPartition()
            if held.isEmpty():
                continue
            offsets = held.get().offsetRange()
            topic = str(offsets.topicPartition().topic())
            out[topic] = out.get(topic, 0) + int(offsets.untilOffset()) - int(offsets.fromOffset())
    return out
