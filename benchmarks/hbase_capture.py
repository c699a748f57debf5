"""Benchmark of the HBase capture path.

Runs against the local stack's real Kafka (`cdcflow stack up kafka hbase` first, or pass
--bootstrap). Three figures, measured in the same run on the same machine:

1. capture path: a stream of ReplicateWALEntry calls replayed over TCP into the peer server by a
   process of its own, as HBase would (decode → events → JSON → Kafka, answered after every ack);
   calls/s, rows/s, cells/s, MB/s of cell-block input and acknowledgement latency p50/p99;
2. baseline: the raw confluent-kafka producer sending the same already-encoded events with the
   same producer settings (idempotent, acks=all, lz4), and the ratio capture / baseline;
3. end to end (with --e2e): real HBase writes through replication to acknowledged Kafka records;
4. the peer (with --anchor-rows N): Apache's hbase-kafka-proxy and `cdcflow hbase run` drain the same
   backlog of N HBase rows one after the other, through the side-by-side kit in $CDCFLOW_ANCHORS/
   (hbase-kafka-proxy/README.md there; skipped with a line saying so when the kit is not set up), once
   per proxy producer profile: its own defaults (acks=1) and cdcflow's settings (acks=all, idempotent).

With --runs N the capture path and the baseline run N times (alternating); figures are median [min-max].
--python-path runs the capture without the compiled hot path (cdcflow._native), for an A/B.

The call stream is built once up front (--record FILE keeps it) with the same encoder the
golden-vector tests check: 100 entries x 10 rows x 5 cells of 100-byte values per call by default.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import pickle
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

import confluent_kafka
from anchors import Figures, run_kit  # type: ignore[import-not-found]
from machine import machine_summary  # type: ignore[import-not-found]

from cdcflow.clients.kafka.producer import AsyncProducer, ProducerSettings
from cdcflow.config.paths import default_stack_home
from cdcflow.dev.stack import Stack
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


def replay_process(calls_path: str, port: int, connections: int, conn: Connection) -> None:
    """The replaying client in a process of its own (as HBase is): loads the calls, says it is ready,
    replays on the word, sends back (seconds, latencies)."""
    calls = pickle.loads(Path(calls_path).read_bytes())
    conn.send("ready")
    conn.recv()
    conn.send(asyncio.run(replay(calls, port, connections)))


async def capture_run(
    calls_path: Path, settings: ProducerSettings, prefix: str, connections: int, native: bool
) -> tuple[float, list[float]]:
    producer = AsyncProducer(settings)
    topics = TopicLimits(settings.bootstrap_servers, 8 * 2**20)
    sink = ReplicationHandler(producer, Router((), prefix), "bench", topics=topics, native=native)
    server = PeerServer(sink, "127.0.0.1", 0, max_inflight_bytes=512 << 20, max_frame_bytes=256 << 20)
    port = await server.start()
    ours, theirs = multiprocessing.get_context("spawn").Pipe()
    client = multiprocessing.get_context("spawn").Process(
        target=replay_process, args=(str(calls_path), port, connections, theirs), daemon=True
    )
    client.start()
    try:
        assert await asyncio.to_thread(ours.recv) == "ready"
        ours.send("go")
        elapsed, latencies = await asyncio.to_thread(ours.recv)
        return elapsed, latencies
    finally:
        client.join(30)
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
    ap.add_argument("--runs", type=int, default=1, help="capture path and baseline this many times each")
    ap.add_argument("--python-path", action="store_true", help="capture without the compiled hot path")
    ap.add_argument("--anchor-rows", type=int, default=0, help="also drain ROWS through the proxy kit and cdcflow")
    ap.add_argument("--anchor-repeat", type=int, default=3, help="kit runs per proxy producer profile")
    ap.add_argument("--anchor-profiles", default="upstream,cdcflow", help="proxy producer profiles to run")
    ap.add_argument(
        "--formats",
        default="",
        help="also drain --format-rows real HBase rows per output format, "
        "e.g. cdcflow,upsert-json,upsert-avro (upsert within 0.8x of cdcflow)",
    )
    ap.add_argument("--format-rows", type=int, default=20_000, help="rows per format for --formats")
    args = ap.parse_args()
    bootstrap = args.bootstrap or Stack(default_stack_home()).endpoints("kafka")["bootstrap_servers"]
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    table = "bench:events"

    calls_path = args.record or Path(tempfile.gettempdir()) / f"{prefix}-calls.pkl"
    if args.record and args.record.exists():
        calls = pickle.loads(args.record.read_bytes())
    else:
        calls = build_calls(args.calls, args.entries, args.rows, args.cells, args.value_size, table)
        calls_path.write_bytes(pickle.dumps(calls))  # the replaying process reads them from here
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

    event_mb = sum(len(v) for _, _, v in records) / 1e6
    print(f"machine: {machine()}")
    print(f"workload: {len(calls)} calls x {args.entries} entries x {args.rows} rows x {args.cells} cells, "
          f"{args.value_size}-byte values; {rows} rows, {cells} cells, {input_mb:.1f} MB of calls, "
          f"{event_mb:.1f} MB of JSON events; {args.connections} connections; "
          f"{'Python path' if args.python_path else 'compiled hot path'}")  # fmt: skip
    fig = Figures()
    for run in range(args.runs):
        order = ("capture", "baseline") if run % 2 == 0 else ("baseline", "capture")
        for what in order:
            if what == "capture":
                cap_s, lat = asyncio.run(
                    capture_run(calls_path, settings, prefix, args.connections, not args.python_path)
                )
            else:
                base_s = baseline_run(records, settings)
        p50, p99 = pct(lat, 50) * 1000, pct(lat, 99) * 1000
        print(f"run {run + 1}: capture path {len(calls) / cap_s:6.1f} calls/s {rows / cap_s:8.0f} rows/s "
              f"{input_mb / cap_s:6.1f} MB/s in, ack latency p50 {p50:.0f} ms p99 {p99:.0f} ms; "
              f"raw producer {rows / base_s:8.0f} rows/s; ratio {base_s / cap_s:.2f}")  # fmt: skip
        fig.add("capture", rows / cap_s)
        fig.add("baseline", rows / base_s)
        fig.add("ratio", base_s / cap_s)
        fig.add("p99", p99)
    print(f"capture path : {fig.summary('capture')} rows/s, ack latency p99 {fig.summary('p99')} ms "
          f"(median [min-max] of {args.runs})")  # fmt: skip
    print(f"raw producer : {fig.summary('baseline')} rows/s (same encoded events)")
    print(f"ratio capture/raw producer: {fig.summary('ratio', '{:.2f}')}")
    if args.e2e:
        e2e(args.e2e, bootstrap)
    if args.formats:
        formats_drain([f.strip() for f in args.formats.split(",")], args.format_rows, bootstrap, args.runs)
    if args.anchor_rows:
        for profile in args.anchor_profiles.split(","):
            proxy_vs_cdcflow(args.anchor_rows, args.anchor_repeat, profile.strip())


# One per-run line of the kit's table: system, e2e s, drain s, rows/s, cells/s, MB/s, records, out MB,
# rows ok, lost, dup, peak RSS MB, CPU s, HBase CPU s.
_KIT_LINE = re.compile(
    r"^(?P<system>cdcflow|proxy)\s+(?P<e2e>[\d.]+)\s+(?P<drain>[\d.]+)\s+(?P<rows_s>\d+)\s+\d+\s+[\d.]+\s+\d+"
    r"\s+[\d.]+\s+(?P<rows_ok>\d+)\s+(?P<lost>\d+)\s+(?P<dup>\d+)\s+(?P<rss>\d+)\s+(?P<cpu>[\d.]+)\s"
)


def proxy_vs_cdcflow(n_rows: int, repeat: int, profile: str) -> None:
    """The proxy kit's backlog drain, both systems, `repeat` runs in alternating order."""
    home = default_stack_home()
    env = {"STACK_HOME": str(home), "CDCFLOW": str(Path(sys.executable).parent / "cdcflow"),
           "PROXY_KAFKA_PROFILE": profile}  # fmt: skip
    env.setdefault("PROXY_HOME", os.environ.get("PROXY_HOME") or str(Path.home() / ".cache/cdcflow-anchors/proxy"))
    if not Path(env["PROXY_HOME"], "lib").is_dir():
        print(f"anchor hbase-kafka-proxy: skipped, no build at {env['PROXY_HOME']} (its README: build.sh, PROXY_HOME)")
        return
    found = run_kit("hbase-kafka-proxy", ["--rows", str(n_rows), "--repeat", str(repeat)], env, _KIT_LINE)
    if not found:
        return
    print(f"\nhbase-kafka-proxy kit, {n_rows} rows, proxy producer profile {profile}: median [min-max] of {repeat}")
    for system, f in found.items():
        f.values["cpu_us"] = [c / max(1.0, r) * 1e6 for c, r in zip(f.values["cpu"], f.values["rows_ok"], strict=True)]
        print(
            f"  {system:8} {f.summary('rows_s'):>24} rows/s  CPU {f.summary('cpu_us'):>14} us/row  "
            f"peak RSS {f.summary('rss'):>14} MB  lost {int(sum(f.values['lost']))}, dup {int(sum(f.values['dup']))}"
        )
    if {"cdcflow", "proxy"} <= found.keys():
        ours, theirs = found["cdcflow"].values["rows_s"], found["proxy"].values["rows_s"]
        ratios = [c / p for c, p in zip(ours, theirs, strict=True)]
        print(f"  cdcflow/proxy rows/s per run (from enabling the peer): {', '.join(f'{r:.2f}' for r in ratios)}; "
              f"median {statistics.median(ratios):.2f}")  # fmt: skip
        drains = [p / c for c, p in zip(found["cdcflow"].values["drain"], found["proxy"].values["drain"], strict=True)]
        print(f"  cdcflow/proxy rows/s per run (first to last record): {', '.join(f'{r:.2f}' for r in drains)}; "
              f"median {statistics.median(drains):.2f}")  # fmt: skip


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


