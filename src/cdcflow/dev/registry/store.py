"""The registry's state: subjects, their versions, schema ids and compatibility settings. Pure: no I/O.

Every change is also a record (`SchemaStore.apply` takes it back), so the service keeps the state in an
append-only log file and rebuilds it at start, the way Confluent's registry replays its `_schemas` topic.
Ids are global: the same schema text registered under two subjects has one id. Schemas are Avro (checked
by fastavro, compatibility by avro_compat); JSON and PROTOBUF schemas are stored unchecked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import fastavro

from cdcflow.dev.registry.avro_compat import compatible

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")


class RegistryError(Exception):
    """An error the REST API reports: HTTP status and Confluent's error code."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


@dataclass
class Version:
    version: int
    schema_id: int
    deleted: bool = False


@dataclass
class SchemaStore:
    default_level: str = "BACKWARD"
    schemas: dict[int, tuple[str, str]] = field(default_factory=dict)  # id -> (schema text, type)
    ids: dict[tuple[str, str], int] = field(default_factory=dict)  # (canonical text, type) -> id
    subjects: dict[str, list[Version]] = field(default_factory=dict)
    levels: dict[str, str] = field(default_factory=dict)  # per-subject compatibility

    # -- changes: each returns the record that redoes it ---------------------------------------------------

    def register(self, subject: str, schema: str, schema_type: str = "AVRO") -> tuple[int, list[dict[str, Any]]]:
        """The id of `schema` under `subject`, registering a new version if it is new there."""
        canonical = canonical_text(schema, schema_type)
        found = self.lookup(subject, schema, schema_type)
        if found is not None:
            return found[0], []
        live = [v for v in self.subjects.get(subject, []) if not v.deleted]
        level = self.level(subject)
        if live and level != "NONE":
            against = live if level.endswith("_TRANSITIVE") else live[-1:]
            for old in against:
                old_text, old_type = self.schemas[old.schema_id]
                if old_type == schema_type == "AVRO":
                    problems = compatible(json.loads(canonical), json.loads(old_text), level)
                    if problems:
                        raise RegistryError(409, 409, f"Schema being registered is incompatible with an earlier "
                                                      f"schema for subject '{subject}' ({level}): "
                                                      + "; ".join(problems[:5]))  # fmt: skip
        record: dict[str, Any] = {"op": "register", "subject": subject, "schema": canonical, "type": schema_type}
        schema_id = self.apply(record)
        return schema_id, [{**record, "id": schema_id}]

    def set_level(self, subject: str | None, level: str) -> dict[str, Any]:
        if level not in LEVELS:
            raise RegistryError(422, 42203, f"Invalid compatibility level {level!r}; valid: {', '.join(LEVELS)}")
        record = {"op": "level", "subject": subject, "level": level}
        self.apply(record)
        return record

    def delete_subject(self, subject: str) -> tuple[list[int], dict[str, Any]]:
        versions = [v.version for v in self.subjects.get(subject, []) if not v.deleted]
        if not versions:
            raise subject_not_found(subject)
        record = {"op": "delete", "subject": subject}
        self.apply(record)
        return versions, record

    def apply(self, record: dict[str, Any]) -> int:
        """Redo one change record (at start, from the log; or just made). Returns the schema id, if any."""
        op = record["op"]
        if op == "register":
            key = (record["schema"], record["type"])
            schema_id = self.ids.get(key)
            if schema_id is None:
                schema_id = int(record.get("id") or max(self.schemas, default=0) + 1)
                self.ids[key] = schema_id
                self.schemas[schema_id] = key
            versions = self.subjects.setdefault(record["subject"], [])
            versions.append(Version(max((v.version for v in versions), default=0) + 1, schema_id))
            return schema_id
        if op == "level":
            if record["subject"] is None:
                self.default_level = record["level"]
            else:
                self.levels[record["subject"]] = record["level"]
            return 0
        if op == "delete":
            for v in self.subjects.get(record["subject"], []):
                v.deleted = True
            return 0
        raise ValueError(f"unknown registry log record {op!r}")

    # -- reads ---------------------------------------------------------------------------------------------

    def level(self, subject: str | None = None) -> str:
        return self.levels.get(subject, self.default_level) if subject else self.default_level

    def lookup(self, subject: str, schema: str, schema_type: str = "AVRO") -> tuple[int, int] | None:
        """(id, version) of `schema` under `subject`, if registered there."""
        schema_id = self.ids.get((canonical_text(schema, schema_type), schema_type))
        if schema_id is None:
            return None
        for v in self.subjects.get(subject, []):
            if v.schema_id == schema_id and not v.deleted:
                return schema_id, v.version
        return None

    def versions(self, subject: str) -> list[Version]:
        live = [v for v in self.subjects.get(subject, []) if not v.deleted]
        if not live:
            raise subject_not_found(subject)
        return live

    def version(self, subject: str, version: str) -> Version:
        live = self.versions(subject)
        if version in ("latest", "-1"):
            return live[-1]
        try:
            number = int(version)
        except ValueError:
            raise RegistryError(422, 42202, f"Invalid version {version!r}") from None
        for v in live:
            if v.version == number:
                return v
        raise RegistryError(404, 40402, f"Version {number} not found.")

    def schema(self, schema_id: int) -> tuple[str, str]:
        found = self.schemas.get(schema_id)
        if found is None:
            raise RegistryError(404, 40403, f"Schema {schema_id} not found")
        return found


def canonical_text(schema: str, schema_type: str) -> str:
    """The schema as stored and compared: Avro parsed and checked, then compact JSON with sorted keys."""
    if schema_type != "AVRO":
        return schema
    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise RegistryError(422, 42201, f"Invalid schema: not JSON: {exc}") from None
    try:
        fastavro.parse_schema(parsed)
    except Exception as exc:  # fastavro raises several types for bad schemas
        raise RegistryError(422, 42201, f"Invalid schema: {exc}") from None
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"))
