"""Free local ports."""

from __future__ import annotations

import socket


def is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def choose(names: list[str], previous: dict[str, int]) -> dict[str, int]:
    """One free port per name, keeping the previous port where it is still free (stable addresses)."""
    chosen: dict[str, int] = {}
    for name in names:
        old = previous.get(name)
        if old and old not in chosen.values() and is_free(old):
            chosen[name] = old
            continue
        port = free_port()
        while port in chosen.values():
            port = free_port()
        chosen[name] = port
    return chosen


def is_listening(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
