"""Options and printing the command groups share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def config_option(f: F) -> F:
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
        help="Config file. Default: the bundled config/cdcflow.yaml.",
    )(f)  # fmt: skip
