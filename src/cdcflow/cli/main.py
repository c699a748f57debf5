"""`cdcflow` command line: the entry point, assembling one module per command group."""

from __future__ import annotations

import sys

import click

from cdcflow.cli.hbase import hbase
from cdcflow.cli.mysql import mysql
from cdcflow.cli.pipeline import pipeline
from cdcflow.cli.run import run, ui
from cdcflow.cli.stack import stack
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


for command in (stack, run, mysql, hbase, pipeline, ui, verify):
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
