"""SparkSession with the Kafka connector and Delta Lake, from jars resolved by cdcflow (no Ivy)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from cdcflow.stack import maven, versions

_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def extra_jars() -> list[Path]:
    """Connector jars pyspark does not ship. A jar pyspark already has (in any version) is left
    out, so Spark's own versions of shared libraries (scala, hadoop-client, lz4, ...) win."""
    lib = maven.resolve_classpath(
        "spark.xml",
        {
            "spark.version": versions.SPARK_VERSION,
            "delta.artifact": versions.DELTA_ARTIFACT,
            "delta.version": versions.DELTA_VERSION,
        },
    )
    bundled_dir = Path(pyspark.__file__).parent / "jars"
    bundled = {m.group("name") for p in bundled_dir.glob("*.jar") if (m := _VERSIONED.match(p.name))}
    out = []
    for jar in sorted(lib.glob("*.jar")):
        m = _VERSIONED.match(jar.name)
        if m and m.group("name") in bundled:
            continue
        out.append(jar)
    return out


def build_session(app_name: str, master: str | None = "local[2]", shuffle_partitions: int = 2) -> SparkSession:
    """A session for the pipeline. With `master=None` the master comes from spark-submit."""
    jars = ",".join(str(j) for j in extra_jars())
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
        # Local Python workers must run this interpreter (the venv that has cdcflow), not whatever
        # "python3" is; PySpark reads the worker interpreter from this variable.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    return (
        builder.config("spark.jars", jars)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
