"""Sink type → class. The only module that knows every sink."""

from __future__ import annotations

from typing import Any

from cdcflow.config import SinkConfig
from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.base import Sink


def make_sink(cfg: SinkConfig, context: dict[str, Any]) -> Sink:
    if cfg.type == "hbase":
        from cdcflow.pipeline.sinks.hbase import HBaseSink

        return HBaseSink(cfg.name, cfg.options, context)
    if cfg.type == "console":
        from cdcflow.pipeline.sinks.simple import ConsoleSink

        return ConsoleSink(cfg.name, cfg.options, context)
    if cfg.type == "parquet":
        from cdcflow.pipeline.sinks.simple import ParquetChangelogSink

        if "path" not in cfg.options:
            raise ConfigError(f"sink {cfg.name}: parquet needs options.path")
        return ParquetChangelogSink(cfg.name, cfg.options, context)
    if cfg.type == "delta_changelog":
        from cdcflow.pipeline.sinks.delta import DeltaChangelogSink

        if "path" not in cfg.options:
            raise ConfigError(f"sink {cfg.name}: delta_changelog needs options.path")
        return DeltaChangelogSink(cfg.name, cfg.options, context)
    raise ConfigError(f"sink {cfg.name}: unknown type {cfg.type}")
