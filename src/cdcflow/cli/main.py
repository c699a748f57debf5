"""`cdcflow` command line."""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from cdcflow.config import load_config
from cdcflow.errors import CdcflowError
from cdcflow.stack import COMPONENTS, Stack
from cdcflow.stack.manager import ServiceStatus
from cdcflow.stack.paths import default_stack_home

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_CONFIG = Path(__file__).resolve().parents[3] / "config" / "cdcflow.yaml"


def _home_option(f: F) -> F:
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


@click.group()
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ERROR")
def main(log_level: str) -> None:
    """cdcflow: change-data capture from HBase and MySQL/MariaDB to Kafka and on to sinks."""
    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )


@main.group()
def stack() -> None:
    """Install and run the local services (Kafka, HBase, MariaDB)."""


def _stack(home: Path | None) -> Stack:
    return Stack(home or default_stack_home())


@stack.command("up")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@_home_option
def stack_up(components: tuple[str, ...], home: Path | None) -> None:
    """Start COMPONENTS (default: all) and wait until each answers; already running ones are kept."""
    print_status(_stack(home).up(components or None))


@stack.command("down")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option("--wipe", is_flag=True, help="Also delete the services' data (a fresh start next time).")
@_home_option
def stack_down(components: tuple[str, ...], wipe: bool, home: Path | None) -> None:
    """Stop COMPONENTS (default: all); no process is left behind."""
    st = _stack(home)
    stopped = st.down(components or None)
    click.echo(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    if wipe:
        for name in components or COMPONENTS:
            shutil.rmtree(st.home / name, ignore_errors=True)
        click.echo("data wiped")


@stack.command("status")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@_home_option
def stack_status(as_json: bool, home: Path | None) -> None:
    """Show where each service listens and whether it answers. Exit 1 if any is not healthy."""
    statuses = _stack(home).status()
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], indent=2))
    else:
        print_status(statuses)
    sys.exit(0 if all(s.healthy for s in statuses) else 1)


@stack.command("logs")
@click.argument("component", type=click.Choice(COMPONENTS))
@click.option("-n", "--lines", default=50, show_default=True)
@_home_option
def stack_logs(component: str, lines: int, home: Path | None) -> None:
    """Print the last lines of COMPONENT's log."""
    from cdcflow.stack.process import tail

    click.echo(tail(_stack(home).log_path(component), lines))


@main.command("run")
@click.option(
    "--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help=f"Config file. Default: the bundled {DEFAULT_CONFIG.name}.",
)  # fmt: skip
def run(config_path: Path | None) -> None:
    """Run cdcflow on the configured (default: local) stack."""
    cfg = load_config(config_path or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None))
    st = Stack(cfg.stack.resolved_home())
    started = time.monotonic()
    click.echo(f"starting the local stack in {st.home} ...")
    statuses = st.up(cfg.stack.components)
    click.echo(f"stack ready in {time.monotonic() - started:.0f}s:\n")
    print_status(statuses)
    click.echo(
        "\nCapture (HBase peer, MySQL binlog) and the Spark pipeline are not wired in yet; "
        "the services keep running. Stop them with: cdcflow stack down"
    )


def entrypoint() -> None:
    try:
        main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except CdcflowError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    entrypoint()
