"""Delta Lake sinks: a current-state table per source table (`delta`) and a changelog (`delta_changelog`)."""

from cdcflow.pipeline.sinks.delta.changelog import DeltaChangelogSink
from cdcflow.pipeline.sinks.delta.sink import DeltaStateSink

__all__ = ["DeltaChangelogSink", "DeltaStateSink"]
