"""Typed configuration, validated once at the edge (CLI start-up). See config/cdcflow.yaml."""

from cdcflow.config.model import (
    CdcflowConfig,
    HBaseSourceConfig,
    KafkaConfig,
    MySqlSnapshotConfig,
    MySqlSourceConfig,
    PeerConfig,
    PipelineConfig,
    RouteConfig,
    SinkConfig,
    StackConfig,
    load_config,
)

__all__ = [
    "CdcflowConfig",
    "HBaseSourceConfig",
    "KafkaConfig",
    "MySqlSnapshotConfig",
    "MySqlSourceConfig",
    "PeerConfig",
    "PipelineConfig",
    "RouteConfig",
    "SinkConfig",
    "StackConfig",
    "load_config",
]
