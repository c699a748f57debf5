"""Session-wide real services for integration tests; server logs attached to failing tests.

Each server starts once per test session (on first use) through cdcflow.dev.stack. Set
CDCFLOW_TEST_STACK_HOME=<stack home> to use an already running stack instead.

`make test` runs two lanes (pytest-xdist workers, cdcflow.dev.testing.lanes): the files in SPARK_LANE one after
another on one worker, the rest on the other, one stack for both (with three workers or more, two Spark lanes:
SPARK_LANE_B). A test that stops a service starts a private one, as test_mysql_capture.py and
test_hbase_faults.py do.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.core import context as pyspark_context
from pyspark.core.context import SparkContext

from cdcflow.clients.hbase import HBaseClient, connect
from cdcflow.dev.stack import Stack
from cdcflow.dev.stack.hbase_cluster import JAVA_OPTS_ENV as HBASE_CLUSTER_JAVA_OPTS
from cdcflow.dev.testing import EXISTING_STACK_ENV, ServiceHarness, soak_size
from cdcflow.dev.testing.flink import FlinkReader
from cdcflow.dev.testing.lanes import RUN_DIR_ENV, run_dir
from cdcflow.dev.testing.spark_classes import ArchiveMaker
from cdcflow.dev.testing.spark_classes import archive_path as spark_class_archive
from cdcflow.dev.testing.spark_classes import java_options as spark_class_options
from cdcflow.dev.testing.suite_time import LaneClock, ProcessCpu, own_cpu, report

_harness: ServiceHarness | None = None

# The test files that run Spark in the test process (the pipeline, or a session of their own): CPU-bound, and
# one test process holds one Spark driver, so `make test` runs them one after another in one lane while the
# other lane runs the rest, which mostly waits on servers. (The files that run pipelines only as subprocesses,
# such as test_operator_view.py, test_run_supervision.py and test_mysql_phoenix.py, run in the other lane: it was
# the shorter one.)
# They are marked `spark` (`-m "not spark"` leaves them out). A file missing here still passes; it only starts
# a second driver beside the Spark lane and slows both.
SPARK_LANE = frozenset(
    f"tests/{name}.py"
    for name in (
        "e2e/test_hbase_backfill", "e2e/test_mysql8_pipeline", "e2e/test_pipeline_chain",
        "e2e/test_pipeline_debezium", "e2e/test_pipeline_delta", "e2e/test_pipeline_hbase",
        "e2e/test_pipeline_offsets", "e2e/test_pipeline_phoenix",
        "e2e/test_pipeline_topics", "e2e/test_sink_edge_values",
        "e2e/test_source_lifecycle",
        "e2e/test_oversize_apply", "e2e/test_apply_cost", "e2e/test_sink_groups",
        "e2e/test_sink_interleavings", "integration/test_debezium_avro_spark",
        "integration/test_delta_fold_records", "integration/test_delta_mysql_typed",
        "integration/test_delta_state_sql", "integration/test_envelope_parse", "integration/test_delta_history",
        "e2e/test_history_from_mariadb", "e2e/test_consistent_cut", "integration/test_delta_consistent_cut",
    )
)  # fmt: skip


# A Spark file whose work runs in processes of their own (a standalone cluster and spark-submit), with one
# Spark read in the test process: the run's last test, taken by whichever worker is free first (with two
# workers, the other lane's ended at 998 s and the Spark lane's at 1,214 s, this file's test taking 101 s in it).
# Run first on the other worker it overlapped the Spark lane's heaviest tests and took 337 s instead of 134.
LAST_OF_THE_RUN = frozenset({"tests/e2e/test_pipeline_submit.py"})


# With three or more workers the Spark files form two lanes; these make the second (about half of the time).
SPARK_LANE_B = frozenset(
    f"tests/{name}.py"
    for name in (
        "e2e/test_pipeline_delta", "e2e/test_source_lifecycle", "e2e/test_pipeline_hbase", "e2e/test_sink_groups",
        "e2e/test_sink_edge_values", "e2e/test_pipeline_topics", "e2e/test_mysql8_pipeline",
        "integration/test_debezium_avro_spark", "integration/test_delta_fold_records",
        "integration/test_delta_mysql_typed", "integration/test_delta_state_sql", "integration/test_envelope_parse",
        "integration/test_delta_history",
    )
)  # fmt: skip


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `-n`: xdist's scope scheduler, the Spark lane one scope (so one worker, taken first as the largest;
    two lanes with three workers or more) and every other test a scope of its own (so the other workers take
    them one by one, and all share what is left when a Spark lane is done). xdist's own `--dist loadgroup` does
    not group with pytest 9.2 (pytest-dev/pytest-xdist#1386)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaneScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path not in SPARK_LANE:
                return nodeid
            return "spark lane B" if self.numnodes >= 3 and path in SPARK_LANE_B else "spark lane"

    return LaneScheduling(config, log)


# The local Spark drivers of a test session (this process's, which lives for the whole run, and the pipelines it
# starts) get 3 GB of heap instead of Spark's 1 GB, and the throughput collector: with 1 GB the session's driver
# ran at 85-95% old-generation occupancy, G1 collecting all the time (13 s of pauses and 279 concurrent cycles in
# 4 minutes of test_pipeline_delta.py and test_sink_interleavings.py). Those two files: 245 s; with 3 GB 228 s
# (7 s of pauses, 50 cycles); with 3 GB and ParallelGC 216 s (no concurrent marking on the two cores).
#
# They also evaluate expressions interpreted instead of generating Java for them (Spark's own switch, set as
# system properties, which a driver reads into its SparkConf and sends to executors with every job). The tests'
# batches are a few hundred rows, and profiling the session's driver over test_pipeline_delta.py (Java Flight
# Recorder) showed code generation taking 38% of the Java threads' samples (mostly building and stripping the
# source of the events' wide projections) and the JIT 224 s of compiler time in 318 s (63,000 compilations);
# interpreted, that file took 258 s against 331 s (cold driver, same stack).
#
# Most of the run's Spark drivers are short (pipelines, readers and backfills as subprocesses): they start with
# Java's C1 compiler only, whose code is ready sooner and cheaper than C2's. test_pipeline_chain.py alone (one
# test, four pipeline processes): 281 CPU-s, 176 s; with C1 and the class archive (pytest_configure) 166 CPU-s,
# 117 s. The test process's own driver lives for the whole lane and keeps C2 (`_launch_own_driver`): with C1
# only (and C1's default code cache of 48 MB) test_pipeline_delta.py took 352 s in a whole run instead of 164;
# with C1 and a 240 MB code cache, test_delta_history.py and test_pipeline_delta.py took 598 s and 695 busy CPU-s of
# the machine against 469 s and 681 with C2 (one run each, on the same stack).
# `make soak` keeps Spark's and Java's defaults, so its full-size runs go through the generated code and the
# optimizing compiler as production does.
os.environ.setdefault("SPARK_DRIVER_MEMORY", "3g")
_SPARK_OPTS = ["-XX:+UseParallelGC"]  # spark-submit adds these to the driver's JVM only
_SHORT_DRIVER_OPTS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m")
if not soak_size(0, 1):
    _SPARK_OPTS += ["-Dspark.sql.codegen.factoryMode=NO_CODEGEN", "-Dspark.sql.codegen.wholeStage=false"]
    _SPARK_OPTS += _SHORT_DRIVER_OPTS
    # the production-shaped HBase's JVMs, short-lived in make test, get C1 only too (hbase_cluster.py)
    os.environ.setdefault(HBASE_CLUSTER_JAVA_OPTS, "-XX:TieredStopAtLevel=1")
os.environ.setdefault("SPARK_SUBMIT_OPTS", " ".join(_SPARK_OPTS))
_launch_gateway = pyspark_context.launch_gateway


def _launch_own_driver(conf: Any = None, popen_kwargs: Any = None) -> Any:
    """pyspark's launch of this process's driver JVM, with the short drivers' JIT options left out (the
    variable is read at the launch; the subprocesses this process starts later still get them)."""
    inherited = os.environ["SPARK_SUBMIT_OPTS"]
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(o for o in inherited.split() if o not in _SHORT_DRIVER_OPTS)
    try:
        return _launch_gateway(conf, popen_kwargs)
    finally:
        os.environ["SPARK_SUBMIT_OPTS"] = inherited


pyspark_context.launch_gateway = _launch_own_driver


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceHarness]:
    global _harness
    _harness = ServiceHarness(tmp_path_factory.mktemp("stack"))
    try:
        yield _harness
    finally:
        _harness.close()
        _harness = None


@pytest.fixture(scope="session")
def kafka(services: ServiceHarness) -> dict[str, Any]:
    return services.endpoints("kafka")


@pytest.fixture(scope="session")
def hbase(services: ServiceHarness) -> dict[str, Any]:
    return services.endpoints("hbase")


@pytest.fixture(scope="session")
def registry(services: ServiceHarness) -> dict[str, Any]:
    """The stack's schema registry (Confluent's REST API), for Avro topics."""
    return services.endpoints("registry")


@pytest.fixture(scope="session")
def mariadb(services: ServiceHarness) -> dict[str, Any]:
    return services.endpoints("mariadb")


@pytest.fixture(scope="session")
def mysql(services: ServiceHarness) -> dict[str, Any]:
    """Oracle MySQL 8.0, beside MariaDB."""
    return services.endpoints("mysql")


@pytest.fixture(params=["mariadb", "mysql"])
def mysql_server(request: pytest.FixtureRequest, services: ServiceHarness) -> dict[str, Any]:
    """Each capture test that takes this runs against both servers the MySQL source reads."""
    return {**services.endpoints(request.param), "flavor": request.param}


@pytest.fixture(scope="session")
def flink_reader() -> Iterator[FlinkReader]:
    """Flink SQL as a third-party consumer of the topics; one JVM for the session's reads."""
    reader = FlinkReader()
    yield reader
    reader.close()


