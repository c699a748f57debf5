"""The only module that imports the ZooKeeper client (kazoo)."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
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

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()
