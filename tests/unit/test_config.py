from __future__ import annotations

from pathlib import Path

import pytest

from cdcflow.config import load_config
from cdcflow.errors import ConfigError

BUNDLED = Path(__file__).resolve().parents[2] / "config" / "cdcflow.yaml"


def test_bundled_default_config_is_valid() -> None:
    cfg = load_config(BUNDLED, environ={})
    assert set(cfg.stack.components) == {"kafka", "hbase", "mariadb", "phoenix"}
    assert [s.type for s in cfg.pipeline.sinks] == ["hbase", "delta", "phoenix"]


def test_env_overrides_file(tmp_path: Path) -> None:
    cfg = load_config(BUNDLED, environ={"CDCFLOW__STACK__HOME": str(tmp_path)})
    assert cfg.stack.resolved_home() == tmp_path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stack: [1, 2", "not valid YAML"),
        ("- a\n- b\n", "mapping at the top level"),
        ("stack:\n  components: [kafka, oracle]\n", "unknown component"),
        ("stack:\n  colour: blue\n", "stack.colour"),
    ],
)
def test_bad_config_gets_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml", environ={})
