"""Registers the fake peer cluster in ZooKeeper the way an HBase 2.x cluster appears to a source."""

from __future__ import annotations

import logging
import threading
import uuid

from cdcflow.clients.zookeeper import ZooKeeper
from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import znode
from cdcflow.protocols.hbase.cluster_calls import PeerCluster, ServerAddress
from cdcflow.protocols.hbase.pb import hbase_types_pb2
from cdcflow.sources.hbase.peer import metrics

log = logging.getLogger(__name__)


class PeerRegistry:
    """`<parent>/hbaseid` (stable cluster UUID), `<parent>/rs`, ephemeral `<parent>/rs/<host>,<port>,<startcode>`
    (what a 2.x source reads), and the ephemeral `<parent>/master` one instance holds (what a 3.0 source's
    connection asks for before it calls the master: cluster_calls.py)."""

    def __init__(self, zk_quorum: str, parent: str, session_timeout_s: float = 10.0) -> None:
        self.zk = ZooKeeper(zk_quorum, timeout_s=session_timeout_s)
        self.parent = parent.rstrip("/")
        self.server_znode: str | None = None
        self.master_znode = f"{self.parent}/master"
        self._master_record: bytes | None = None  # our <parent>/master content, once registered
        self.registrations = 0
        # register / re-register / unregister run on different threads (the caller's, kazoo's callback
        # thread, the periodic check): one at a time, so an unregister is never undone by a late re-register.
        self._lock = threading.Lock()
        self.zk.on_new_session(lambda: self._reregister("new ZooKeeper session after expiry"))

    def cluster_id(self) -> uuid.UUID:
        """The peer cluster's UUID: created once, then read back, so it survives restarts."""
        path = f"{self.parent}/hbaseid"
        data = self.zk.get(path)
        if data is None:
            cid = uuid.uuid4()
            payload = znode.PB_MAGIC + hbase_types_pb2.ClusterId(cluster_id=str(cid)).SerializeToString()
            if self.zk.ensure(path, payload):
                log.info("created peer cluster id %s at %s", cid, path)
            data = self.zk.get(path)
            assert data is not None
        return znode.cluster_id(data)

    def prepare(self, now_ms: int) -> uuid.UUID:
        """Create what HBase reads when the peer is added (hbaseid, rs) and record the creation
        time once (`created_ms`), for `hbase.skip_edits_before_peer_creation`."""
        cid = self.cluster_id()
        self.zk.ensure(f"{self.parent}/rs")
        self.zk.ensure(f"{self.parent}/created_ms", str(now_ms).encode())
        return cid

    def created_ms(self) -> int | None:
        data = self.zk.get(f"{self.parent}/created_ms")
        return int(data) if data else None

    def register(self, host: str, port: int, start_code: int) -> str:
        self.cluster_id()
        with self._lock:
            self.server_znode = f"{self.parent}/rs/{host},{port},{start_code}"
            self._master_record = znode.master_record(host, port, start_code)
            self._create()
        log.info("registered %s", self.server_znode)
        return self.server_znode

    def _create(self) -> None:
        assert self.server_znode is not None
        self.zk.ensure(f"{self.parent}/rs")
        self.zk.create_ephemeral(self.server_znode)
        self.registrations += 1
        metrics.REGISTERED.set(1)
        metrics.REGISTRATIONS.inc()
        self._claim_master()

    def _claim_master(self) -> None:
        """Hold `<parent>/master` unless another instance does: the first registered instance is the peer
        cluster's active master; when its session ends, the next check of another instance takes over."""
        if self._master_record is not None and self.zk.try_create_ephemeral(self.master_znode, self._master_record):
            log.info("holding %s: this instance answers as the peer cluster's active master", self.master_znode)

    def ensure_registered(self) -> bool:
        """Re-create our znode if it is gone (session expired, deleted by hand); True if it was.
        Without it HBase has no sink to ship to, and WALs pile up on the source."""
        return self._reregister("znode missing")

    def _reregister(self, reason: str) -> bool:
        with self._lock:
            if self.server_znode is None:
                return False  # not registered yet, or unregistering
            try:
                if self.zk.exists(self.server_znode):
                    metrics.REGISTERED.set(1)
                    self._claim_master()  # the instance that held it may be gone
                    return False
                metrics.REGISTERED.set(0)
                self._create()
            except Exception as exc:
                metrics.REGISTERED.set(0)
                log.warning("could not re-register %s (%s): %r; retrying", self.server_znode, reason, exc)
                return False
        log.warning("re-registered %s (%s)", self.server_znode, reason)
        return True

    @property
    def registered(self) -> bool:
        return self.server_znode is not None and self.zk.connected and self.zk.exists(self.server_znode)

    def servers(self) -> list[str]:
        return self.zk.children(f"{self.parent}/rs")

    def cluster_view(self) -> PeerCluster:
        """The peer cluster as an HBase 3.0 source's calls see it: its id, the instance holding
        `<parent>/master`, every registered instance."""
        raw = self.zk.get(self.master_znode)
        master = None
        if raw:
            try:
                master = ServerAddress(*znode.master_address(raw))
            except WireProtocolError as exc:
                log.warning("unreadable %s: %s", self.master_znode, exc)
        servers = []
        for name in self.servers():
            try:
                servers.append(ServerAddress.parse(name))
            except ValueError:
                log.warning("ignoring %s/rs/%s: not host,port,startcode", self.parent, name)
        return PeerCluster(str(self.cluster_id()), master, tuple(servers))

    def unregister(self) -> None:
        with self._lock:
            if self._master_record is not None and self.zk.get(self.master_znode) == self._master_record:
                self.zk.delete(self.master_znode)  # another instance takes over at its next check
            if self.server_znode:
                self.zk.delete(self.server_znode)
                log.info("unregistered %s", self.server_znode)
                self.server_znode = None
                metrics.REGISTERED.set(0)

    def close(self) -> None:
        self.unregister()
        self.zk.close()
