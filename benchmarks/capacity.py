"""The capacity of `make run`'s chain on this machine: the highest demo load at which every sink keeps up.

For each load level (a multiple of the bundled demo load: HBase mutations/s and MariaDB transactions/s scaled
together) `cdcflow run` is started with the bundled config on a fresh local stack of its own, warms up, then
is watched for a window (10 minutes by default): every 10 s each sink's lag (now minus the source time of the
newest change it applied, from its progress file). A level passes when no sink's lag reaches 30 s in the
window. The ladder stops at the first level that fails. Each sample also notes the Delta tables the progress view
flags STALE; at 1x (the bundled load, what `make run` runs) the level's figures are set against `make run`'s own
goal: every lag under 15 s, no table STALE, the pipeline process within 0.7 of a core.

Per level it also reports, over the window: the changes each sink applied, the CPU of each part of the chain
(the pipeline process with its Spark JVM and Python workers, the captures, the services) from /proc, and the
pipeline's executor CPU per sink from Spark's event log (tasks of each sink's streaming batches, and the Delta
sink's folds), as CPU-seconds per 1,000 applied changes; the pipeline's Spark JVM by kind of thread (Java's
compilers, the collector, executor tasks, the streaming queries' threads, calls from Python); after the window,
the raw copy (Kafka → Parquet, no parsing) of every record the level produced, on the same stack, as the anchor.

Usage: .venv/bin/python benchmarks/capacity.py [--levels 1,2,3,5] [--warmup 120] [--minutes 10]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from machine import machine_summary  # type: ignore[import-not-found]
from spark_baseline import raw_kafka_to_parquet_seconds  # type: ignore[import-not-found]

from cdcflow.cli.wiring import DEFAULT_CONFIG
from cdcflow.clients import kafka as k
from cdcflow.dev.stack import Stack
from cdcflow.dev.testing.suite_time import busy_seconds, read_processes
from cdcflow.jars import versions
from cdcflow.pipeline import groups
from cdcflow.pipeline.apply import checkpoint_query_id
from cdcflow.pipeline.progress import read_progress
from cdcflow.pipeline.session import build_session

LAG_LIMIT_S = 30.0
RUN_LAG_GOAL_S = 15.0  # `make run` at the bundled load: lag, table freshness and the pipeline's cores
RUN_CORES_GOAL = 0.7
SAMPLE_S = 10.0


def process_cpu() -> dict[int, tuple[float, str]]:
    """pid → (CPU seconds so far, command line) of every process."""
    return {pid: (cpu, cmd) for (pid, _), (cpu, _, cmd) in read_processes().items()}


def part_of(cmd: str) -> str:
    """Which part of the chain a process is, by its command line."""
    for marker, part in (
        ("pipeline run", "pipeline (driver)"), ("org.apache.spark.deploy.SparkSubmit", "pipeline (Spark JVM)"),
        ("pyspark.daemon", "pipeline (Python workers)"), ("pyspark/daemon", "pipeline (Python workers)"),
        ("hbase run", "hbase peer"), ("mysql run", "mysql capture"), ("cdcflow.cli.main run", "cdcflow run + demo"),
        ("kafka.Kafka", "kafka"), ("HMaster", "hbase + phoenix"), ("mariadbd", "mariadb"), ("mysqld", "mariadb"),
    ):  # fmt: skip
        if marker in cmd:
            return part
    return "other"


def cpu_by_part(before: dict[int, tuple[float, str]], after: dict[int, tuple[float, str]]) -> dict[str, float]:
    parts: dict[str, float] = defaultdict(float)
    for pid, (cpu, cmd) in after.items():
        parts[part_of(cmd)] += cpu - before.get(pid, (0.0, cmd))[0]
    return dict(parts)


def executor_cpu(event_logs: Path, queries: dict[str, str], since_ms: int, until_ms: int) -> dict[str, float]:
    """Executor CPU seconds of the tasks of jobs started in [since, until): per sink (its streaming batches, by
    query id) and the Delta folds (the fold pool), from Spark's event log."""
    job_of_stage: dict[int, str] = {}
    out: dict[str, float] = defaultdict(float)
    # Spark 4 rolls its event log: a folder per application with events_<n>_<app> files
    for path in sorted(p for p in event_logs.rglob("*") if p.is_file() and not p.name.startswith("appstatus")):
        for line in path.open():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                if not since_ms <= int(event.get("Submission Time", 0)) < until_ms:
                    continue
                props = event.get("Properties") or {}
                query = props.get("sql.streaming.queryId")
                owner = queries.get(query or "", "") if query else ""
                if not owner and props.get("spark.scheduler.pool") == "cdcflow-folds":
                    owner = "folds"
                for stage in event.get("Stage IDs", []):
                    job_of_stage[int(stage)] = owner or "other jobs"
            elif kind == "SparkListenerTaskEnd":
                owner = job_of_stage.get(int(event.get("Stage ID", -1)))
                metrics = event.get("Task Metrics") or {}
                if owner is not None:
                    out[owner] += int(metrics.get("Executor CPU Time", 0)) / 1e9
    return dict(out)