@pytest.fixture
def hbase_client(hbase: dict[str, Any]) -> Iterator[HBaseClient]:
    c = connect(hbase["zk_quorum"], hbase["znode_parent"])
    yield c
    c.close()


def _is_lane_controller(config: pytest.Config) -> bool:
    """The controlling process of a run with worker processes (pytest-xdist's -n): it runs no tests itself."""
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


# Where the run's time went (cdcflow.dev.testing.suite_time), kept by the process that reports (not by workers).
_lanes: LaneClock | None = None
_cpu: ProcessCpu | None = None
_archive_maker: ArchiveMaker | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _lanes, _cpu, _archive_maker
    if _is_lane_controller(config):
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="cdcflow-test-run-")  # the workers inherit it
    if not hasattr(config, "workerinput") and config.option.markexpr != "unit":
        # Every Spark JVM of the run (this process's workers and their subprocesses inherit the variable) maps
        # pyspark's classes from one archive instead of loading them: an empty pipeline run's JVM 11.0 → 6.7 CPU-s.
        # A fresh install makes it in the background while the first tests start (their JVMs start as usual).
        archive = spark_class_archive()
        if archive is not None:
            os.environ["SPARK_SUBMIT_OPTS"] = " ".join([os.environ["SPARK_SUBMIT_OPTS"], *spark_class_options(archive)])
            if not archive.exists():
                _archive_maker = ArchiveMaker(archive)
                _archive_maker.start()
    if not hasattr(config, "workerinput"):
        _lanes, _cpu = LaneClock(), ProcessCpu()
        _cpu.start()


