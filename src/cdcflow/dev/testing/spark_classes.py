"""A class-data archive of Spark's own classes, so the many short Spark JVMs of a test run start cheaply.

A test run starts dozens of Spark drivers (pipelines and readers as subprocesses, each file's session), and
each spends most of a short life loading and verifying the same 13,000 classes of pyspark's jars. Java's
class-data sharing maps them from an archive instead: measured on two cores, an empty `cdcflow pipeline run
--available-now` JVM took 11.0 CPU-s without the archive and 6.7 with it.

The archive holds the classes of the JVM's own class path (pyspark's jars; Delta's and Kafka's connector jars
come through Spark's class loader and are loaded as usual). It is made once per Java and pyspark install by a
small Spark job that exits with `-XX:ArchiveClassesAtExit` (about 40 s of one core) and kept in cdcflow's cache. A JVM
given an archive that does not match its class path loads classes as usual (Java's default `-Xshare:auto`),
so a stale archive costs speed, never correctness.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from cdcflow.config.paths import cache_dir
from cdcflow.dev.stack.spark import pyspark_home
from cdcflow.errors import StackError

log = logging.getLogger(__name__)

ARCHIVE_TIMEOUT_S = 300


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found).resolve() if found else None


def pyspark_jars() -> Path | None:
    try:
        return pyspark_home() / "jars"
    except StackError:
        return None


def archive_path(java: Path | None = None, jars: Path | None = None) -> Path | None:
    """Where the archive of this Java and this pyspark install lives (it may not exist yet); None without Java
    or pyspark. Any change to the Java binary or to a jar of pyspark's names another archive."""
    java, jars = java or _java(), jars or pyspark_jars()
    if java is None or jars is None:
        return None
    key = hashlib.sha256(f"{java} {java.stat().st_mtime_ns}".encode())
    for jar in sorted(jars.glob("*.jar")):
        stat = jar.stat()
        key.update(f"{jar} {stat.st_size} {stat.st_mtime_ns}".encode())
    return cache_dir() / "spark-classes" / f"{key.hexdigest()[:16]}.jsa"


def ensure_archive() -> Path | None:
    """The archive, made first (in this thread) if missing; None when it cannot be made."""
    path = archive_path()
    if path is None or path.exists():
        return path
    maker = ArchiveMaker(path)
    maker.run()
    return maker.made


class ArchiveMaker(threading.Thread):
    """Makes the archive in the background: a small Spark job in a process group of its own, whose JVM writes
    the archive as it exits. JVMs started meanwhile with the archive's path, before it exists, start as usual;
    the file appears whole (renamed into place), so a JVM never maps half of one. A failure is logged and
    leaves no archive: Spark then starts as usual."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="spark-class-archive", daemon=True)
        self.path = path
        self.made: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = threading.Event()

    def run(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One maker at a time per archive (another process's, e.g. a test's, waits and then finds it made).
        with self.path.with_suffix(".lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.exists():
                self.made = self.path
            else:
                self._make()

    def _make(self) -> None:
        with tempfile.TemporaryDirectory(prefix="cdcflow-spark-classes-") as work:
            partial, output = Path(work) / "classes.jsa", Path(work) / "job.log"
            opts = [o for o in os.environ.get("SPARK_SUBMIT_OPTS", "").split() if not o.startswith("-XX:Shared")]
            env = {**os.environ, "SPARK_SUBMIT_OPTS": " ".join([*opts, f"-XX:ArchiveClassesAtExit={partial}"])}
            with output.open("wb") as out:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", __name__, work], env=env, stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, start_new_session=True,
                )  # fmt: skip
                try:
                    code = self._process.wait(timeout=ARCHIVE_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self.stop()
                    log.warning("no Spark class archive: the job that makes it ran over %d s", ARCHIVE_TIMEOUT_S)
                    return
            if self._stopped.is_set():
                return
            if code != 0 or not partial.exists():
                log.warning("no Spark class archive (exit %d): %s", code, output.read_text(errors="replace")[-2000:])
                return
            # Renamed into place: a JVM starting now finds no archive or a whole one.
            staged = self.path.with_suffix(f".{os.getpid()}.partial")
            shutil.move(partial, staged)
            staged.replace(self.path)
        _prune(self.path.parent, keep=self.path)
        self.made = self.path

    def stop(self) -> None:
        """Kills the job if it still runs (its JVM with it): the archive is then not made."""
        self._stopped.set()
        if self._process is not None and self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()


def _prune(folder: Path, keep: Path, others: int = 2) -> None:
    """Archives of installs gone (a fresh clone has a new venv) are 200 MB each: keep only the newest few."""
    old = sorted((p for p in folder.glob("*.jsa") if p != keep), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in old[others:]:
        path.unlink(missing_ok=True)
        path.with_suffix(".lock").unlink(missing_ok=True)


def java_options(path: Path) -> list[str]:
    return [f"-XX:SharedArchiveFile={path}"]


def _load_classes(work: Path) -> None:
    """What the tests' Spark drivers do, small: Delta writes, a MERGE, reads and a streaming query with a Python
    batch function, so their classes are the ones archived."""
    from cdcflow.pipeline.session import build_session

    spark = build_session("cdcflow-spark-classes")
    table, source = str(work / "table"), work / "source"
    spark.range(100).selectExpr("id", "cast(id as string) as v").write.format("delta").save(table)
    spark.range(50, 150).selectExpr("id", "'new' as v").createOrReplaceTempView("changes")
    spark.sql(f"MERGE INTO delta.`{table}` t USING changes c ON t.id = c.id "
              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")  # fmt: skip
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id < 10")
    spark.read.format("delta").load(table).groupBy("v").count().collect()
    spark.range(20).selectExpr("id", "'s' as v").write.parquet(str(source))

    def append(batch: object, batch_id: int) -> None:
        batch.write.format("delta").mode("append").save(table)  # type: ignore[attr-defined]

    query = (
        spark.readStream.schema("id long, v string")
        .parquet(str(source))
        .writeStream.foreachBatch(append)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # the JVM pyspark started
    spark.stop()
    # The JVM writes the archive as it exits, which it does when its standard input closes: wait for that here,
    # so this process ends after the archive is written.
    jvm.stdin.close()
    jvm.wait(timeout=ARCHIVE_TIMEOUT_S)


if __name__ == "__main__":
    _load_classes(Path(sys.argv[1]))
