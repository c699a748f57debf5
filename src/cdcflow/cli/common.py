"""Options and printing the command groups share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from cdcflow.stack.manager import ServiceStatus

F = TypeVar("F", bound=Callable[..., Any])


def home_option(f: F) -> F:
    return click.option(
        "--home",
        type=click.Path(path_type=Path, file_okay=False),
        default=None,
        help="Stack home (data, logs, state.json). Default: $CDCFLOW_STACK_HOME or ~/.local/state/cdcflow/stack.",
    )(f)


def print_status(statuses: list[ServiceStatus]) -> None:
    for s in statuses:
        mark = "healthy" if s.healthy else ("RUNNING, UNHEALTHY" if s.running else "DOWN")
        click.echo(f"{s.name:8} {mark:18} pid={s.pid or '-':<8} {s.detail}")
        for key, value in s.endpoints.items():
            if "password" not in key:
                click.echo(f"{'':8}   {key:18} {value}")
        click.echo(f"{'':8}   {'log':18} {s.log}")


def config_option(f: F) -> F:
    return click.option(
        "--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
        help="Config file. Default: the bundled config/cdcflow.yaml.",
    )(f)  # fmt: skip
