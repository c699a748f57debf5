"""A schema registry with Confluent's REST API, for the local stack (`cdcflow stack up registry`).

No third-party registry runs on this machine's package sources (decision 0017): this one serves what Avro
producers and consumers use (register, look up by id and subject, versions, compatibility levels and checks),
keeps its state in an append-only log file, and checks Avro compatibility with Avro's resolution rules.
In production cdcflow points at the registry users already run (`kafka.schema_registry_url`).

- `store`: the state and its change records (pure)
- `avro_compat`: can one Avro schema read what another wrote (pure)
- `app`: the HTTP API (Starlette) and the log file; `python -m cdcflow.dev.registry` serves it
"""