_OUTPUTS = {
    "cdcflow": {"format": "cdcflow"},
    "upsert-json": {"format": "upsert", "serialization": "json"},
    "upsert-avro": {"format": "upsert", "serialization": "avro"},
}


def formats_drain(formats: list[str], n_rows: int, bootstrap: str, runs: int) -> None:
    """Per hbase.output.format: a backlog of `n_rows` real HBase rows (written while the peer is disabled), drained
    by a running `cdcflow hbase run` once the peer is enabled; rows/s from enabling to the last row in Kafka
    (HBase ships a backlog in a few large calls, so first-to-last record would time one call). The formats take
    turns, `runs` times each; the same table shape and values for each."""
    import tempfile

    import yaml

    from cdcflow.clients.hbase import connect
    from cdcflow.clients.hbase.model import ColumnFamily, Put
    from cdcflow.clients.kafka import TopicReader

    unknown = [f for f in formats if f not in _OUTPUTS]
    if unknown:
        raise SystemExit(f"--formats: unknown {unknown}; choose from {list(_OUTPUTS)}")
    stack = Stack(default_stack_home())
    hb = stack.endpoints("hbase")
    registry = stack.endpoints("registry")["url"] if any(f.endswith("avro") for f in formats) else None
    client = connect(hb["zk_quorum"])
    cli = [sys.executable, "-m", "cdcflow.cli.main"]
    fig = Figures()
    try:
        for run in range(runs):
            for fmt in formats if run % 2 == 0 else list(reversed(formats)):
                name = f"bench{uuid.uuid4().hex[:8]}"
                client.create_table(name, [ColumnFamily("cf")], split_keys=[b"row-3", b"row-6"])
                cfg = Path(tempfile.mkdtemp()) / "bench.yaml"
                hbase_cfg = {"zk_quorum": hb["zk_quorum"], "topic_prefix": name, "output": _OUTPUTS[fmt],
                             "peer": {"peer_id": name, "znode_parent": f"/{name}"},
                             "routes": [{"table": "*", "values": {"cf:n": "long"}}]}  # fmt: skip
                kafka_cfg = {"bootstrap_servers": bootstrap, **({"schema_registry_url": registry} if registry else {})}
                cfg.write_text(yaml.safe_dump({"kafka": kafka_cfg, "hbase": hbase_cfg}))
                subprocess.run([*cli, "hbase", "peer", "add", "--disabled", "--config", str(cfg), f"--table={name}"],
                               check=True, capture_output=True)  # fmt: skip
                peer = subprocess.Popen([*cli, "hbase", "run", "--config", str(cfg)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)  # fmt: skip
                rng = random.Random(35)
                batch = []
                for i in range(n_rows):  # 5 columns, one of them typed
                    put = Put(b"row-%d-%07d" % (i % 10, i)).add(b"cf", b"n", i.to_bytes(8, "big"), 1000 + i)
                    for q in (b"a", b"b", b"c", b"d"):
                        put.add(b"cf", q, rng.randbytes(20), 1000 + i)
                    batch.append(put)
                    if len(batch) == 500:
                        client.mutate_batch(name, batch)
                        batch = []
                if batch:
                    client.mutate_batch(name, batch)
                reader = TopicReader(bootstrap, [f"{name}.default.{name}"])
                try:
                    time.sleep(3)  # the peer process registered
                    first = time.perf_counter()
                    subprocess.run([*cli, "hbase", "peer", "enable", "--config", str(cfg)], check=True,
                                   capture_output=True)  # fmt: skip
                    seen: set[bytes | None] = set()
                    deadline = time.monotonic() + 900
                    while len(seen) < n_rows and time.monotonic() < deadline:
                        seen.update(r.key for r in reader.poll(0.2))
                    last = time.perf_counter()
                    if len(seen) < n_rows:
                        raise RuntimeError(f"{fmt}: {len(seen)} of {n_rows} rows in Kafka after 15 minutes")
                    fig.add(fmt, n_rows / (last - first))
                    print(f"  run {run + 1} {fmt:12} {n_rows / (last - first):8.0f} rows/s "
                          f"(from enabling the peer to the last row in Kafka, {n_rows} rows of 5 cells)")  # fmt: skip
                finally:
                    reader.close()
                    peer.terminate()
                    peer.wait(30)
                    subprocess.run([*cli, "hbase", "peer", "remove", "--config", str(cfg)], capture_output=True)
                    client.delete_table(name)
    finally:
        client.close()
    print(f"\noutput formats, {n_rows} rows drained by `cdcflow hbase run`: median [min-max] of {runs}")
    for fmt in formats:
        print(f"  {fmt:12} {fig.summary(fmt):>24} rows/s")
    if "cdcflow" in formats:
        base = fig.values["cdcflow"]
        for fmt in formats:
            if fmt != "cdcflow":
                ratios = [v / b for v, b in zip(fig.values[fmt], base, strict=True)]
                print(f"  {fmt}/cdcflow per run: {', '.join(f'{r:.2f}' for r in ratios)}; median "
                      f"{statistics.median(ratios):.2f} (goal: >= 0.8)")  # fmt: skip


if __name__ == "__main__":
    main()