# JVM threads by what they do (/proc/<pid>/task/<tid>/comm, cut to 15 characters by Linux)
THREAD_KINDS = (
    ("CompilerThre", "Java's compilers (JIT)"), ("GC Thread", "garbage collector"), ("G1 ", "garbage collector"),
    ("VM Thread", "garbage collector and VM operations"),
    ("Executor task", "executor tasks"), ("stream executio", "streaming query threads (plans, commits)"),
    ("Thread-", "calls from Python (batch code, folds)"),
)  # fmt: skip


def thread_kind(name: str) -> str:
    return next((kind for marker, kind in THREAD_KINDS if marker in name), "other threads")


def thread_cpu(pid: int) -> dict[int, tuple[float, str]]:
    """Thread id → (CPU seconds so far, kind) of each thread of process `pid` (empty when it is gone). Spark renames
    an executor thread for each task it runs, so a thread is known by its id, its kind read each time."""
    out: dict[int, tuple[float, str]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        out[int(task.name)] = ((int(fields[11]) + int(fields[12])) / tick, thread_kind(name))
    return out


def jvm_counters(pid: int) -> dict[str, float]:
    """Classes loaded and methods compiled so far by JVM `pid` (jstat; empty when it cannot answer): a steady stream
    of either in a long-running pipeline means code is generated anew (a plan's generated code that differs from
    batch to batch misses Spark's code cache)."""
    out: dict[str, float] = {}
    for option, column, name in (("-class", "Loaded", "classes loaded"), ("-compiler", "Compiled", "methods compiled"),
                                 ("-compiler", "Time", "compiling (s)"), ("-gcutil", "GCT", "in GC (s)")):  # fmt: skip
        try:
            lines = subprocess.run(["jstat", option, str(pid)], capture_output=True, text=True, timeout=30).stdout
            header, values = (line.split() for line in lines.strip().splitlines()[:2])
            out[name] = float(values[header.index(column)])
        except (OSError, ValueError, subprocess.SubprocessError):
            continue
    return out


def spark_jvm_pid(processes: dict[int, tuple[float, str]]) -> int | None:
    return next((pid for pid, (_, cmd) in processes.items() if part_of(cmd) == "pipeline (Spark JVM)"), None)


def cpu_by_thread_kind(before: dict[int, tuple[float, str]], after: dict[int, tuple[float, str]]) -> dict[str, float]:
    """CPU seconds per kind of thread between two readings; threads that ended in between are not counted."""
    kinds: dict[str, float] = defaultdict(float)
    for tid, (cpu, kind) in after.items():
        kinds[kind] += cpu - before.get(tid, (0.0, kind))[0]
    return dict(kinds)


def level_config(work: Path, level: float, base: dict[str, Any]) -> Path:
    cfg = json.loads(json.dumps(base))
    cfg["stack"]["home"] = str(work / "stack")
    demo = cfg["demo"]
    demo["mutations_per_second"] = round(demo["mutations_per_second"] * level)
    demo["mysql_transactions_per_second"] = round(demo["mysql_transactions_per_second"] * level, 1)
    (work / "events").mkdir(parents=True, exist_ok=True)
    event_log = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(work / "events"),
                 "spark.eventLog.compress": "false"}  # fmt: skip
    cfg["pipeline"]["spark_conf"] = {**(cfg["pipeline"].get("spark_conf") or {}), **event_log}
    cfg["ui"]["port"] = 0
    path = work / "cdcflow.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def run_level(level: float, base: dict[str, Any], warmup_s: float, window_s: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"cdcflow-capacity-{level:g}x-"))
    config = level_config(work, level, base)
    log = (work / "run.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "cdcflow.cli.main", "run", "--config", str(config)], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    checkpoints = work / "stack" / "pipeline" / "checkpoints"
    try:
        deadline = time.monotonic() + 600
        while len(read_progress(checkpoints) if checkpoints.is_dir() else {}) < len(base["pipeline"]["sinks"]):
            assert proc.poll() is None, f"cdcflow run ended early; see {work / 'run.log'}"
            assert time.monotonic() < deadline, f"no progress from every sink after 10 minutes; see {work / 'run.log'}"
            time.sleep(5)
        time.sleep(warmup_s)
        cpu_before, busy_before = process_cpu(), busy_seconds()
        jvm = spark_jvm_pid(cpu_before)
        threads_before = thread_cpu(jvm) if jvm else {}
        counters_before = jvm_counters(jvm) if jvm else {}
        rows_before = {s: int(d.get("total_rows", 0)) for s, d in read_progress(checkpoints).items()}
        started_ms, started = int(time.time() * 1000), time.monotonic()
        lags: dict[str, list[float]] = defaultdict(list)
        stale: dict[str, int] = defaultdict(int)  # "sink table" -> samples in which the progress view said STALE
        samples = 0
        while time.monotonic() - started < window_s:
            time.sleep(SAMPLE_S)
            now_ms = time.time() * 1000
            samples += 1
            for sink, doc in read_progress(checkpoints).items():
                ts = doc.get("last_source_ts_ms")
                lags[sink].append((now_ms - ts) / 1000 if ts else float("inf"))
                for table, state in (doc.get("tables") or {}).items():
                    stale[f"{sink} {table}"] += bool(state.get("stale"))
            assert proc.poll() is None, f"cdcflow run ended during the window; see {work / 'run.log'}"
        ended_ms, window = int(time.time() * 1000), time.monotonic() - started
        cpu_after = process_cpu()
        cpu = cpu_by_part(cpu_before, cpu_after)
        threads = cpu_by_thread_kind(threads_before, thread_cpu(jvm)) if jvm else {}
        counters_after = jvm_counters(jvm) if jvm else {}
        counters = {k: v - counters_before[k] for k, v in counters_after.items() if k in counters_before}
        jvm_cpu = cpu_after[jvm][0] - cpu_before[jvm][0] if jvm in cpu_after else 0.0
        busy = busy_seconds() - busy_before
        progress = read_progress(checkpoints)
        applied = {s: int(d.get("total_rows", 0)) - rows_before.get(s, 0) for s, d in progress.items()}
        queries = {checkpoint_query_id(checkpoints / s) or "": s for s in progress}
        # a sink group's query applies every sink of the group: its tasks are the group's, not one sink's
        for group in {s["group"] for s in base["pipeline"]["sinks"] if s.get("group")}:
            queries[checkpoint_query_id(groups.group_folder(checkpoints, group)) or ""] = f"group {group}"
        stop(proc)
        executors = executor_cpu(work / "events", queries, started_ms, ended_ms)
        records, raw = raw_copy_per_1k(work)
    finally:
        stop(proc)
        Stack(work / "stack").down()
    return {"level": level, "work": work, "window_s": window, "lags": dict(lags), "applied": applied, "cpu": cpu,
            "busy": busy, "executors": executors, "threads": threads, "jvm_cpu": jvm_cpu,
            "counters": counters, "raw": (records, raw), "stale": dict(stale), "samples": samples}  # fmt: skip


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C for `cdcflow run`: the workload stops, then its children, in order (the stack keeps running)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def raw_copy_per_1k(work: Path) -> tuple[int, float]:
    """(records, machine CPU-s per 1,000) of a raw Kafka → Parquet copy of every change topic of a level's stack."""
    bootstrap = str(Stack(work / "stack").endpoints("kafka")["bootstrap_servers"])
    topics = [t for t in k.list_topics(bootstrap) if re.fullmatch(r"cdcflow\..*", t)]
    records = sum(sum(k.end_offsets(bootstrap, t).values()) for t in topics)
    spark = build_session("cdcflow-capacity-raw-copy")
    busy = busy_seconds()
    raw_kafka_to_parquet_seconds(spark, bootstrap, r"cdcflow\..*", 200_000, work / "raw-copy")
    return records, (busy_seconds() - busy) / max(records, 1) * 1000


def main() -> None:
    # A terminated benchmark stops its chain too (the `finally` around each level): the chain runs in a session
    # of its own, and left running it took 0.7 of a core from every run after it.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="1,2,3,5", help="multiples of the bundled demo load, in increasing order")
    ap.add_argument("--warmup", type=float, default=120.0, help="seconds after every sink's first batch")
    ap.add_argument("--minutes", type=float, default=10.0, help="the window every sink's lag must stay in")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting added to the bundled config's pipeline.spark_conf")  # fmt: skip
    ap.add_argument("--sink-option", action="append", default=[], metavar="SINK.KEY=VALUE",
                    help="a sink option of the bundled config set to VALUE (YAML), to compare settings")  # fmt: skip
    ap.add_argument("--sink-group", action="append", default=[], metavar="SINK=GROUP",
                    help="put a sink of the bundled config in a sink group (one query per group)")  # fmt: skip
    ap.add_argument(
        "--pipeline-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a pipeline setting of the bundled config set to VALUE (YAML), e.g. trigger_seconds=10",
    )
    args = ap.parse_args()
    base = yaml.safe_load(DEFAULT_CONFIG.read_text())
    extra = dict(kv.split("=", 1) for kv in args.spark_conf)
    if extra:
        base["pipeline"]["spark_conf"] = {**(base["pipeline"].get("spark_conf") or {}), **extra}
        print(f"spark_conf added: {extra}")
    for setting in args.sink_option:
        name_key, value = setting.split("=", 1)
        name, key = name_key.split(".", 1)
        sink = next(s for s in base["pipeline"]["sinks"] if s["name"] == name)
        sink.setdefault("options", {})[key] = yaml.safe_load(value)
        print(f"sink {name}: {key} = {value}")
    for setting in args.sink_group:
        name, group = setting.split("=", 1)
        next(s for s in base["pipeline"]["sinks"] if s["name"] == name)["group"] = group
        print(f"sink {name}: group {group}")
    for setting in args.pipeline_option:
        key, value = setting.split("=", 1)
        base["pipeline"][key] = yaml.safe_load(value)
        print(f"pipeline: {key} = {value}")
    demo = base["demo"]
    print(f"machine: {machine_summary()}; Spark {versions.SPARK_VERSION} (local[2]), Delta {versions.DELTA_VERSION}; "
          f"Kafka {versions.KAFKA_VERSION}; HBase {versions.HBASE_VERSION}")  # fmt: skip
    print(f"bundled demo load (1x): {demo['mutations_per_second']} HBase mutations/s + "
          f"{demo['mysql_transactions_per_second']} MariaDB transactions/s; sinks "
          f"{', '.join(s['name'] for s in base['pipeline']['sinks'])}; window {args.minutes:g} min after "
          f"{args.warmup:g} s of warm-up; a level passes when every sink's lag stays under "
          f"{LAG_LIMIT_S:g} s")  # fmt: skip
    capacity = None
    for level in (float(x) for x in args.levels.split(",")):
        r = run_level(level, base, args.warmup, args.minutes * 60)
        worst = {s: max(v) for s, v in r["lags"].items()}
        passed = all(v < LAG_LIMIT_S for v in worst.values())
        print(f"\nlevel {level:g}x ({round(demo['mutations_per_second'] * level)} mutations/s + "
              f"{demo['mysql_transactions_per_second'] * level:g} transactions/s): {'PASS' if passed else 'FAIL'}; "
              f"{r['window_s']:.0f} s window, machine CPU {r['busy'] / r['window_s']:.2f} cores")  # fmt: skip
        for sink in sorted(worst):
            applied = r["applied"].get(sink, 0)
            own = r["executors"].get(sink, 0.0)
            per_k = f"{own / applied * 1000:.3f}" if applied else "-"
            print(f"  sink {sink:12} lag max {worst[sink]:7.1f} s, applied {applied:8d} changes "
                  f"({applied / r['window_s']:7.1f}/s); executor CPU {own:7.1f} s = {per_k} CPU-s "
                  "per 1,000")  # fmt: skip
        folds = r["executors"].get("folds", 0.0)
        print(f"  delta folds: executor CPU {folds:.1f} s; other jobs {r['executors'].get('other jobs', 0.0):.1f} s")
        for owner, seconds in sorted(r["executors"].items()):
            if owner.startswith("group "):
                print(f"  sink {owner}: executor CPU {seconds:.1f} s (its sinks' tasks, not split by sink)")
        pipeline_cpu = sum(v for p, v in r["cpu"].items() if p.startswith("pipeline"))
        applied_all = sum(r["applied"].values())
        print(f"  pipeline process (JVM, driver, Python workers): {pipeline_cpu / r['window_s']:.2f} cores, "
              f"{pipeline_cpu / max(applied_all, 1) * 1000:.3f} CPU-s per 1,000 applied changes "
              "(all sinks)")  # fmt: skip
        for part, cpu in sorted(r["cpu"].items(), key=lambda kv: -kv[1]):
            print(f"    {part:28} {cpu / r['window_s']:.2f} cores")
        if r["threads"]:
            print("  the pipeline's Spark JVM by thread:")
            ended = r["jvm_cpu"] - sum(r["threads"].values())
            for kind, cpu in sorted({**r["threads"], "threads that ended in the window": ended}.items(),
                                    key=lambda kv: -kv[1]):  # fmt: skip
                print(f"    {kind:42} {cpu / r['window_s']:.2f} cores")
            minutes = r["window_s"] / 60
            rates = ", ".join(f"{name} {value / minutes:,.1f}" for name, value in r["counters"].items())
            print(f"    per minute: {rates}")
        records, raw = r["raw"]
        print(f"  raw copy anchor (same stack): {records} records, {raw:.3f} machine CPU-s per 1,000")
        flagged = {t: n for t, n in r["stale"].items() if n}
        samples = r["samples"]
        which = ", ".join(f"{t} in {n} of {samples} samples" for t, n in sorted(flagged.items())) or "none"
        print(f"  Delta tables flagged STALE on the progress view: {len(flagged)} of {len(r['stale'])} ({which})")
        if level == 1:  # the goal for `make run` itself: the bundled load
            cores = pipeline_cpu / r["window_s"]
            print(
                f"  make run goal at 1x: every lag < {RUN_LAG_GOAL_S:g} s: {max(worst.values()) < RUN_LAG_GOAL_S}; "
                f"no table STALE: {not flagged}; pipeline <= {RUN_CORES_GOAL:g} core: {cores <= RUN_CORES_GOAL}"
            )
        sys.stdout.flush()
        if not passed:
            break
        capacity = level
    print(f"\ncapacity: {capacity:g}x the bundled demo load" if capacity else "\ncapacity: below the first level")


if __name__ == "__main__":
    main()
