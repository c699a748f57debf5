"""SparkSession with the Kafka connector and Delta Lake, from jars resolved by cdcflow (no Ivy)."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

from cdcflow.config import PipelineConfig
from cdcflow.errors import ConfigError
from cdcflow.jars import maven, versions
from cdcflow.pipeline.context import Endpoints

log = logging.getLogger(__name__)

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


DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
# Delta needs a session catalog that knows Delta: its own, unless the user configured one (a
# catalog such as Unity's that delegates to Delta's); cdcflow never replaces a user's.
SESSION_CATALOG = "spark.sql.catalog.spark_catalog"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
# Every cdcflow Spark application needs these (spark-submit passes them with --conf).
SESSION_CONF = {
    "spark.sql.extensions": DELTA_EXTENSION,
    "spark.sql.session.timeZone": "UTC",
    # JDBC sinks bind DATE/TIMESTAMP through java.sql types, which use the JVM's zone.
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    # Jobs of several threads (the Delta sinks' folds beside the batches) share the cores fairly.
    "spark.scheduler.mode": "FAIR",
    # Change events are wide (every field of source, before, after and cells counts): at Spark's default of 100
    # fields, their stages run without whole-stage code generation, and every task generates its projections'
    # code again (in a profile of `make run`, creating projections was 12% of the Spark JVM's samples). The code
    # cache holds the plans of several queries and the folds' MERGEs. Measured together with adaptive execution
    # off (local masters, below): 1.82 instead of 2.12 CPU-s per 1,000 applied changes (benchmarks/capacity.py).
    "spark.sql.codegen.maxFields": "2000",
    # PySpark records the Python call site of every DataFrame and Column call for error messages: about five more
    # round trips to the JVM per call. The sinks build each batch's plans anew; with it on, building one batch's
    # conversions of four 12-column Phoenix tables took 2.4-3.6 s on an idle machine, with it off 0.8-1.0 s.
    # (Read once per Python process, at its first DataFrame call.)
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.sql.codegen.cache.maxEntries": "2000",
    # Delta's VACUUM (the change log's, in the fold thread) lists the table's files in seven jobs of this many
    # tasks each; at Spark's default of 10,000 a VACUUM of a small log ran 70,000 tasks and took 24 s on two local
    # cores, with 32 about 2 s. Only listings of more than 32 paths use it otherwise.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "32",
    # Each executor keeps a Kafka consumer per query and topic partition it reads, at most this many (a soft limit:
    # past it, every borrow closes the oldest idle ones, and the next batch connects them again). A pipeline reads
    # one topic per source table, two partitions each by default, per query: at Spark's default of 64, 100 tables
    # made consumers anew in every batch (a Delta sink's batch over 100 tables read in 18 instead of 29 executor
    # CPU-s per 15 batches with 1,024; benchmarks/README.md). An idle consumer is closed after 5 minutes
    # (spark.kafka.consumer.cache.timeout).
    "spark.kafka.consumer.cache.capacity": "1024",
}
# On a local master (a few cores, spark.sql.shuffle.partitions = the cores) adaptive execution has nothing to
# coalesce, and its re-planning after every shuffle stage is driver work on the same cores (and a Spark job per
# stage).
LOCAL_CONF = {"spark.sql.adaptive.enabled": "false"}
# A local master's driver JVM is the whole application (planning, Delta's snapshots and commits, the executors'
# tasks). With Spark's 1 GB and Java's default collector (G1) the `make run` pipeline's heap stayed near full, G1
# marking concurrently all the time: 725 collections and 0.12 of a core of GC threads in a 5-minute window. With
# 3 GB and the throughput collector, 195 collections and the pipeline at 0.72 instead of 0.95 cores for the same
# load (benchmarks/capacity.py; benchmarks/README.md). The heap is a limit: the JVM commits what it uses.
LOCAL_DRIVER_CONF = {"spark.driver.memory": "3g"}
LOCAL_DRIVER_GC = "-XX:+UseParallelGC"
_JAVA_OPTION_VARIABLES = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "SPARK_SUBMIT_OPTS")
_GC_CHOICE = re.compile(r"-XX:\+Use\w+GC\b")


def local_driver_conf(user_conf: Mapping[str, str], user_set: Collection[str] = ()) -> dict[str, str]:
    """What a driver cdcflow starts on a local master gets on top of `session_conf`: the heap and collector above,
    each unless the user set it (in `user_conf`, `user_set`, or a collector in the JVM's option variables, which
    Java would refuse beside a second one)."""
    given = {*user_conf, *user_set}
    conf = {key: value for key, value in LOCAL_DRIVER_CONF.items() if key not in given}
    java_options = "spark.driver.extraJavaOptions"
    if java_options not in given and not any(_GC_CHOICE.search(os.environ.get(v, "")) for v in _JAVA_OPTION_VARIABLES):
        conf[java_options] = f"{SESSION_CONF[java_options]} {LOCAL_DRIVER_GC}"
    return conf


def session_conf(user_conf: Mapping[str, str], user_set: Collection[str] = ()) -> dict[str, str]:
    """cdcflow's required settings merged with the user's (`user_conf`; `user_set`: keys the user gave
    elsewhere, e.g. spark-submit --conf): the user's win, Delta's extension is added to theirs, and
    Delta's catalog is the session catalog only when the user named none."""
    conf = {**SESSION_CONF, **user_conf}
    extensions = [e.strip() for e in conf["spark.sql.extensions"].split(",") if e.strip()]
    if DELTA_EXTENSION not in extensions:
        conf["spark.sql.extensions"] = ",".join([*extensions, DELTA_EXTENSION])
    if SESSION_CATALOG not in user_conf and SESSION_CATALOG not in user_set:
        conf[SESSION_CATALOG] = DELTA_CATALOG
    return conf


