"""The schema registry's state and Avro compatibility rules (cdcflow.dev.registry), without the HTTP layer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cdcflow.dev.registry.avro_compat import compatible, incompatibilities
from cdcflow.dev.registry.store import RegistryError, SchemaStore


def record(*fields: dict[str, Any], name: str = "Value") -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "ns", "fields": list(fields)}


A = {"name": "a", "type": "int"}
B_OPTIONAL = {"name": "b", "type": ["null", "string"], "default": None}
B_REQUIRED = {"name": "b", "type": "string"}


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        (record(A, B_OPTIONAL), record(A), True),  # a column added with a default: old data reads
        (record(A, B_REQUIRED), record(A), False),  # a new field without a default
        (record(A), record(A, B_REQUIRED), True),  # a column dropped: the reader ignores it
        (record({"name": "a", "type": "long"}), record(A), True),  # INT -> BIGINT: int promotes to long
        (record(A), record({"name": "a", "type": "long"}), False),  # long does not narrow to int
        (record({"name": "a", "type": "string"}), record(A), False),
        (record({"name": "a", "type": ["null", "int"], "default": None}), record(A), True),  # made nullable
        (record(A), record({"name": "a", "type": ["null", "int"], "default": None}), False),  # a null cannot be an int
        (record({"name": "a", "type": {"type": "int", "connect.type": "int16"}}), record(A), True),  # properties
        ({"type": "enum", "name": "E", "symbols": ["x", "y", "z"]},
         {"type": "enum", "name": "E", "symbols": ["x"]}, True),
        ({"type": "enum", "name": "E", "symbols": ["x"]}, {"type": "enum", "name": "E", "symbols": ["x", "y"]}, False),
        (record(A, name="Other"), record(A), False),
        ({"type": "array", "items": "long"}, {"type": "array", "items": "int"}, True),
    ],
)  # fmt: skip
def test_avro_resolution_rules(reader: Any, writer: Any, ok: bool) -> None:
    problems = incompatibilities(reader, writer)
    assert (not problems) is ok, problems


def test_named_types_are_resolved_where_they_are_referenced() -> None:
    point = {"type": "record", "name": "P", "fields": [{"name": "x", "type": "double"}]}
    writer = record({"name": "before", "type": ["null", point]}, {"name": "after", "type": ["null", "P"]})
    wider = {"type": "record", "name": "P", "fields": [{"name": "x", "type": "double"},
                                                      {"name": "y", "type": "double"}]}  # fmt: skip
    reader = record({"name": "before", "type": ["null", wider]}, {"name": "after", "type": ["null", "P"]})
    assert any("/before/y" in p for p in incompatibilities(reader, writer))


def test_levels_check_the_right_direction() -> None:
    old, new = record(A), record(A, B_REQUIRED)
    assert compatible(new, old, "BACKWARD")  # new cannot read old
    assert not compatible(new, old, "FORWARD")  # old reads new (ignores b)
    assert compatible(new, old, "FULL")


def test_register_is_idempotent_and_ids_are_global() -> None:
    store = SchemaStore()
    first, records = store.register("t-value", json.dumps(record(A)))
    again, none = store.register("t-value", json.dumps(record(A), indent=2))  # the same schema, spelled otherwise
    other, _ = store.register("u-value", json.dumps(record(A)))
    assert first == again == other and records and not none
    assert [v.version for v in store.versions("t-value")] == [1]


def test_an_incompatible_schema_is_refused_and_the_log_replays_to_the_same_state() -> None:
    store, log = SchemaStore(), []
    for schema in (record(A), record(A, B_OPTIONAL)):
        log += store.register("t-value", json.dumps(schema))[1]
    with pytest.raises(RegistryError) as refused:
        store.register("t-value", json.dumps(record(A, B_OPTIONAL, {"name": "c", "type": "int"})))
    assert refused.value.status == 409 and "/c: a new field without a default" in refused.value.message
    log.append(store.set_level("t-value", "NONE"))
    log += store.register("t-value", json.dumps(record({"name": "a", "type": "string"})))[1]  # NONE: anything
    versions, deleted = store.delete_subject("t-value")
    log.append(deleted)
    replayed = SchemaStore()
    for entry in log:
        replayed.apply(json.loads(json.dumps(entry)))
    assert versions == [1, 2, 3]
    assert replayed.schemas == store.schemas and replayed.levels == {"t-value": "NONE"}
    with pytest.raises(RegistryError, match="not found"):
        replayed.versions("t-value")


@pytest.mark.parametrize("bad", ["{not json", '{"type": "record", "name": "R", "fields": [{"name": "a"}]}',
                                 '"nosuchtype"'])  # fmt: skip
def test_invalid_schemas_are_refused_with_42201(bad: str) -> None:
    with pytest.raises(RegistryError) as refused:
        SchemaStore().register("t-value", bad)
    assert refused.value.code == 42201
