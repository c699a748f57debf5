"""The library's public names (`cdcflow.__all__`): each one there, and `import cdcflow` light."""

from __future__ import annotations

import subprocess
import sys

import pytest

import cdcflow

pytestmark = pytest.mark.unit

# The README's library section and its example use these; removing or renaming one breaks users' jobs.
PUBLIC = {
    "CdcflowConfig", "CdcflowError", "ConfigError", "DeltaChangelogOptions", "DeltaStateOptions", "Endpoints",
    "HBaseSinkOptions", "ParquetOptions", "PhoenixOptions", "Pipeline", "PipelineConfig", "SinkApplier", "SinkConfig",
    "__version__", "as_of", "at_cut", "change_log", "consistent_cut", "current_view", "history", "load_config",
    "parse_changes", "read_changes", "run_pipeline", "spark_conf",
}  # fmt: skip


def test_every_public_name_is_there_and_nothing_else_is_promised() -> None:
    assert set(cdcflow.__all__) == PUBLIC
    for name in cdcflow.__all__:
        assert getattr(cdcflow, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'Sink'"):
        cdcflow.Sink  # noqa: B018 - internal names are not reachable from the root


def test_importing_cdcflow_does_not_import_spark() -> None:
    code = "import sys, cdcflow; cdcflow.Endpoints; cdcflow.SinkConfig; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_sink_is_configured_from_its_typed_options() -> None:
    lake = cdcflow.SinkConfig.of("lake", cdcflow.DeltaStateOptions(path="/data/lake", fold_rows=5000), group="g")
    assert (lake.type, lake.options, lake.group) == ("delta", {"path": "/data/lake", "fold_rows": 5000}, "g")
    assert cdcflow.SinkConfig.of("copy", cdcflow.HBaseSinkOptions(table_suffix="")).type == "hbase"
    with pytest.raises(ValueError, match="options are one of HBaseSinkOptions"):
        cdcflow.SinkConfig.of("x", {"path": "/p"})  # type: ignore[arg-type]
