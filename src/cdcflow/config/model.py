"""The config file's schema and loader: YAML, then CDCFLOW__SECTION__KEY environment overrides."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from cdcflow.errors import ConfigError
from cdcflow.stack.manager import COMPONENTS
from cdcflow.stack.paths import default_stack_home

ENV_PREFIX = "CDCFLOW__"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StackConfig(_Strict):
    """The local stack `cdcflow run` starts (the embedded default)."""

    home: Path | None = None
    components: tuple[str, ...] = COMPONENTS

    @field_validator("components")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(value) - set(COMPONENTS))
        if unknown:
            raise ValueError(f"unknown component(s) {unknown}; known: {list(COMPONENTS)}")
        return value

    def resolved_home(self) -> Path:
        return self.home or default_stack_home()


class CdcflowConfig(_Strict):
    stack: StackConfig = StackConfig()


def _apply_env(raw: dict[str, Any], environ: dict[str, str]) -> dict[str, Any]:
    """CDCFLOW__STACK__HOME=/x sets raw["stack"]["home"] = "/x" (values parsed as YAML scalars)."""
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = [p.lower() for p in key[len(ENV_PREFIX) :].split("__") if p]
        node = raw
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{key}: {'.'.join(path)} is not a section")
        node[path[-1]] = yaml.safe_load(value)
    return raw


def load_config(path: Path | None, environ: dict[str, str] | None = None) -> CdcflowConfig:
    """Read, override from the environment and validate. Every problem becomes one ConfigError."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"config {path} must be a mapping at the top level")
        raw = loaded or {}
    raw = _apply_env(raw, dict(os.environ if environ is None else environ))
    try:
        return CdcflowConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"invalid config{f' {path}' if path else ''}: {problems}") from exc