_OWN_CPU_AT_SETUP = pytest.StashKey[tuple[float, float]]()


def _own_driver_pid() -> int | None:
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return proc.pid if proc is not None else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    item.stash[_OWN_CPU_AT_SETUP] = own_cpu(_own_driver_pid())
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """The CPU this test took in its own process and Spark driver, carried to the reporting process on the
    teardown report (pytest-xdist sends a report's user properties)."""
    yield
    before = item.stash.get(_OWN_CPU_AT_SETUP, None)
    if before is not None:
        after = own_cpu(_own_driver_pid())
        item.user_properties.append(("own_cpu", (after[0] - before[0], max(0.0, after[1] - before[1]))))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _lanes is not None:
        node = getattr(report, "node", None)  # set by pytest-xdist on the reports of its workers
        worker = node.gateway.id if node is not None else "main"
        _lanes.record(worker, report.nodeid, report.when, report.duration)
        for name, value in report.user_properties:
            if name == "own_cpu" and report.when == "teardown":
                _lanes.record_own_cpu(report.nodeid, *value)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The lanes, the slowest files and the CPU by kind of process, for runs of 100 tests or more."""
    if _lanes is None or _cpu is None or sum(_lanes.tests.values()) < 100:
        return
    terminalreporter.section("where the time went")
    cpu = _cpu.stop()
    for line in report(_lanes, cpu, started=_cpu.by_test_file()):
        terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _archive_maker is not None:
        _archive_maker.stop()  # a short run ended first: the next run makes it
    folder = run_dir()
    if not _is_lane_controller(session.config) or folder is None:
        return
    if not os.environ.get(EXISTING_STACK_ENV):
        Stack(folder / "stack").down(grace_s=3.0)  # thrown away with its folder, as a one-process run's
    if exitstatus == 0:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"\nthe shared stack's folder (server logs) is kept: {folder}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _harness is not None:
        for name, text in _harness.log_tails().items():
            report.sections.append((f"{name} log (last lines)", text))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark by folder, so `-m unit` / `-m integration` select without per-test decorations, and the Spark lane."""
    # A renamed Spark test file would silently leave the lane (still passing, only slower): refuse instead.
    missing = sorted(path for path in SPARK_LANE | LAST_OF_THE_RUN if not (config.rootpath / path).is_file())
    if missing:
        raise pytest.UsageError(f"SPARK_LANE in tests/conftest.py names files that do not exist: {missing}")
    for item in items:
        path = str(item.fspath)
        for kind in ("unit", "integration", "e2e"):
            if f"/tests/{kind}/" in path:
                item.add_marker(getattr(pytest.mark, kind))
        if item.nodeid.split("::", 1)[0] in SPARK_LANE | LAST_OF_THE_RUN:
            item.add_marker(pytest.mark.spark)
    # The scheduler hands out the Spark lane first (the largest scope), then the other tests in this order. (The unit
    # tests first, while the Spark lane's first tests start the stack's services, took 20:43 against 20:10 in the
    # run before: not kept.)
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] in LAST_OF_THE_RUN)
