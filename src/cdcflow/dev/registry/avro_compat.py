"""Can a reader with one Avro schema read data written with another? (Avro's schema resolution rules.)

What a registry's compatibility levels are made of: BACKWARD asks whether the new schema reads data
written with the old one, FORWARD the reverse, FULL both. Schemas are parsed JSON (dicts, lists, strings);
named types defined once may be referenced by name later. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
# writer type -> reader types that read it (besides itself)
PROMOTIONS = {"int": {"long", "float", "double"}, "long": {"float", "double"}, "float": {"double"},
              "string": {"bytes"}, "bytes": {"string"}}  # fmt: skip


class _Names:
    """Named types (record, enum, fixed) by full name, as a schema defines them."""

    def __init__(self) -> None:
        self.types: dict[str, dict[str, Any]] = {}

    def collect(self, schema: Any, namespace: str = "") -> None:
        if isinstance(schema, list):
            for branch in schema:
                self.collect(branch, namespace)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "error", "enum", "fixed"):
                full = full_name(schema, namespace)
                self.types[full] = schema
                namespace = full.rpartition(".")[0]
                for f in schema.get("fields", []) if kind != "enum" else []:
                    self.collect(f["type"], namespace)
            elif kind == "array":
                self.collect(schema["items"], namespace)
            elif kind == "map":
                self.collect(schema["values"], namespace)
            elif isinstance(kind, dict | list):
                self.collect(kind, namespace)

    def resolve(self, schema: Any) -> Any:
        if isinstance(schema, str) and schema not in PRIMITIVES:
            return self.types.get(schema, self.types.get(schema.rpartition(".")[2], schema))
        if isinstance(schema, dict) and isinstance(schema.get("type"), str) and schema["type"] in PRIMITIVES:
            return schema["type"]  # {"type": "int", "logicalType": ...}: the underlying type decides
        if isinstance(schema, dict) and isinstance(schema.get("type"), dict | list):
            return self.resolve(schema["type"])
        return schema


def full_name(schema: dict[str, Any], namespace: str = "") -> str:
    name = str(schema["name"])
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, str):
        return schema
    return str(schema.get("type"))


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    """Why `reader` cannot read what `writer` wrote (empty: it can)."""
    rn, wn = _Names(), _Names()
    rn.collect(reader)
    wn.collect(writer)
    problems: list[str] = []
    _check(reader, writer, rn, wn, "", problems, set())
    return problems


def _check(reader: Any, writer: Any, rn: _Names, wn: _Names, path: str, problems: list[str],
           seen: set[tuple[int, int]]) -> None:  # fmt: skip
    reader, writer = rn.resolve(reader), wn.resolve(writer)
    if (id(reader), id(writer)) in seen:  # a recursive type already being checked
        return
    rk, wk = _kind(reader), _kind(writer)
    where = path or "/"
    if wk == "union":
        for branch in writer:
            _check(reader, branch, rn, wn, path, problems, seen)
        return
    if rk == "union":
        closest: list[str] | None = None
        for branch in reader:
            sub: list[str] = []
            _check(branch, writer, rn, wn, path, sub, seen)
            if not sub:
                return
            if _kind(rn.resolve(branch)) == wk:  # the branch meant for it: say why it does not fit
                closest = sub
        problems.extend(closest or [f"{where}: the reader's union has no branch for the writer's {wk}"])
        return
    if rk in PRIMITIVES or wk in PRIMITIVES:
        if rk != wk and rk not in PROMOTIONS.get(wk, set()):
            problems.append(f"{where}: the writer's {wk} cannot be read as {rk}")
        return
    if rk != wk:
        problems.append(f"{where}: the writer's {wk} cannot be read as {rk}")
        return
    if rk in ("record", "error"):
        if reader["name"].rpartition(".")[2] != writer["name"].rpartition(".")[2]:
            problems.append(f"{where}: record {writer['name']} cannot be read as record {reader['name']}")
            return
        seen = seen | {(id(reader), id(writer))}
        written = {f["name"]: f for f in writer.get("fields", [])}
        for alias_owner in writer.get("fields", []):
            for alias in alias_owner.get("aliases", []):
                written.setdefault(alias, alias_owner)
        for f in reader.get("fields", []):
            source = written.get(f["name"]) or next((written[a] for a in f.get("aliases", []) if a in written), None)
            if source is None:
                if "default" not in f:
                    problems.append(f"{path}/{f['name']}: a new field without a default")
                continue
            _check(f["type"], source["type"], rn, wn, f"{path}/{f['name']}", problems, seen)
    elif rk == "enum":
        missing = set(writer.get("symbols", [])) - set(reader.get("symbols", []))
        if missing and "default" not in reader:
            problems.append(f"{where}: the reader's enum lacks {sorted(missing)}")
    elif rk == "array":
        _check(reader["items"], writer["items"], rn, wn, f"{path}[]", problems, seen)
    elif rk == "map":
        _check(reader["values"], writer["values"], rn, wn, f"{path}{{}}", problems, seen)
    elif rk == "fixed" and reader.get("size") != writer.get("size"):
        problems.append(f"{where}: fixed of {writer.get('size')} bytes cannot be read as {reader.get('size')}")


def compatible(new: Any, old: Any, level: str) -> list[str]:
    """Problems of registering `new` after `old` under a compatibility level (BACKWARD, FORWARD, FULL)."""
    level = level.removesuffix("_TRANSITIVE")
    problems = []
    if level in ("BACKWARD", "FULL"):
        problems += [f"new schema cannot read old data: {p}" for p in incompatibilities(new, old)]
    if level in ("FORWARD", "FULL"):
        problems += [f"old schema cannot read new data: {p}" for p in incompatibilities(old, new)]
    return problems
