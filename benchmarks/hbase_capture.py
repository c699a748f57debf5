"""Benchmark of the HBase capture path (issue #3).

Runs against the local stack's real Kafka (`cdcflow stack up kafka hbase` first, or pass
--bootstrap). Three figures, measured in the same run on the same machine:

1. capture path: a stream of ReplicateWALEntry calls replayed over TCP into the peer server
   (decode → events → JSON → Kafka, answered after every ack); calls/s, rows/s, cells/s, MB/s
   of cell-block input and acknowledgement latency p50/p99;
2. baseline: the raw confluent-kafka producer sending the same already-encoded events with the
   same producer settings (idempotent, acks=all, lz4), and the ratio capture / baseline;
3. end to end (with --e2e): real HBase writes through replication to acknowledged Kafka records.

The call stream is built once up front (--record FILE keeps it) with the same encoder the
golden-vector tests check: 100 entries x 10 rows x 5 cells of 100-byte values per call by default.
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.clients.kafka.producer import AsyncProducer, ProducerSettings
from cdcflow.config.paths import default_stack_home
from cdcflow.events.cells import Cell, CellType
from cdcflow.events.json_codec import encode
from cdcflow.jars import versions
from cdcflow.protocols.hbase import framing
from cdcflow.protocols.hbase.cellblock import KEY_VALUE_CODEC_WITH_TAGS, encode_cells
from cdcflow.protocols.hbase.pb import rpc_pb2, wal_pb2
from cdcflow.protocols.hbase.wal import decode_replicate_call
from cdcflow.sources.hbase.changes import row_changes
from cdcflow.sources.hbase.peer.handler import ReplicationHandler, TopicLimits
from cdcflow.sources.hbase.peer.server import PeerServer
from cdcflow.sources.hbase.routing import Router
from cdcflow.stack import Stack


def build_calls(
    n_calls: int, entries: int, rows: int, cells: int, value_size: int, table: str
) -> list[tuple[bytes, bytes]]:
    rng = random.Random(1)
    calls = []
    seq = 1
    for _ in range(n_calls):
        req = wal_pb2.ReplicateWALEntryRequest()
        block_cells: list[Cell] = []
        for _ in range(entries):
            e_cells = []
            for _ in range(rows):
                row = b"row-%08d" % rng.randrange(10**8)
                for c in range(cells):
                    e_cells.append(
                        Cell(row, b"cf", b"q%d" % c, 1_700_000_000_000 + seq, CellType.PUT, rng.randbytes(value_size))
                    )
            e = req.entry.add(associated_cell_count=len(e_cells))
            e.key.encoded_region_name = uuid.uuid4().hex.encode()
            e.key.table_name = table.encode()
            e.key.log_sequence_number = seq
            e.key.write_time = int(time.time() * 1000)
            seq += 1
            block_cells.extend(e_cells)
        calls.append((req.SerializeToString(), encode_cells(block_cells)))
    return calls


async def replay(calls: list[tuple[bytes, bytes]], port: int, connections: int) -> tuple[float, list[float]]:
    """Send the calls over `connections` sockets, each with up to 4 calls in flight."""
    latencies: list[float] = []
    queue: asyncio.Queue[tuple[int, tuple[bytes, bytes]]] = asyncio.Queue()
    for i, c in enumerate(calls):
        queue.put_nowait((i, c))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        header = rpc_pb2.ConnectionHeader(service_name="AdminService", cell_block_codec_class=KEY_VALUE_CODEC_WITH_TAGS)
        header.user_info.effective_user = "bench"
        writer.write(framing.connection_preamble(header))
        sent: dict[int, float] = {}
        frames = framing.FrameReader()
        inflight = asyncio.Semaphore(4)
        done = asyncio.Event()
        outstanding = 0
        finished_sending = False

        async def read_loop() -> None:
            nonlocal outstanding
            while True:
                payload = frames.next_frame()
                if payload is None:
                    data = await reader.read(1 << 16)
                    if not data:
                        return
                    frames.feed(data)
                    continue
                resp = framing.parse_response(payload)
                if resp.exception is not None:
                    raise RuntimeError(resp.exception.stack_trace)
                latencies.append(time.perf_counter() - sent.pop(resp.call_id))
                outstanding -= 1
                inflight.release()
                if finished_sending and outstanding == 0:
                    done.set()
                    return

        rt = asyncio.create_task(read_loop())
        while True:
            try:
                i, (param, block) = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            await inflight.acquire()
            h = rpc_pb2.RequestHeader(call_id=i, method_name="ReplicateWALEntry", request_param=True, timeout=60000)
            sent[i] = time.perf_counter()
            outstanding += 1
            writer.write(framing.encode_call(h, wal_pb2.ReplicateWALEntryRequest.FromString(param), block))
            await writer.drain()
        finished_sending = True
        if outstanding:
            await done.wait()
        rt.cancel()
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return time.perf_counter() - start, latencies


async def capture_run(
    calls: list[tuple[bytes, bytes]], settings: ProducerSettings, prefix: str, connections: int
) -> tuple[float, list[float]]:
    producer = AsyncProducer(settings)
    topics = TopicLimits(settings.bootstrap_servers, 8 * 2**20)
    sink = ReplicationHandler(producer, Router((), prefix), "bench", topics=topics)
    server = PeerServer(sink, "127.0.0.1", 0, max_inflight_bytes=512 << 20, max_frame_bytes=256 << 20)
    port = await server.start()
    try:
        return await replay(calls, port, connections)
    finally:
        await server.stop()
        producer.close()


def baseline_run(records: list[tuple[str, bytes, bytes]], settings: ProducerSettings) -> float:
    producer = confluent_kafka.Producer(settings.librdkafka_config())
    errors = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for topic, key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=cb)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or errors:
        raise RuntimeError(f"baseline: {remaining} unacknowledged, errors {errors[:3]}")
    return elapsed


def machine() -> str:
    lib = confluent_kafka.libversion()[0]
    from importlib.metadata import version

    return (f"{machine_summary()}; "
            f"confluent-kafka {version('confluent-kafka')} / librdkafka {lib}; Kafka {versions.KAFKA_VERSION}; "
            f"HBase {versions.HBASE_VERSION}")  # fmt: skip


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=100)[int(p) - 1] if len(values) > 1 else values[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="Kafka bootstrap servers (default: the local stack's)")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--entries", type=int, default=100)
    ap.add_argument("--rows", type=int, default=10)
    ap.add_argument("--cells", type=int, default=5)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--record", type=Path, help="keep the generated call stream in this file (reused if present)")
    ap.add_argument("--e2e", type=int, default=0, metavar="ROWS", help="also measure ROWS real HBase writes end to end")
    args = ap.parse_args()
    bootstrap = args.bootstrap or Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    table = "bench:events"

    if args.record and args.record.exists():
        calls = pickle.loads(args.record.read_bytes())
    else:
        calls = build_calls(args.calls, args.entries, args.rows, args.cells, args.value_size, table)
        if args.record:
            args.record.write_bytes(pickle.dumps(calls))
    input_mb = sum(len(p) + len(b) for p, b in calls) / 1e6
    # The baseline sends exactly the events the capture path produces, already encoded.
    records = []
    for p, b in calls:
        for entry in decode_replicate_call(p, b).entries:
            for ev in row_changes(entry, "bench"):
                records.append((f"{prefix}-base.bench.events", ev.key, encode(ev)))
    rows = len(records)
    cells = rows * args.cells
    settings = ProducerSettings(bootstrap)
    # Topics exist before timing starts (auto-creation would be timed otherwise).
    from cdcflow.clients.kafka import create_topic

    create_topic(bootstrap, f"{prefix}.bench.events", partitions=4)
    create_topic(bootstrap, f"{prefix}-base.bench.events", partitions=4)

    cap_s, lat = asyncio.run(capture_run(calls, settings, prefix, args.connections))
    base_s = baseline_run(records, settings)
    event_mb = sum(len(v) for _, _, v in records) / 1e6

    print(f"machine: {machine()}")
    print(f"workload: {len(calls)} calls x {args.entries} entries x {args.rows} rows x {args.cells} cells, "
          f"{args.value_size}-byte values; {rows} rows, {cells} cells, {input_mb:.1f} MB of calls, "
          f"{event_mb:.1f} MB of JSON events; {args.connections} connections")  # fmt: skip
    p50, p99 = pct(lat, 50) * 1000, pct(lat, 99) * 1000
    print(f"capture path : {len(calls)/cap_s:8.1f} calls/s {rows/cap_s:10.0f} rows/s {cells/cap_s:10.0f} cells/s "
          f"{input_mb/cap_s:6.1f} MB/s in; ack latency p50 {p50:.0f} ms, p99 {p99:.0f} ms")  # fmt: skip
    print(f"raw producer : {rows / base_s:10.0f} rows/s {event_mb / base_s:6.1f} MB/s (same encoded events)")
    print(f"ratio capture/raw producer: {base_s / cap_s:.2f}")
    if args.e2e:
        e2e(args.e2e, bootstrap)


def e2e(n_rows: int, bootstrap: str) -> None:
    """Real HBase writes → replication → peer → acknowledged Kafka records; rows/s end to end."""
    import tempfile

    import yaml

    from cdcflow.clients.hbase import connect
    from cdcflow.clients.hbase.model import ColumnFamily, Put
    from cdcflow.clients.kafka import TopicReader

    hb = Stack(default_stack_home()).endpoints("hbase")
    name = f"bench{uuid.uuid4().hex[:8]}"
    client = connect(hb["zk_quorum"])
    client.create_table(name, [ColumnFamily("cf")], split_keys=[b"row-3", b"row-6"])
    cfg = Path(tempfile.mkdtemp()) / "bench.yaml"
    peer_cfg = {"peer_id": name, "znode_parent": f"/{name}"}
    hbase_cfg = {"zk_quorum": hb["zk_quorum"], "topic_prefix": name, "peer": peer_cfg}
    cfg.write_text(yaml.safe_dump({"kafka": {"bootstrap_servers": bootstrap}, "hbase": hbase_cfg}))
    cli = [sys.executable, "-m", "cdcflow.cli.main"]
    subprocess.run(
        [*cli, "hbase", "peer", "add", "--config", str(cfg), f"--table={name}"], check=True, capture_output=True
    )
    peer = subprocess.Popen(
        [*cli, "hbase", "run", "--config", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        reader = TopicReader(bootstrap, [f"{name}.default.{name}"])
        time.sleep(3)
        start = time.perf_counter()
        rng = random.Random(5)
        batch = []
        for i in range(n_rows):
            batch.append(Put(b"row-%d-%07d" % (i % 10, i)).add(b"cf", b"v", rng.randbytes(100), 1000 + i))
            if len(batch) == 500:
                client.mutate_batch(name, batch)
                batch = []
        if batch:
            client.mutate_batch(name, batch)
        written = time.perf_counter() - start
        seen: set[bytes | None] = set()
        deadline = time.monotonic() + 600
        while len(seen) < n_rows and time.monotonic() < deadline:
            seen.update(r.key for r in reader.poll(1.0))
        total = time.perf_counter() - start
        reader.close()
        print(f"end to end   : {n_rows} HBase rows written in {written:.1f} s ({n_rows/written:.0f} rows/s); "
              f"all in Kafka after {total:.1f} s ({len(seen)/total:.0f} rows/s end to end)")  # fmt: skip
    finally:
        peer.terminate()
        peer.wait(30)
        subprocess.run([*cli, "hbase", "peer", "remove", "--config", str(cfg)], capture_output=True)
        client.close()


if __name__ == "__main__":
    main()
