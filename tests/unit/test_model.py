from __future__ import annotations

import pytest

from cdcflow.clients.hbase.model import Delete, Increment, Put, TableName
from cdcflow.clients.hbase.native import mutation_to_proto
from cdcflow.events.cells import CellType
from cdcflow.protocols.hbase.pb import client_pb2

MP = client_pb2.MutationProto


@pytest.mark.parametrize(
    ("name", "ns", "qualifier", "text"),
    [("t1", "default", "t1", "t1"), ("ns:t", "ns", "t", "ns:t"), ("default:t", "default", "t", "t")],
)
def test_table_name(name: str, ns: str, qualifier: str, text: str) -> None:
    t = TableName.parse(name)
    assert (t.namespace, t.qualifier, str(t)) == (ns, qualifier, text)


@pytest.mark.parametrize("bad", ["", ":t", "ns:"])
def test_bad_table_name(bad: str) -> None:
    with pytest.raises(ValueError):
        TableName.parse(bad)


def test_put_keeps_explicit_timestamps_grouped_by_family() -> None:
    proto = mutation_to_proto(
        Put(b"r").add(b"f", b"a", b"1", 10).add(b"g", b"b", b"2").add(b"f", b"c", b"3", 30).mutation
    )
    assert proto.mutate_type == MP.PUT
    assert [cv.family for cv in proto.column_value] == [b"f", b"g"]
    f = proto.column_value[0].qualifier_value
    assert [(q.qualifier, q.value, q.timestamp) for q in f] == [(b"a", b"1", 10), (b"c", b"3", 30)]
    assert not proto.column_value[1].qualifier_value[0].HasField("timestamp")  # server time


def test_every_delete_type_maps_to_hbase_delete_type() -> None:
    d = Delete(b"r").column_version(b"f", b"a", 5).column(b"f", b"b", 6).family(b"g", 7).family_version(b"h", 8)
    proto = mutation_to_proto(d.mutation)
    got = [
        (cv.family, qv.qualifier, qv.timestamp, qv.delete_type)
        for cv in proto.column_value
        for qv in cv.qualifier_value
    ]
    assert got == [
        (b"f", b"a", 5, MP.DELETE_ONE_VERSION),
        (b"f", b"b", 6, MP.DELETE_MULTIPLE_VERSIONS),
        (b"g", b"", 7, MP.DELETE_FAMILY),
        (b"h", b"", 8, MP.DELETE_FAMILY_VERSION),
    ]
    assert CellType.DELETE_COLUMN == 12


def test_row_delete_has_no_columns_and_optional_timestamp() -> None:
    proto = mutation_to_proto(Delete(b"r", timestamp=20).mutation)
    assert proto.mutate_type == MP.DELETE and proto.timestamp == 20 and not proto.column_value


def test_increment_carries_a_nonce_and_8_byte_amount() -> None:
    proto = mutation_to_proto(Increment(b"r").add(b"f", b"n", -2).mutation)
    assert proto.mutate_type == MP.INCREMENT and proto.HasField("nonce")
    assert proto.column_value[0].qualifier_value[0].value == (-2).to_bytes(8, "big", signed=True)
