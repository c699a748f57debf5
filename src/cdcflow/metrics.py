"""Serving Prometheus metrics, the same way in every process (docs/operations.md lists the names).

Conventions: every name starts with `cdcflow_<process>_` (hbase, mysql, pipeline, verify); counters
end in `_total`, durations are in seconds (`_seconds`), times are Unix seconds (`_timestamp_seconds`);
labels name the thing measured (`sink`, `source`, `check`), never a value that grows without bound.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from cdcflow.errors import ConfigError

log = logging.getLogger(__name__)

# A probe answers None when all is well, else why not. Processes register theirs (`add_probe`); the
# metrics port answers /livez (alias /healthz) and /readyz from them, as Kubernetes probes expect:
# 200 with "ok", or 503 with the reasons.
Probe = Callable[[], str | None]
_probes: dict[str, dict[str, Probe]] = {"live": {}, "ready": {}}
_probes_lock = threading.Lock()


def add_probe(kind: str, name: str, probe: Probe) -> None:
    """`kind`: "live" (restart the process if it fails) or "ready" (send it no work while it fails)."""
    if kind not in _probes:
        raise ValueError(f"probe kind {kind!r}: live or ready")
    with _probes_lock:
        _probes[kind][name] = probe


def clear_probes() -> None:
    with _probes_lock:
        for probes in _probes.values():
            probes.clear()


def probe_result(kind: str) -> tuple[bool, str]:
    """(all well, the text to answer): each failing probe's name and reason, or "ok"."""
    with _probes_lock:
        probes = list(_probes[kind].items())
    failing = []
    for name, probe in probes:
        try:
            reason = probe()
        except Exception as exc:  # a probe that breaks says so instead of taking the endpoint down
            reason = f"probe failed: {exc!r}"
        if reason is not None:
            failing.append(f"{name}: {reason}")
    return (not failing, "\n".join(failing) if failing else "ok")


def _app() -> Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]:
    metrics_app = make_wsgi_app()
    kinds = {"/livez": "live", "/healthz": "live", "/readyz": "ready"}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        kind = kinds.get(environ.get("PATH_INFO", ""))
        if kind is None:
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        ok, text = probe_result(kind)
        start_response("200 OK" if ok else "503 Service Unavailable", [("Content-Type", "text/plain")])
        return [text.encode() + b"\n"]

    return app


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is not worth a log line


def serve_metrics(port: int, host: str = "127.0.0.1") -> int:
    """Serve this process's metrics on http://host:port/metrics (port 0: any free one), and its liveness and
    readiness on /livez (/healthz) and /readyz; the port."""
    try:
        server = make_server(host, port, _app(), _ThreadingServer, handler_class=_QuietHandler)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from exc
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    bound = int(server.server_port)
    log.info("metrics on http://%s:%d/metrics (probes: /livez, /readyz)", host, bound)
    return bound
