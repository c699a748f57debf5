"""What every stack service provides. One subclass per real component."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar


class Service(ABC):
    name: ClassVar[str]
    # Names of the ports the service needs; the manager picks free ones (a class's, or an instance's when they
    # depend on its size).
    port_names: tuple[str, ...]
    # How long a start may take before it counts as failed.
    start_timeout_s: ClassVar[float] = 120.0
    # How long SIGTERM may take before SIGKILL.
    stop_grace_s: ClassVar[float] = 30.0
    # A component without a process of its own lives in this one's (Phoenix in HBase): the
    # manager starts the host instead and takes the endpoints from `endpoints_in`.
    runs_in: ClassVar[str | None] = None

    def endpoints_in(self, host: dict[str, Any]) -> dict[str, Any]:
        """The endpoints of a `runs_in` component, from its host's."""
        raise NotImplementedError

    @abstractmethod
    def install(self) -> None:
        """Download or install what the service needs. Idempotent and cached."""

    @abstractmethod
    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        """Launch the service in the background; return (pid, endpoints clients will use)."""

    @abstractmethod
    def check(self, endpoints: dict[str, Any]) -> str:
        """A real client call against the running service; return a one-line detail or raise."""

    def prepare(self, endpoints: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Runs once the service answers, on every `up` (must be idempotent): users, grants, ..."""
