"""The PySpark pipeline: reads change topics and applies them to sinks. Only this package imports pyspark."""
