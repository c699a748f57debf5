"""Where `make test`'s time went, printed at the end of every run (tests/conftest.py): each lane's test time and
when its last test ended, the files that took longest, and the CPU seconds of each kind of process. The suite
is CPU-bound on two cores, so the CPU by kind of process says what a shorter run has to take away; the lanes
say whether the two workers ended together."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

# Kinds of process by a marker in their command line, first match wins (a Spark JVM's kind also depends on who
# started it: see ProcessCpu._kind).
_KINDS = (
    ("org.apache.spark.deploy.master.Master", "Spark standalone cluster"),
    ("org.apache.spark.deploy.worker.Worker", "Spark standalone cluster"),
    ("CoarseGrainedExecutorBackend", "Spark standalone cluster"),
    ("org.apache.spark.deploy.SparkSubmit", "Spark driver JVMs"),
    ("pyspark.daemon", "PySpark Python workers"),
    ("pyspark/daemon", "PySpark Python workers"),
    ("kafka.Kafka", "Kafka"),
    ("org.apache.hadoop.hbase", "HBase"),
    ("phoenix-client", "Phoenix client JVM"),
    ("flink", "Flink"),
    ("org.apache.kafka.connect", "Debezium (Kafka Connect)"),
    ("mariadbd", "MariaDB"),
    ("mysqld", "MySQL"),
    ("chrom", "Chromium"),
    ("pipeline run", "cdcflow pipelines (Python)"),
    ("pipeline submit", "cdcflow pipelines (Python)"),
    ("cdcflow", "cdcflow captures and commands (Python)"),
    ("exec(eval(sys.stdin.readline()))", "pytest workers"),
    ("pytest", "pytest workers"),
    ("java", "other Java"),
)


def _is_test_process(cmd: str) -> bool:
    """pytest itself or one of its xdist workers (not a process whose arguments merely name a pytest tmp path)."""
    argv = cmd.split()
    program = [Path(arg).name for arg in argv[:2]]
    return "exec(eval(sys.stdin" in cmd or "pytest" in program or " -m pytest" in cmd


def _cpu_seconds(fields: list[str]) -> float:
    """User and system CPU seconds from a /proc/<pid>/stat line's fields after the command name."""
    return (int(fields[11]) + int(fields[12])) / TICK


