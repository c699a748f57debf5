"""HBase rows in the upsert/tombstone form (decision 0018), for Debezium-aware and upserting consumers."""

from cdcflow.events.upsert.rows import UpsertColumns, UpsertField, upsert_avro_schema

__all__ = ["UpsertColumns", "UpsertField", "upsert_avro_schema"]
