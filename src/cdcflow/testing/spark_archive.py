"""A class-data-sharing archive for the tests' local Spark drivers: each driver JVM maps the classes Spark,
Delta and the Kafka connector load instead of loading and verifying them again (measured: a session starts in
about 4 s instead of 6, its first Delta commit in 6-7 s instead of 9). The tests start a dozen Spark drivers
(pipelines run as processes, readers, backfills) besides their own.

The archive is made once per JVM, pyspark install (its path: a JVM takes an archive only on the class path it
was made with) and connector jars (a JVM dumps the classes it loaded at its exit, `-XX:ArchiveClassesAtExit`),
about 30 s, and kept in the user's cache like the Maven downloads. A JVM that cannot use it starts as before
(`-Xshare:auto` is the JVM's default).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

# What the dump run does: a session, a Delta table written, merged and read, and a Kafka source planned.
_WARM_UP = """
import sys
from cdcflow.pipeline.session import build_session
spark = build_session("cdcflow-class-archive")
path = sys.argv[1]
spark.range(100).selectExpr("id", "cast(id as string) as v").write.format("delta").save(path)
spark.range(50, 150).selectExpr("id", "'x' as v").createOrReplaceTempView("changes")
spark.sql(f"MERGE INTO delta.`{path}` t USING changes c ON t.id = c.id "
          "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
assert spark.read.format("delta").load(path).count() == 150
spark.readStream.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1").option("subscribe", "t").load()
spark.stop()
"""


def _key() -> str:
    from importlib.metadata import version
    from importlib.util import find_spec

    from cdcflow.pipeline.session import extra_jars

    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    spec = find_spec("pyspark")
    jars = Path(spec.origin).parent / "jars" if spec and spec.origin else Path()
    # The JVM takes an archive only on the class path it was made with: pyspark's jars, where they are.
    parts = [java, version("pyspark"), str(jars.resolve()), *(p.name for p in extra_jars())]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def class_archive(cache: Path | None = None, timeout_s: float = 300) -> Path | None:
    """The archive for this JVM and these jars, made first if missing; None when it cannot be made."""
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cdcflow" / "jvm"
    archive = cache / f"spark-driver-{_key()}.jsa"
    if archive.exists():
        return archive
    cache.mkdir(parents=True, exist_ok=True)
    scratch = cache / f"{archive.stem}.{os.getpid()}.tmp"
    env = {**os.environ, "CDCFLOW_SPARK_DRIVER_JAVA_OPTIONS": f"-XX:ArchiveClassesAtExit={scratch}"}
    table = cache / f"warm-up-{os.getpid()}"
    try:
        done = subprocess.run([sys.executable, "-c", _WARM_UP, str(table)], env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)  # fmt: skip
        if done.returncode != 0 or not scratch.exists():
            log.warning("no class archive for the Spark drivers (%s): %s", done.returncode, done.stderr[-2000:])
            return None
        scratch.replace(archive)  # whole, or not there
        return archive
    except subprocess.TimeoutExpired:
        log.warning("no class archive for the Spark drivers: the warm-up took over %.0f s", timeout_s)
        return None
    finally:
        scratch.unlink(missing_ok=True)
        subprocess.run(["rm", "-rf", str(table)], check=False)
