"""cdcflow: change-data capture from HBase and MySQL/MariaDB to Kafka, applied to sinks with PySpark."""

__version__ = "0.1.0"
