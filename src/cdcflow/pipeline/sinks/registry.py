"""Sink type → class. The only module that knows every sink.

Sinks are imported lazily, so a pipeline that uses only HBase never loads Delta's Python module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from cdcflow.config import SinkConfig
from cdcflow.errors import ConfigError
from cdcflow.pipeline.context import Endpoints
from cdcflow.pipeline.sinks.base import Sink

# type → (module, class); each type's options model is in cdcflow.config.sinks
SINK_TYPES: dict[str, tuple[str, str]] = {
    "hbase": ("cdcflow.pipeline.sinks.hbase", "HBaseSink"),
    "delta": ("cdcflow.pipeline.sinks.delta.sink", "DeltaStateSink"),
    "delta_changelog": ("cdcflow.pipeline.sinks.delta.changelog", "DeltaChangelogSink"),
    "parquet": ("cdcflow.pipeline.sinks.simple", "ParquetChangelogSink"),
    "phoenix": ("cdcflow.pipeline.sinks.phoenix.sink", "PhoenixSink"),
    "console": ("cdcflow.pipeline.sinks.simple", "ConsoleSink"),
}


def make_sink(cfg: SinkConfig, context: Endpoints | Mapping[str, Any]) -> Sink:
    if cfg.type not in SINK_TYPES:
        raise ConfigError(f"sink {cfg.name}: unknown type {cfg.type}; known: {sorted(SINK_TYPES)}")
    module, cls_name = SINK_TYPES[cfg.type]
    cls: type[Sink] = getattr(importlib.import_module(module), cls_name)
    return cls(cfg.name, cfg.typed_options, Endpoints.of(context))
