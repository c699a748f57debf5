"""cdcflow: change-data capture from HBase and MySQL/MariaDB to Kafka, applied to sinks with PySpark.

The names below are the library's public API (README, "Use it from your own PySpark job"); everything else is
internal and may change. They are loaded on first use, so `import cdcflow` alone does not start importing
PySpark (the captures run without it), and the root imports none of the layers below it (the import contracts
in pyproject.toml). Type checkers read the names from __init__.pyi."""

from __future__ import annotations

import importlib
from typing import Any

from cdcflow.version import __version__

# public name → the module that defines it
_EXPORTS = {
    "CdcflowConfig": "cdcflow.config",
    "PipelineConfig": "cdcflow.config",
    "SinkConfig": "cdcflow.config",
    "load_config": "cdcflow.config",
    "DeltaChangelogOptions": "cdcflow.config.sinks",
    "DeltaStateOptions": "cdcflow.config.sinks",
    "HBaseSinkOptions": "cdcflow.config.sinks",
    "ParquetOptions": "cdcflow.config.sinks",
    "PhoenixOptions": "cdcflow.config.sinks",
    "CdcflowError": "cdcflow.errors",
    "ConfigError": "cdcflow.errors",
    "Endpoints": "cdcflow.pipeline.context",
    "Pipeline": "cdcflow.pipeline.library",
    "SinkApplier": "cdcflow.pipeline.library",
    "as_of": "cdcflow.pipeline.library",
    "at_cut": "cdcflow.pipeline.library",
    "consistent_cut": "cdcflow.pipeline.library",
    "change_log": "cdcflow.pipeline.library",
    "current_view": "cdcflow.pipeline.library",
    "history": "cdcflow.pipeline.library",
    "parse_changes": "cdcflow.pipeline.library",
    "read_changes": "cdcflow.pipeline.library",
    "run_pipeline": "cdcflow.pipeline.library",
    "spark_conf": "cdcflow.pipeline.library",
}

__all__ = [
    "CdcflowConfig",
    "CdcflowError",
    "ConfigError",
    "DeltaChangelogOptions",
    "DeltaStateOptions",
    "Endpoints",
    "HBaseSinkOptions",
    "ParquetOptions",
    "PhoenixOptions",
    "Pipeline",
    "PipelineConfig",
    "SinkApplier",
    "SinkConfig",
    "__version__",
    "as_of",
    "at_cut",
    "change_log",
    "consistent_cut",
    "current_view",
    "history",
    "load_config",
    "parse_changes",
    "read_changes",
    "run_pipeline",
    "spark_conf",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdcflow' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
