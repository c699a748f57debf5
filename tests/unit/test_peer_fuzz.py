"""Structure-aware fuzzing of what the peer does with bytes from the network, before any I/O.

Frames start valid (preamble, connection header, a ReplicateWALEntry call with entries and a cell
block) and are then mutated where it hurts: bit flips, truncation, inserted bytes, and lying length
fields (frame length, cell_block_meta, associated_cell_count, cell lengths). Each is fed in random
chunks to the sans-I/O connection and every call it yields goes through the handler's pure part.
Allowed outcomes: events, a WireProtocolError (the connection is closed), a BulkLoadNotSupported
(answered with an error). Anything else is a crash; memory must stay bounded.

10,000 frames here; `make soak` runs 1,000,000 (CDCFLOW_SOAK=1).
"""

from __future__ import annotations

import os
import random
import resource
import struct
import tracemalloc
from typing import cast

import pytest

from cdcflow.clients.kafka.producer import AsyncProducer
from cdcflow.errors import WireProtocolError
from cdcflow.events.cells import Cell, CellType
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.cellblock import KEY_VALUE_CODEC_WITH_TAGS, encode_cells
from cdcflow.protocols.hbase.pb import rpc_pb2, wal_pb2
from cdcflow.protocols.hbase.server import CallReceived, ServerConnection
from cdcflow.sources.hbase.changes import BulkLoadNotSupported
from cdcflow.sources.hbase.peer.handler import CallStats, ReplicationHandler, TopicLimits
from cdcflow.sources.hbase.routing import Router

pytestmark = [pytest.mark.unit, pytest.mark.fuzz]
FRAMES = 1_000_000 if os.environ.get("CDCFLOW_SOAK") else 10_000
MAX_FRAME = 1 << 20


def hello() -> bytes:
    header = rpc_pb2.ConnectionHeader(service_name="AdminService", cell_block_codec_class=KEY_VALUE_CODEC_WITH_TAGS)
    header.user_info.effective_user = "hbase"
    return framing.connection_preamble(header)


def valid_call(rng: random.Random, call_id: int) -> bytes:
    req = wal_pb2.ReplicateWALEntryRequest()
    cells: list[Cell] = []
    for _ in range(rng.randint(1, 4)):
        entry_cells = [
            Cell(
                b"row%d" % rng.randrange(5),
                b"cf",
                b"q%d" % rng.randrange(3),
                rng.randrange(1, 1 << 40),
                rng.choice(list(CellType)),
                rng.randbytes(rng.randrange(0, 40)),
                rng.randbytes(rng.randrange(0, 8)) if rng.random() < 0.2 else b"",
            )
            for _ in range(rng.randint(0, 5))
        ]
        e = req.entry.add(associated_cell_count=len(entry_cells))
        e.key.encoded_region_name = rng.randbytes(16).hex().encode()
        e.key.table_name = rng.choice([b"t", b"ns:t", b"hbase:meta", b"\xff"])
        e.key.log_sequence_number = rng.randrange(1 << 40)
        e.key.write_time = rng.randrange(1 << 42)
        cid = e.key.cluster_ids.add()
        cid.most_sig_bits, cid.least_sig_bits = rng.randrange(1 << 64), rng.randrange(1 << 64)
        cells += entry_cells
    header = rpc_pb2.RequestHeader(call_id=call_id, method_name="ReplicateWALEntry", request_param=True, timeout=60000)
    return framing.encode_call(header, req, encode_cells(cells))


def mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(7)
        if kind == 0 and data:  # bit flips
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 1 and len(data) > 4:  # truncate, keeping the frame length honest half the time
            cut = rng.randrange(4, len(data))
            del data[cut:]
            if rng.random() < 0.5:
                data[:4] = struct.pack(">i", len(data) - 4)
        elif kind == 2:  # inserted bytes
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.randbytes(rng.randint(1, 16))
        elif kind == 3 and len(data) >= 4:  # a lying frame length (bounded by the cap or not)
            data[:4] = struct.pack(">i", rng.choice([0, 1, len(data), MAX_FRAME + 1, -1, 2**31 - 1]))
        elif kind == 4:  # a lying 4-byte integer anywhere (cell, key, value or tags lengths)
            i = rng.randrange(max(1, len(data) - 4))
            data[i : i + 4] = struct.pack(">i", rng.choice([0, -1, 1 << 30, rng.randrange(1 << 16)]))
        elif kind == 5 and len(data) > 12:  # a varint field set to a huge value (counts, lengths)
            i = rng.randrange(4, len(data) - 1)
            data[i : i + 2] = b"\xff\x7f"
        elif kind == 6 and len(data) > 8:  # duplicated region (cells announced twice)
            i, j = sorted(rng.sample(range(4, len(data)), 2))
            data[j:j] = data[i:j]
    return bytes(data)


class _NoProducer:
    """to_records never touches the producer (a port); this stands in for it."""


def test_a_million_mutated_frames_never_crash_hang_or_grow(capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(20261125)
    handler = ReplicationHandler(
        cast(AsyncProducer, _NoProducer()), Router((), "fuzz"), "fuzz", topics=TopicLimits("unused:9092", 1 << 20)
    )
    outcomes: dict[str, int] = {}
    tracemalloc.start()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        conn: ServerConnection | None = None
        for n in range(FRAMES):
            if conn is None or conn.closed:
                conn = ServerConnection(max_frame_size=MAX_FRAME)
                conn.receive_data(hello())
            frame = valid_call(rng, n) if rng.random() < 0.05 else mutate(rng, valid_call(rng, n))
            outcome = feed(rng, conn, handler, frame)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome != "events":
                conn = None  # the server closes a connection after a protocol error
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    with capsys.disabled():
        print(f"\nfuzz: {FRAMES} frames, outcomes {outcomes}, traced peak {peak / 2**20:.1f} MB, "
              f"max RSS +{rss_growth_mb:.0f} MB")  # fmt: skip
    assert outcomes.get("events", 0) > FRAMES // 100, "the generator must also produce frames that decode"
    assert outcomes.get("protocol error", 0) > FRAMES // 10, "the mutations must reach the error paths"
    assert peak < 64 * 2**20, "memory grew with the number of frames"


def feed(rng: random.Random, conn: ServerConnection, handler: ReplicationHandler, frame: bytes) -> str:
    try:
        pos = 0
        while pos < len(frame):
            step = rng.randint(1, 4096)
            for event in conn.receive_data(frame[pos : pos + step]):
                if isinstance(event, CallReceived):
                    decoded = handler.to_records(event.param, event.cell_block, CallStats())
                    assert all(isinstance(r.value, bytes) for r in decoded.records)
            pos += step
    except WireProtocolError:
        return "protocol error"
    except BulkLoadNotSupported:
        return "refused"
    except Exception as exc:  # anything else is a crash of the peer's decoding
        raise AssertionError(f"{type(exc).__name__}: {exc} on frame {frame[:64]!r}...") from exc
    if conn.buffered:
        return "incomplete"  # a frame announcing more than arrived: waits for bytes (the idle timeout ends it)
    return "events"
