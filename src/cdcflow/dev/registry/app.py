"""The registry's HTTP API, Confluent Schema Registry's paths and error bodies, over a SchemaStore kept in a log.

Handlers are async and run on one event loop, so changes never interleave; each change is appended to the
log file and fsynced before the answer goes out, so an acknowledged id survives a crash.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from cdcflow.dev.registry.avro_compat import compatible
from cdcflow.dev.registry.store import RegistryError, SchemaStore, canonical_text

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class _Json(JSONResponse):
    media_type = CONTENT_TYPE


def _error(exc: RegistryError) -> Response:
    return _Json({"error_code": exc.code, "message": exc.message}, status_code=exc.status)


class RegistryLog:
    """The store and its append-only file of change records (JSON lines)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = SchemaStore()
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    self.store.apply(json.loads(line))
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise RegistryError(422, 42201, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise RegistryError(422, 42201, "the request body must be a JSON object")
    return body


def _schema_of(body: dict[str, Any]) -> tuple[str, str]:
    schema = body.get("schema")
    if not isinstance(schema, str):
        raise RegistryError(422, 42201, "'schema' must be the schema as a string")
    if body.get("references"):
        raise RegistryError(422, 42201, "schema references are not supported by this registry")
    return schema, str(body.get("schemaType") or "AVRO")


def _described(subject: str, version: int, schema_id: int, text: str, schema_type: str) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id, "schema": text}
    if schema_type != "AVRO":
        out["schemaType"] = schema_type
    return out


def create_app(log_path: Path) -> Starlette:
    log = RegistryLog(log_path)
    store = log.store

    def handle(fn: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                result = await fn(request, **request.path_params)
            except RegistryError as exc:
                return _error(exc)
            return result if isinstance(result, Response) else _Json(result)

        return endpoint

    async def root(_request: Request) -> Any:
        return {}

    async def subjects(_request: Request) -> Any:
        return sorted(s for s, versions in store.subjects.items() if any(not v.deleted for v in versions))

    async def versions(_request: Request, subject: str) -> Any:
        return [v.version for v in store.versions(subject)]

    async def version(_request: Request, subject: str, version: str) -> Any:
        v = store.version(subject, version)
        text, schema_type = store.schema(v.schema_id)
        return _described(subject, v.version, v.schema_id, text, schema_type)

    async def version_schema(_request: Request, subject: str, version: str) -> Any:
        return PlainTextResponse(store.schema(store.version(subject, version).schema_id)[0])

    async def register(request: Request, subject: str) -> Any:
        schema, schema_type = _schema_of(await _body(request))
        schema_id, records = store.register(subject, schema, schema_type)
        log.write(records)
        return {"id": schema_id}

    async def lookup(request: Request, subject: str) -> Any:
        schema, schema_type = _schema_of(await _body(request))
        found = store.lookup(subject, schema, schema_type)
        if found is None:
            store.versions(subject)  # 40401 when the subject itself is unknown
            raise RegistryError(404, 40403, "Schema not found")
        schema_id, number = found
        return _described(subject, number, schema_id, store.schema(schema_id)[0], schema_type)

    async def delete_subject(_request: Request, subject: str) -> Any:
        deleted, record = store.delete_subject(subject)
        log.write([record])
        return deleted

    async def by_id(_request: Request, schema_id: str) -> Any:
        text, schema_type = store.schema(_int(schema_id))
        return {"schema": text} if schema_type == "AVRO" else {"schema": text, "schemaType": schema_type}

    async def by_id_schema(_request: Request, schema_id: str) -> Any:
        return PlainTextResponse(store.schema(_int(schema_id))[0])

    async def id_versions(_request: Request, schema_id: str) -> Any:
        wanted = _int(schema_id)
        store.schema(wanted)
        return [{"subject": s, "version": v.version} for s, vs in sorted(store.subjects.items()) for v in vs
                if v.schema_id == wanted and not v.deleted]  # fmt: skip

    async def types(_request: Request) -> Any:
        return ["AVRO", "JSON", "PROTOBUF"]

    async def config(request: Request, subject: str | None = None) -> Any:
        if request.method == "PUT":
            level = str((await _body(request)).get("compatibility", "")).upper()
            log.write([store.set_level(subject, level)])
            return {"compatibility": level}
        if (
            subject is not None
            and subject not in store.levels
            and request.query_params.get("defaultToGlobal") != "true"
        ):
            raise RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")
        return {"compatibilityLevel": store.level(subject)}

    async def check(request: Request, subject: str, version: str) -> Any:
        schema, schema_type = _schema_of(await _body(request))
        new = json.loads(canonical_text(schema, schema_type)) if schema_type == "AVRO" else None
        old_text, _ = store.schema(store.version(subject, version).schema_id)
        level = store.level(subject)
        problems = compatible(new, json.loads(old_text), level) if new is not None and level != "NONE" else []
        return {"is_compatible": not problems, "messages": problems}

    async def mode(_request: Request) -> Any:
        return {"mode": "READWRITE"}

    routes = [
        Route("/", handle(root)),
        Route("/subjects", handle(subjects)),
        Route("/subjects/{subject}/versions", handle(versions), methods=["GET"]),
        Route("/subjects/{subject}/versions", handle(register), methods=["POST"]),
        Route("/subjects/{subject}/versions/{version}", handle(version)),
        Route("/subjects/{subject}/versions/{version}/schema", handle(version_schema)),
        Route("/subjects/{subject}", handle(lookup), methods=["POST"]),
        Route("/subjects/{subject}", handle(delete_subject), methods=["DELETE"]),
        Route("/schemas/ids/{schema_id}", handle(by_id)),
        Route("/schemas/ids/{schema_id}/schema", handle(by_id_schema)),
        Route("/schemas/ids/{schema_id}/versions", handle(id_versions)),
        Route("/schemas/types", handle(types)),
        Route("/config", handle(config), methods=["GET", "PUT"]),
        Route("/config/{subject}", handle(config), methods=["GET", "PUT"]),
        Route("/compatibility/subjects/{subject}/versions/{version}", handle(check), methods=["POST"]),
        Route("/mode", handle(mode)),
    ]
    return Starlette(routes=routes)


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise RegistryError(404, 40403, f"Schema {text} not found") from None
