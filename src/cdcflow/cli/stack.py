"""`cdcflow stack`: the local stack (up, down, status, logs)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import click

from cdcflow.cli.common import home_option, print_status
from cdcflow.config.paths import default_stack_home
from cdcflow.stack import COMPONENTS, Stack


@click.group()
def stack() -> None:
    """Install and run the local services (Kafka, HBase, MariaDB)."""


def _stack(home: Path | None) -> Stack:
    return Stack(home or default_stack_home())


@stack.command("up")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@home_option
def stack_up(components: tuple[str, ...], home: Path | None) -> None:
    """Start COMPONENTS (default: all but spark) and wait until each answers; running ones are kept.

    `spark` is a standalone cluster (a master and two workers) for `cdcflow pipeline submit`."""
    print_status(_stack(home).up(components or None))


@stack.command("down")
@click.argument("components", nargs=-1, type=click.Choice(COMPONENTS))
@click.option("--wipe", is_flag=True, help="Also delete the services' data (a fresh start next time).")
@home_option
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
@home_option
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
@home_option
def stack_logs(component: str, lines: int, home: Path | None) -> None:
    """Print the last lines of COMPONENT's log."""
    from cdcflow.stack.process import tail

    click.echo(tail(_stack(home).log_path(component), lines))
