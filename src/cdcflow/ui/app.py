"""The status page: a Starlette app served by uvicorn. `/` is the page (it reloads itself every
`scrape_seconds`), `/api/status` the same data as JSON, `/healthz` answers while the server runs."""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from jinja2 import Environment, FileSystemLoader, Undefined, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from cdcflow.errors import ConfigError
from cdcflow.ui.collector import Collector
from cdcflow.ui.status import chart_svg

log = logging.getLogger(__name__)

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"])
)


def _number(v: Any, digits: int = 0) -> str:
    if v is None or isinstance(v, Undefined):  # not published (yet) by the process
        return "-"
    return f"{v:,.{digits}f}"


def _seconds(v: Any) -> str:
    if v is None or isinstance(v, Undefined):
        return "-"
    return f"{v:.1f} s" if v < 120 else f"{v / 60:.1f} min"


_templates.filters["number"] = _number
_templates.filters["seconds"] = _seconds


def create_app(collector: Collector, window_s: float) -> Starlette:
    def chart(points: list[tuple[float, float]], now: float, title: str, unit: str) -> Markup:
        return Markup(chart_svg(points, now, window_s, title, unit))

    async def page(_request: Request) -> Response:
        status = collector.status()
        html = _templates.get_template("status.html").render(
            s=status, chart=chart, now=status["generated_at_s"], refresh=max(2, int(collector.scrape_seconds)),
            window_min=int(window_s / 60),
        )  # fmt: skip
        return HTMLResponse(html)

    async def api(_request: Request) -> Response:
        status = collector.status()
        for row in [*status["captures"], *status["sinks"]]:
            for key in ("chart_rows", "chart_lag", "chart_batch", "chart_behind"):
                if key in row:
                    row[key] = [[round(t, 3), v] for t, v in row[key]]
        return JSONResponse(status)

    async def health(_request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/", page), Route("/api/status", api), Route("/healthz", health)])


class StatusServer:
    """The page's web server in a thread of its own (for `cdcflow run`); `cdcflow ui` runs it in front."""

    def __init__(self, collector: Collector, host: str, port: int, window_s: float) -> None:
        self.collector = collector
        self.host = host
        try:  # bind here, so a taken port is a clear error and port 0 gets its number before serving
            self.sock = socket.create_server((host, port))
        except OSError as exc:
            raise ConfigError(f"cannot serve the status page on {host}:{port}: {exc.strerror or exc}") from exc
        self.port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(create_app(collector, window_s), log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        """Until SIGINT/SIGTERM (uvicorn's own handlers)."""
        self.collector.start()
        try:
            self.server.run(sockets=[self.sock])
        finally:
            self.collector.stop()

    def start(self) -> None:
        self.collector.start()
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, name="ui-server",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self.collector.stop()
