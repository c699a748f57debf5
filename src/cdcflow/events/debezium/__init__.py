"""The `debezium` output format: change events as Debezium's MySQL/MariaDB connector writes them.

cdcflow's own format (events/json_codec.py, change-event-v1) stays the default. This package writes the
same changes the way Debezium-aware consumers (Flink's `debezium-json`/`debezium-avro-confluent`,
Kafka Connect sinks, RisingWave, Materialize, Paimon) read them: Debezium's envelope, key, value
representations per column type, tombstones after deletes and the transaction metadata topic.
Everything here is pure: values in, bytes out. docs/debezium.md lists what differs from Debezium.

- `mysql_columns`: per column, its Kafka Connect schema and how a cdcflow value becomes Debezium's.
- `envelope`: a table's key/value schemas, the envelope, tombstones, transaction BEGIN/END records.
"""