def read_processes() -> dict[tuple[int, int], tuple[float, int, str]]:
    """(pid, start time) → (CPU seconds so far, parent pid, command line) of every process."""
    out: dict[tuple[int, int], tuple[float, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        out[(int(entry.name), int(fields[19]))] = (_cpu_seconds(fields), int(fields[1]), cmd)
    return out


# Kinds of process a test starts for itself (not the shared services, which start in whichever test first needs
# them): their CPU is also summed by the test file that started them.
_STARTED_BY_TESTS = ("Spark driver JVMs (pipelines and readers)", "cdcflow pipelines (Python)",
                     "cdcflow captures and commands (Python)", "PySpark Python workers")  # fmt: skip


def started_by(pid: int) -> str | None:
    """The test file whose test was running when `pid` started (pytest's PYTEST_CURRENT_TEST, which a test's
    subprocesses inherit), or None."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTEST_CURRENT_TEST="):
            return entry.split(b"=", 1)[1].decode(errors="replace").split("::", 1)[0]
    return None


def busy_seconds() -> float:
    fields = [int(f) for f in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / TICK


class ProcessCpu:
    """Samples every process's CPU time every `every_s` seconds in a thread (a process that lives less than
    that is missed) and sums it by kind of process."""

    def __init__(self, every_s: float = 2.0) -> None:
        self.every_s = every_s
        self._seen: dict[tuple[int, int], tuple[float, str]] = {}  # process → (CPU seconds, kind)
        self._file: dict[tuple[int, int], str | None] = {}  # process → the test file that started it
        self._before: dict[tuple[int, int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._busy_before = 0.0
        self._started = 0.0

    def start(self) -> None:
        self._before = {key: cpu for key, (cpu, _, _) in read_processes().items()}
        self._busy_before, self._started = busy_seconds(), time.monotonic()
        self._thread = threading.Thread(target=self._loop, name="suite-cpu", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample()

    def sample(self) -> None:
        processes = read_processes()
        commands = {pid: cmd for (pid, _), (_, _, cmd) in processes.items()}
        for key, (cpu, parent, cmd) in processes.items():
            known = self._seen.get(key)
            if known is not None and not cmd:  # ended, not reaped yet (a zombie): it may show no CPU time either
                continue
            # A process's kind is decided when it is first seen: a driver whose test process ended first (at the
            # end of a run) is re-parented to init, and would move all its CPU under another kind.
            kind = known[1] if known is not None else self._kind(cmd, commands.get(parent, ""))
            self._seen[key] = (cpu - self._before.get(key, 0.0), kind)
            if key not in self._file:
                self._file[key] = started_by(key[0]) if kind in _STARTED_BY_TESTS else None

    @staticmethod
    def _kind(cmd: str, parent_cmd: str) -> str:
        for marker, kind in _KINDS:
            if marker in cmd:
                if kind == "Spark driver JVMs":  # the tests' own session, or a pipeline's or reader's process
                    in_test = _is_test_process(parent_cmd)
                    return f"{kind} (test processes)" if in_test else f"{kind} (pipelines and readers)"
                return kind
        return "other"

    def kind_of(self, pid: int) -> str | None:
        """The kind the samples gave the (newest) process `pid`, or None if none saw it."""
        seen = [(start, kind) for (p, start), (_, kind) in self._seen.items() if p == pid]
        return max(seen)[1] if seen else None

    def stop(self) -> tuple[dict[str, float], float, float]:
        """CPU seconds by kind of process, the machine's busy CPU seconds and the seconds since `start`."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        by_kind: dict[str, float] = defaultdict(float)
        for cpu, kind in self._seen.values():
            by_kind[kind] += cpu
        return dict(by_kind), busy_seconds() - self._busy_before, time.monotonic() - self._started

    def by_test_file(self) -> dict[str, tuple[float, int]]:
        """CPU seconds and count of the processes each test file started (Spark drivers, pipelines, captures,
        commands and their Python workers), after `stop`."""
        out: dict[str, tuple[float, int]] = {}
        for key, (cpu, _) in self._seen.items():
            path = self._file.get(key)
            if path is not None:
                seconds, count = out.get(path, (0.0, 0))
                out[path] = (seconds + cpu, count + 1)
        return out


def own_cpu(driver_pid: int | None) -> tuple[float, float]:
    """CPU seconds so far of this test process and of its own Spark driver (the JVM pyspark launched for it),
    which sampling by kind of process cannot split by test."""
    driver = 0.0
    if driver_pid is not None:
        try:
            stat = Path(f"/proc/{driver_pid}/stat").read_text()
        except OSError:
            pass
        else:
            driver = _cpu_seconds(stat[stat.rindex(")") + 2 :].split())
    times = os.times()
    return times.user + times.system, driver


class LaneClock:
    """Test time per worker (lane) and per file, when each worker's last test ended, and the CPU the test
    processes and their own Spark drivers spent per file."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: Counter[str] = Counter()
        self.ended_at: dict[str, float] = {}
        self.by_file: dict[str, float] = defaultdict(float)
        self.own_cpu_by_file: dict[str, tuple[float, float]] = {}

    def record_own_cpu(self, nodeid: str, process_s: float, driver_s: float) -> None:
        """CPU a test's own process and Spark driver spent from its setup to its teardown (`own_cpu` deltas)."""
        path = nodeid.split("::", 1)[0]
        process, driver = self.own_cpu_by_file.get(path, (0.0, 0.0))
        self.own_cpu_by_file[path] = (process + process_s, driver + driver_s)

    def record(self, worker: str, nodeid: str, when: str, duration: float) -> None:
        self.seconds[worker] += duration
        self.by_file[nodeid.split("::", 1)[0]] += duration
        if when == "teardown":
            self.tests[worker] += 1
            self.ended_at[worker] = time.monotonic() - self._started


def report(
    lanes: LaneClock,
    cpu: tuple[dict[str, float], float, float] | None,
    files: int = 15,
    started: dict[str, tuple[float, int]] | None = None,
) -> list[str]:
    lines = ["lanes (worker: tests, their time, when its last test ended):"]
    for worker in sorted(lanes.seconds):
        lines.append(f"  {worker}: {lanes.tests[worker]} tests, {lanes.seconds[worker]:,.0f} s, "
                     f"ended at {lanes.ended_at.get(worker, 0):,.0f} s")  # fmt: skip
    lines.append(f"slowest files (setup, call and teardown of their tests; {files} of {len(lanes.by_file)}):")
    for path, seconds in sorted(lanes.by_file.items(), key=lambda kv: -kv[1])[:files]:
        lines.append(f"  {seconds:7,.0f} s  {path}")
    if cpu is not None:
        by_kind, busy, wall = cpu
        cores = os.cpu_count() or 1
        lines.append(f"CPU by kind of process (the machine was busy {busy:,.0f} CPU-s of the {wall * cores:,.0f} its "
                     f"{cores} cores had in {wall:,.0f} s; processes shorter than a sample are missed):")  # fmt: skip
        for kind, seconds in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            if seconds >= 1:
                lines.append(f"  {seconds:7,.0f} CPU-s  {kind}")
    if lanes.own_cpu_by_file:
        own = sorted(lanes.own_cpu_by_file.items(), key=lambda kv: -sum(kv[1]))
        lines.append(f"CPU of the test processes and their own Spark drivers, by test file ({files} of {len(own)}; "
                     "process + driver):")  # fmt: skip
        for path, (process_s, driver_s) in own[:files]:
            lines.append(f"  {process_s + driver_s:7,.0f} CPU-s  {process_s:5,.0f} + {driver_s:5,.0f}  {path}")
    if started:
        lines.append(f"CPU of the processes tests started, by test file ({files} of {len(started)}; processes):")
        for path, (seconds, count) in sorted(started.items(), key=lambda kv: -kv[1][0])[:files]:
            lines.append(f"  {seconds:7,.0f} CPU-s  {count:3}  {path}")
    return lines
