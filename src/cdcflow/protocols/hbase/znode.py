"""Encoding of HBase's ZooKeeper znode payloads (pure functions).

HBase prefixes most znodes with a "recoverable ZooKeeper" header: 0xFF, a 4-byte length, that
many bytes of writer id; protobuf payloads then start with the magic b"PBUF".
"""

from __future__ import annotations

import struct
import uuid

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase.framing import parse_message
from cdcflow.protocols.hbase.pb import hbase_types_pb2

ZNODE_MAGIC = 0xFF
PB_MAGIC = b"PBUF"


def strip_metadata(data: bytes) -> bytes:
    """Drop the 0xFF + length + id header if present."""
    if not data or data[0] != ZNODE_MAGIC:
        return data
    if len(data) < 5:
        raise WireProtocolError("znode metadata header truncated")
    (id_len,) = struct.unpack_from(">i", data, 1)
    if id_len < 0 or 5 + id_len > len(data):
        raise WireProtocolError(f"znode metadata length {id_len} out of range")
    return data[5 + id_len :]


def protobuf_payload(data: bytes) -> bytes:
    """The protobuf bytes of a znode written by HBase (metadata header, then PBUF, then message)."""
    body = strip_metadata(data)
    if not body.startswith(PB_MAGIC):
        raise WireProtocolError("znode payload lacks the PBUF magic")
    return body[len(PB_MAGIC) :]


def with_metadata(payload: bytes, writer_id: bytes) -> bytes:
    """Wrap `payload` the way HBase's RecoverableZooKeeper writes it."""
    return bytes([ZNODE_MAGIC]) + struct.pack(">i", len(writer_id)) + writer_id + payload


def cluster_id(data: bytes) -> uuid.UUID:
    """The cluster UUID in `<parent>/hbaseid` (a ClusterId protobuf, or a bare UUID string)."""
    body = strip_metadata(data)
    if body.startswith(PB_MAGIC):
        return uuid.UUID(parse_message(hbase_types_pb2.ClusterId, body[len(PB_MAGIC) :]).cluster_id)
    try:
        return uuid.UUID(body.decode())
    except ValueError as exc:
        raise WireProtocolError(f"unreadable hbaseid znode: {body[:64]!r}") from exc


def master_record(host: str, port: int, start_code: int, writer_id: bytes = b"cdcflow") -> bytes:
    """The `<parent>/master` znode naming a server as the cluster's active master (ZooKeeper.proto's Master)."""
    server = hbase_types_pb2.ServerName(host_name=host, port=port, start_code=start_code)
    return with_metadata(PB_MAGIC + hbase_types_pb2.Master(master=server).SerializeToString(), writer_id)


def master_address(data: bytes) -> tuple[str, int, int]:
    """(host, port, start code) of the active master a `<parent>/master` znode names."""
    master = parse_message(hbase_types_pb2.Master, protobuf_payload(data)).master
    return master.host_name, master.port, master.start_code
