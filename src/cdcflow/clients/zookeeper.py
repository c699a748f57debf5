"""The only module that imports the ZooKeeper client (kazoo)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from cdcflow.errors import ServiceUnavailable

log = logging.getLogger(__name__)


class ZooKeeper:
    """A small synchronous ZooKeeper session that survives expiry.

    kazoo reconnects by itself, but after a session *expires* (the process was paused or cut off
    longer than the session timeout) every ephemeral znode of the old session is gone. Callers that
    own ephemerals register `on_new_session`; it runs on its own thread each time a new session
    replaces an expired one.
    """

    def __init__(self, quorum: str, timeout_s: float = 10.0) -> None:
        self.quorum = quorum
        self.timeout_s = timeout_s
        self.expirations = 0
        self._lost = False
        self._closing = False
        self._callbacks: list[Callable[[], object]] = []
        self._zk = KazooClient(hosts=quorum, timeout=timeout_s)
        # kazoo logs every reconnect attempt at WARNING; ours is enough.
        logging.getLogger("kazoo.client").setLevel(logging.ERROR)
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=timeout_s)
        except KazooTimeoutError as exc:
            self._zk.close()
            raise ServiceUnavailable(f"ZooKeeper at {quorum} did not answer within {timeout_s}s") from exc

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    def on_new_session(self, callback: Callable[[], object]) -> None:
        self._callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: never block here, never call ZooKeeper from here.
        if state == KazooState.LOST:
            if self._closing:
                return
            self._lost = True
            self.expirations += 1
            log.warning("ZooKeeper session at %s expired: its ephemeral znodes are gone", self.quorum)
        elif state == KazooState.SUSPENDED:
            log.warning("ZooKeeper connection to %s suspended; reconnecting", self.quorum)
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            log.info("new ZooKeeper session at %s", self.quorum)
            for callback in self._callbacks:
                threading.Thread(target=callback, name="zk-new-session", daemon=True).start()

    def get(self, path: str) -> bytes | None:
        try:
            data, _stat = self._zk.get(path)
        except NoNodeError:
            return None
        return bytes(data)

    def exists(self, path: str) -> bool:
        return self._zk.exists(path) is not None

    def ensure(self, path: str, data: bytes = b"") -> bool:
        """Create a persistent znode (and its parents) unless it exists; True if created."""
        try:
            self._zk.create(path, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def create_ephemeral(self, path: str, data: bytes = b"") -> None:
        """An ephemeral znode: it disappears when this session ends (or expires after a crash)."""
        try:
            self._zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            # A previous session of ours with the same name may not have expired yet.
            self._zk.delete(path)
            self._zk.create(path, data, ephemeral=True, makepath=True)

    def try_create_ephemeral(self, path: str, data: bytes = b"") -> bool:
        """An ephemeral znode if none exists at `path`; False (and nothing changed) if one does."""
        try:
            self._zk.create(path, data, ephemeral=True, makepath=True)
            return True
        except NodeExistsError:
            return False

    def delete(self, path: str) -> None:
        try:
            self._zk.delete(path)
        except NoNodeError:
            pass

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk.get_children(path))
        except NoNodeError:
            return []

    def close(self) -> None:
        self._closing = True
        self._zk.stop()
        self._zk.close()
