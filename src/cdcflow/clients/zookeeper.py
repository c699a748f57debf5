"""The only module that imports the ZooKeeper client (kazoo)."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from cdcflow.errors import ServiceUnavailable

log = logging.getLogger(__name__)


class ZooKeeper:
    """A small synchronous ZooKeeper session."""

    def __init__(self, quorum: str, timeout_s: float = 10.0) -> None:
        self.quorum = quorum
        self._zk = KazooClient(hosts=quorum, timeout=timeout_s)
        # kazoo logs every reconnect attempt at WARNING; ours is enough.
        logging.getLogger("kazoo.client").setLevel(logging.ERROR)
        try:
            self._zk.start(timeout=timeout_s)
        except KazooTimeoutError as exc:
            self._zk.close()
            raise ServiceUnavailable(f"ZooKeeper at {quorum} did not answer within {timeout_s}s") from exc

    def get(self, path: str) -> bytes | None:
        try:
            data, _stat = self._zk.get(path)
        except NoNodeError:
            return None
        return bytes(data)

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
        self._zk.stop()
        self._zk.close()
