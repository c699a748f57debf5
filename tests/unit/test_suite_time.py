"""The end-of-run report of where `make test`'s time went (cdcflow.dev.testing.suite_time)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdcflow.dev.testing.suite_time import LaneClock, ProcessCpu, own_cpu, report

pytestmark = pytest.mark.unit


def test_lanes_sum_their_tests_and_files_and_know_when_each_ended() -> None:
    lanes = LaneClock()
    for worker, nodeid, seconds in (("gw0", "tests/a.py::t1", 3.0), ("gw0", "tests/a.py::t2", 4.0),
                                    ("gw1", "tests/b.py::t3", 2.5)):  # fmt: skip
        for when in ("setup", "call", "teardown"):
            lanes.record(worker, nodeid, when, seconds if when == "call" else 0.25)
    assert lanes.tests == {"gw0": 2, "gw1": 1}
    assert lanes.seconds == {"gw0": 8.0, "gw1": 3.0}
    assert lanes.by_file == {"tests/a.py": 8.0, "tests/b.py": 3.0}
    lines = report(lanes, None)
    assert "  gw0: 2 tests, 8 s, ended at 0 s" in lines
    files = [line.split() for line in lines if line.endswith(".py")]
    assert files == [["8", "s", "tests/a.py"], ["3", "s", "tests/b.py"]]


def test_the_cpu_of_a_process_is_counted_under_its_kind_after_it_ended() -> None:
    cpu = ProcessCpu(every_s=0.1)
    cpu.start()
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass\ntime.sleep(0.3)"
    proc = subprocess.Popen([sys.executable, "-c", busy, "kafka.Kafka"])  # a command line Kafka's marks
    try:
        stat = Path(f"/proc/{proc.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(") ", 1)[1][0] != "Z":  # ended, not reaped: no command line any more
            assert time.monotonic() < deadline
            time.sleep(0.05)
        by_kind, busy_s, wall_s = cpu.stop()
    finally:
        proc.wait()
    assert by_kind["Kafka"] >= 1.1, by_kind  # (a Kafka of the stack may add its own)
    assert busy_s >= 1.1 and wall_s >= 1.5
    assert any("CPU-s  Kafka" in line for line in report(LaneClock(), (by_kind, busy_s, wall_s)))


def test_a_spark_driver_is_a_test_processs_only_when_pytest_started_it() -> None:
    driver = "java -cp /venv/pyspark/jars/* org.apache.spark.deploy.SparkSubmit pyspark-shell"
    kind = ProcessCpu._kind
    assert kind(driver, "/venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))").endswith(
        "(test processes)"
    )
    assert kind(driver, "/venv/bin/python /venv/bin/pytest -n 2").endswith("(test processes)")
    assert kind(driver, "python3.11 -m pytest tests/e2e").endswith("(test processes)")
    pipeline = "/venv/bin/python -m cdcflow.cli.main pipeline run --config /tmp/pytest-of-root/pytest-3/t0/c.yaml"
    assert kind(driver, pipeline).endswith("(pipelines and readers)")


def test_the_processes_a_test_started_are_summed_by_its_file() -> None:
    cpu = ProcessCpu(every_s=0.1)
    cpu.start()
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.8: pass\ntime.sleep(0.3)"
    env = {"PYTEST_CURRENT_TEST": "tests/e2e/test_x.py::test_y (call)"}
    proc = subprocess.Popen([sys.executable, "-c", busy, "cdcflow"], env=env)  # a command line the captures mark
    try:
        stat = Path(f"/proc/{proc.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(") ", 1)[1][0] != "Z":  # its work done (a busy machine may take longer)
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cpu.stop()
    finally:
        proc.wait()
    seconds, count = cpu.by_test_file()["tests/e2e/test_x.py"]
    assert seconds >= 0.7 and count == 1
    lines = report(LaneClock(), None, started=cpu.by_test_file())
    assert any(line.endswith("  1  tests/e2e/test_x.py") for line in lines), lines


def test_a_spark_driver_keeps_its_kind_when_the_test_process_that_started_it_ends_first() -> None:
    """A test process's driver outlives it at the end of a run: re-parented to init, it is still the test's."""
    cpu = ProcessCpu(every_s=0.1)
    cpu.start()
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ntime.sleep(60)"
    starts_driver = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {busy!r}, 'org.apache.spark.deploy.SparkSubmit'])\n"
        "print(p.pid, flush=True)\nsys.stdin.readline()"
    )
    worker = subprocess.Popen(  # a command line as xdist's workers have
        [sys.executable, "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(repr(starts_driver) + "\n")
    worker.stdin.flush()
    driver = int(worker.stdout.readline())
    try:
        cpu.sample()  # seen while the worker lives
        assert cpu.kind_of(driver) == "Spark driver JVMs (test processes)"
        worker.stdin.write("\n")  # the worker ends before its driver
        worker.stdin.flush()
        worker.wait()
        stat = Path(f"/proc/{driver}/stat")
        deadline = time.monotonic() + 10
        while int(stat.read_text().rsplit(") ", 1)[1].split()[1]) == worker.pid:  # not re-parented yet
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cpu.sample()  # seen as an orphan
        assert cpu.kind_of(driver) == "Spark driver JVMs (test processes)"
    finally:
        os.kill(driver, signal.SIGKILL)
        cpu.stop()


def test_a_tests_own_process_and_spark_driver_cpu_are_summed_by_its_file() -> None:
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(30)"
    driver = subprocess.Popen([sys.executable, "-c", busy])  # stands for the driver JVM pyspark launched
    try:
        process_before, _ = own_cpu(driver.pid)
        t = time.process_time()
        while time.process_time() - t < 0.3:
            pass
        deadline = time.monotonic() + 10
        while own_cpu(driver.pid)[1] < 0.5:  # its busy loop done
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process_after, driver_after = own_cpu(driver.pid)
    finally:
        driver.kill()
        driver.wait()
    assert process_after - process_before >= 0.28  # (os.times counts in clock ticks of 10 ms)
    assert driver_after >= 0.5 and own_cpu(None)[1] == 0.0
    lanes = LaneClock()
    lanes.record_own_cpu("tests/a.py::t1", 2.0, 30.0)
    lanes.record_own_cpu("tests/a.py::t2", 1.0, 10.0)
    lanes.record_own_cpu("tests/b.py::t3", 5.0, 0.0)
    assert lanes.own_cpu_by_file == {"tests/a.py": (3.0, 40.0), "tests/b.py": (5.0, 0.0)}
    lines = report(lanes, None)
    own = [line.split() for line in lines if line.endswith(".py") and "CPU-s" in line]
    assert own == [["43", "CPU-s", "3", "+", "40", "tests/a.py"], ["5", "CPU-s", "5", "+", "0", "tests/b.py"]]
