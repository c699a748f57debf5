from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdcflow.errors import WireProtocolError
from cdcflow.protocols.hbase import znode
from cdcflow.protocols.hbase.framing import parse_message
from cdcflow.protocols.hbase.pb import hbase_types_pb2


def test_master_znode_roundtrip() -> None:
    master = hbase_types_pb2.Master()
    master.master.host_name = "127.0.0.1"
    master.master.port = 16000
    master.master.start_code = 1795337121923
    data = znode.with_metadata(znode.PB_MAGIC + master.SerializeToString(), b"12345@host")
    # what HBase writes: 0xFF, int32 id length, id, PBUF, message
    assert data[:5] == b"\xff\x00\x00\x00\x0a"
    parsed = parse_message(hbase_types_pb2.Master, znode.protobuf_payload(data))
    assert parsed.master.port == 16000


def test_missing_pbuf_magic() -> None:
    with pytest.raises(WireProtocolError, match="PBUF"):
        znode.protobuf_payload(znode.with_metadata(b"plain", b"id"))


@given(st.binary(max_size=64))
def test_garbage_never_crashes(data: bytes) -> None:
    with contextlib.suppress(WireProtocolError):
        znode.protobuf_payload(data)
