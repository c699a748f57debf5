"""The test run's Spark JVMs map pyspark's classes from a class-data archive (cdcflow.dev.testing.spark_classes)."""

from __future__ import annotations

import os
import subprocess

from cdcflow.dev.testing.spark_classes import ensure_archive, java_options, pyspark_jars


def test_a_spark_jvm_given_the_archive_loads_sparks_classes_from_it() -> None:
    archive = ensure_archive()
    jars = pyspark_jars()
    assert archive is not None and archive.stat().st_size > 0 and jars is not None
    # -Xshare:on: a JVM that cannot map the archive (another class path, another Java) refuses to start.
    opts = [*java_options(archive), "-Xshare:on", "-Xlog:class+load=info"]
    done = subprocess.run(
        [str(jars.parent / "bin" / "spark-submit"), "--version"],
        env={**os.environ, "SPARK_SUBMIT_OPTS": " ".join(opts)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loads = [line for line in (done.stdout + done.stderr).splitlines() if " source: " in line]
    shared = [line for line in loads if "shared objects file (top)" in line]
    assert any("org.apache.spark.deploy.SparkSubmit " in line for line in shared), loads[:20]
    assert len(shared) > 1_000, f"{len(shared)} of {len(loads)} classes from the archive"
