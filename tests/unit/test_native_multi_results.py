"""The compiled reader of multi-get answers (cdcflow._native.hbase_multi_results, native/src/hbase_results.rs)
against protobuf's parse and cell_from_proto: generated MultiResponses give the same cells per action, the
ones it must leave to the Python path (an exception, a partial result, cells in a cell block, an unknown cell
type) give None, and so do bytes that are not a MultiResponse unless protobuf reads the same cells in them."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st

from cdcflow.clients.hbase import native
from cdcflow.clients.hbase.native import _multi_results, cell_from_proto
from cdcflow.protocols.hbase.pb import client_pb2

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(native._native_multi_results is None, reason="cdcflow._native is not built"),
]

_cells = st.lists(st.fixed_dictionaries({
    "row": st.binary(max_size=12), "family": st.binary(max_size=4), "qualifier": st.binary(max_size=6),
    "timestamp": st.integers(0, 2**64 - 1), "cell_type": st.sampled_from([4, 4, 4, 8, 12, 14]),
    "value": st.binary(max_size=30),
}), max_size=5)  # fmt: skip


@st.composite
def responses(draw: st.DrawFn) -> tuple[bytes, bool]:
    """(a MultiResponse, whether it holds only plain results)."""
    res = client_pb2.MultiResponse()
    plain = True
    for _ in range(draw(st.integers(0, 3))):
        rar = res.regionActionResult.add()
        for index in range(draw(st.integers(0, 4))):
            roe = rar.resultOrException.add(index=index)
            if draw(st.integers(0, 9)) == 0:  # a failed action
                roe.exception.name, plain = "org.apache.hadoop.hbase.NotServingRegionException", False
                continue
            if draw(st.booleans()):
                for cell in draw(_cells):
                    roe.result.cell.add(**cell)
                oddity = draw(st.integers(0, 19))
                if oddity == 0:
                    roe.result.partial, plain = True, False
                elif oddity == 1:
                    roe.result.associated_cell_count, plain = 3, False
                elif oddity == 2:
                    roe.result.stale = True  # read and ignored, as protobuf's reader does
        if draw(st.integers(0, 19)) == 0:
            rar.exception.name, plain = "org.apache.hadoop.hbase.RegionTooBusyException", False
    return res.SerializeToString(), plain


def by_protobuf(body: bytes) -> list[list[tuple[int, list[Any]]]]:
    res = client_pb2.MultiResponse.FromString(body)
    return [[(roe.index, [cell_from_proto(c) for c in roe.result.cell]) for roe in rar.resultOrException]
            for rar in res.regionActionResult]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(responses())
def test_plain_answers_give_protobufs_cells_and_the_rest_goes_to_python(response: tuple[bytes, bool]) -> None:
    body, plain = response
    got = _multi_results(body)
    if plain:
        assert got == by_protobuf(body)
        assert all(type(c).__name__ == "Cell" for region in got for _i, cells in region for c in cells)
    else:
        assert got is None


@settings(max_examples=400, deadline=None)
@given(responses(), st.data())
def test_damaged_bytes_give_none_or_what_protobuf_reads(response: tuple[bytes, bool], data: st.DataObject) -> None:
    body, _plain = response
    if body:
        at = data.draw(st.integers(0, len(body) - 1))
        body = body[:at] + bytes([data.draw(st.integers(0, 255))]) + body[at + 1 :]
        body = body[: data.draw(st.integers(0, len(body)))]
    got = _multi_results(body)
    if got is None:
        return
    try:
        expected = by_protobuf(body)
    except (DecodeError, KeyError):  # KeyError: a cell type cell_from_proto does not know
        pytest.fail("the compiled reader read bytes that protobuf refuses")
    assert got == expected
