"""Typed configuration, validated once at the edge (CLI start-up). See config/cdcflow.yaml."""

from cdcflow.config.model import (
    CdcflowConfig,
    HBaseSourceConfig,
    KafkaConfig,
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
    "PeerConfig",
    "PipelineConfig",
    "RouteConfig",
    "SinkConfig",
    "StackConfig",
    "load_config",
]
