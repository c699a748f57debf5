"""`cdcflow ui`: the status page."""

from __future__ import annotations

from pathlib import Path

import click

from cdcflow.cli import wiring
from cdcflow.cli.common import config_option


@click.command("ui")
@config_option
@click.option("--host", default=None, help="Address to serve on (default: ui.host).")
@click.option("--port", type=int, default=None, help="Port (default: ui.port; 0: any free port).")
@click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="URL",
    help="A metrics URL to read (repeatable; default: ui.targets, else the metrics.*_port of the config).",
)
def ui(config_path: Path | None, host: str | None, port: int | None, targets: tuple[str, ...]) -> None:
    """Serve the status page: captures, sinks, verify results, dead letters and warnings, from what the
    processes publish (metrics endpoints, progress files, Kafka, HBase's peer state). Until Ctrl-C."""
    from cdcflow.ui.app import StatusServer

    cfg = wiring.load(config_path)
    urls = list(targets) or wiring.metrics_targets(cfg)
    server = StatusServer(wiring.status_collector(cfg, urls), host or cfg.ui.host,
                         cfg.ui.port if port is None else port, cfg.ui.history_minutes * 60.0)  # fmt: skip
    click.echo(f"cdcflow status page on {server.url} (reading {', '.join(urls) or 'no metrics endpoints'})")
    server.serve_forever()
