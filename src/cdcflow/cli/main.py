"""`cdcflow` command line: the entry point, assembling one module per command group."""

from __future__ import annotations

import importlib
import sys

import click

from cdcflow.cli.hbase import hbase
from cdcflow.cli.mysql import mysql
from cdcflow.cli.pipeline import pipeline
from cdcflow.cli.ui import ui
from cdcflow.cli.verify import verify
from cdcflow.errors import CdcflowError


@click.group()
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING, ERROR")
@click.option(
    "--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
    envvar="CDCFLOW_LOG_FORMAT", help="json: one object per line, for log collectors.",
)  # fmt: skip
def main(log_level: str, log_format: str) -> None:
    """cdcflow: change-data capture from HBase and MySQL/MariaDB to Kafka and on to sinks."""
    from cdcflow import logs

    logs.configure(log_level, log_format)


for command in (mysql, hbase, pipeline, ui, verify):
    main.add_command(command)

# The development side (cdcflow.dev: the local stack, the demo) comes with a checkout, not with the wheel; its
# commands are loaded by name so that runtime code never imports it.
DEVELOPMENT_COMMANDS = "cdcflow.dev.commands"


def _development_commands() -> list[click.Command]:
    try:
        module = importlib.import_module(DEVELOPMENT_COMMANDS)
    except ModuleNotFoundError as exc:
        if exc.name not in ("cdcflow.dev", DEVELOPMENT_COMMANDS):
            raise
        return [_missing(name) for name in ("stack", "run")]
    return [module.stack, module.run]


def _missing(name: str) -> click.Command:
    def explain() -> None:
        raise click.UsageError(
            f"`cdcflow {name}` runs the local stack, a development tool that comes with a checkout of cdcflow's "
            "repository (`make install`, `make run`), not with this install. Point the config at your own "
            "Kafka, HBase and MySQL instead."
        )

    return click.Command(name, callback=explain, help="(development: needs a checkout of the repository)",
                         context_settings={"ignore_unknown_options": True, "allow_extra_args": True})  # fmt: skip


for command in _development_commands():
    main.add_command(command)


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