def build_session(
    app_name: str,
    master: str | None = "local[2]",
    shuffle_partitions: int = 2,
    sink_jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session for the pipeline. With `master=None` it runs under spark-submit, which already
    gave the master, the jars and any cluster settings; only cdcflow's required settings are added
    (a session catalog spark-submit was given is kept). `conf`: the user's extra settings."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        jars = ",".join([*(str(j) for j in extra_jars()), *sink_jars])
        builder = builder.master(master)
        # Local Python workers must run this interpreter (the venv that has cdcflow), not whatever
        # "python3" is; PySpark reads the worker interpreter from this variable.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.config("spark.jars", jars).config("spark.ui.enabled", "false")
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        # Delta reads its log with 50 tasks by default: on a few local cores that scheduling is most
        # of a small MERGE (measured: 5-6 s → 1.8-2.5 s per MERGE warm, 16 s → 7 s cold).
        builder = builder.config("spark.databricks.delta.snapshotPartitions", str(shuffle_partitions))
        if master.startswith("local"):
            for key, value in LOCAL_CONF.items():
                builder = builder.config(key, value)
    given: set[str] = set()
    if not master:  # spark-submit's --conf settings: in the JVM's configuration once the gateway is up
        SparkContext._ensure_initialized()
        given = {key for key, _ in pyspark.SparkConf().getAll()}
    settings = session_conf(conf or {}, given)
    if master and master.startswith("local"):
        settings |= local_driver_conf(conf or {}, given)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.config("spark.ui.showConsoleProgress", "false").getOrCreate()
    add_missing_jars(spark, sink_jars)
    return spark


KAFKA_SOURCE = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def check_session(spark: SparkSession, sink_jars: Sequence[str] = ()) -> None:
    """A session made elsewhere (a user's job) has what cdcflow needs, or a ConfigError says what to add: Spark's
    Kafka connector, Delta's extension, the session time zone UTC. Jars only the sinks need (Phoenix's
    client) are added when they can be."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        jvm.java.lang.Class.forName(KAFKA_SOURCE, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception as exc:
        raise ConfigError(
            "the Spark session has no Kafka connector (spark-sql-kafka): build it with cdcflow.spark_conf(), e.g. "
            "SparkSession.builder.config(map=cdcflow.spark_conf()).getOrCreate()"
        ) from exc
    extensions = [e.strip() for e in (spark.conf.get("spark.sql.extensions", "") or "").split(",")]
    if DELTA_EXTENSION not in extensions:
        raise ConfigError(
            f"the Spark session lacks Delta's extension ({DELTA_EXTENSION}): build it with cdcflow.spark_conf(), "
            "e.g. SparkSession.builder.config(map=cdcflow.spark_conf()).getOrCreate()"
        )
    zone = spark.conf.get("spark.sql.session.timeZone", "")
    if zone not in ("UTC", "Etc/UTC", "GMT", "Z", "+00:00"):
        raise ConfigError(
            f"the Spark session's time zone is {zone!r}: cdcflow's sinks write source times as UTC; set "
            "spark.sql.session.timeZone=UTC (cdcflow.spark_conf() does)"
        )
    add_missing_jars(spark, sink_jars)


def add_missing_jars(spark: SparkSession, jars: Sequence[str]) -> list[str]:
    """Give a session that already existed (getOrCreate ignores `spark.jars` then) the jars it lacks.

    Happens when the pipeline runs in a process that made a session before (tests, notebooks).
    Executors get the jars through `addJar`; the driver through its context class loader, which
    Py4J and the JDBC writer load classes from. Returns the jars added."""
    sc = spark.sparkContext
    jsc = sc._jsc
    assert jsc is not None and sc._jvm is not None
    listed = str(jsc.sc().listJars().mkString("\n"))  # a Scala Seq of URLs
    present = {url.rsplit("/", 1)[-1] for url in listed.splitlines()}
    missing = [j for j in jars if Path(j).name not in present]
    if not missing:
        return []
    loader = sc._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    if loader.getClass().getName() != "org.apache.spark.util.MutableURLClassLoader":
        raise ConfigError(
            f"the Spark session was created before without {', '.join(Path(j).name for j in missing)}; "
            "start the pipeline in a fresh process or pass these jars with --jars"
        )
    for jar in missing:
        jsc.addJar(jar)
        loader.addURL(sc._jvm.java.io.File(jar).toURI().toURL())
    log.warning("added %d jar(s) to the Spark session that already existed: %s", len(missing), missing)
    return missing


def spark_submit_command(
    cfg: PipelineConfig, context: Endpoints, master: str | None, spark_args: tuple[str, ...], app: str
) -> list[str]:
    """pyspark's spark-submit with cdcflow's connector jars (and every sink's), the session settings,
    this Python, extra arguments, then the application file."""
    from cdcflow.pipeline.sinks.registry import make_sink

    sink_jars = sorted({j for s in cfg.sinks for j in make_sink(s, context).jars()})
    jars = ",".join([*(str(j) for j in extra_jars()), *sink_jars])
    cmd = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"), "--name", "cdcflow-pipeline"]
    cmd += ["--master", master or cfg.master or "local[2]", "--jars", jars]
    given = {arg.split("=", 1)[0] for arg in spark_args if "=" in arg}  # --conf k=v (or --conf=k=v)
    given |= {arg.split("=", 2)[1] for arg in spark_args if arg.startswith("--conf=")}
    settings = session_conf(cfg.spark_conf, given)
    if (master or cfg.master or "local[2]").startswith("local"):
        settings |= local_driver_conf(cfg.spark_conf, given)
    for key, value in settings.items():
        if key not in given:
            cmd += ["--conf", f"{key}={value}"]
    cmd += ["--conf", f"spark.pyspark.python={sys.executable}", *spark_args, app]
    return cmd
