"""The public API's names for type checkers (the module loads them on first use: __init__.py)."""

from cdcflow.config import CdcflowConfig as CdcflowConfig
from cdcflow.config import PipelineConfig as PipelineConfig
from cdcflow.config import SinkConfig as SinkConfig
from cdcflow.config import load_config as load_config
from cdcflow.config.sinks import DeltaChangelogOptions as DeltaChangelogOptions
from cdcflow.config.sinks import DeltaStateOptions as DeltaStateOptions
from cdcflow.config.sinks import HBaseSinkOptions as HBaseSinkOptions
from cdcflow.config.sinks import ParquetOptions as ParquetOptions
from cdcflow.config.sinks import PhoenixOptions as PhoenixOptions
from cdcflow.errors import CdcflowError as CdcflowError
from cdcflow.errors import ConfigError as ConfigError
from cdcflow.pipeline.context import Endpoints as Endpoints
from cdcflow.pipeline.library import Pipeline as Pipeline
from cdcflow.pipeline.library import SinkApplier as SinkApplier
from cdcflow.pipeline.library import as_of as as_of
from cdcflow.pipeline.library import at_cut as at_cut
from cdcflow.pipeline.library import change_log as change_log
from cdcflow.pipeline.library import consistent_cut as consistent_cut
from cdcflow.pipeline.library import current_view as current_view
from cdcflow.pipeline.library import history as history
from cdcflow.pipeline.library import parse_changes as parse_changes
from cdcflow.pipeline.library import read_changes as read_changes
from cdcflow.pipeline.library import run_pipeline as run_pipeline
from cdcflow.pipeline.library import spark_conf as spark_conf
from cdcflow.version import __version__ as __version__

__all__: list[str]
