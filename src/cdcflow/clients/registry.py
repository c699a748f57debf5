"""A client of a schema registry with Confluent's REST API: register a schema under a subject, get its id.

The only calls a producer needs. Ids are cached per (subject, schema), so the registry is asked once per
table shape. An unreachable registry is retryable (the capture resumes from its checkpoint); a refusal
(an incompatible schema, 409; an invalid one, 422) is terminal and says what the registry said.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from cdcflow.errors import ServiceUnavailable, TerminalError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryRefused(TerminalError):
    """The registry refused a schema."""


class SchemaRegistry:
    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._ids: dict[tuple[str, str], int] = {}

    def register(self, subject: str, schema: Any) -> int:
        """The id of `schema` (parsed Avro JSON) under `subject`, registering it if it is new there."""
        text = json.dumps(schema, separators=(",", ":"), sort_keys=True)
        cached = self._ids.get((subject, text))
        if cached is not None:
            return cached
        body = json.dumps({"schema": text}).encode()
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        answer = self._call("POST", path, body, what=f"registering the schema of subject {subject}")
        schema_id = int(answer["id"])
        self._ids[(subject, text)] = schema_id
        return schema_id

    def schema(self, schema_id: int) -> str:
        """The schema text registered under `schema_id` (what a reader of Avro records asks)."""
        answer = self._call("GET", f"/schemas/ids/{schema_id}", None, what=f"reading schema {schema_id}")
        return str(answer["schema"])

    def subjects(self) -> list[str]:
        return [str(s) for s in self._call("GET", "/subjects", None, what="listing subjects")]

    def version_numbers(self, subject: str) -> list[int]:
        quoted = urllib.parse.quote(subject, safe="")
        return [int(n) for n in self._call("GET", f"/subjects/{quoted}/versions", None, what=f"listing {subject}")]

    def version(self, subject: str, number: int) -> tuple[int, str]:
        """(schema id, schema text) of one version of `subject`."""
        quoted = urllib.parse.quote(subject, safe="")
        found = self._call("GET", f"/subjects/{quoted}/versions/{number}", None, what=f"reading {subject}")
        return int(found["id"]), str(found["schema"])

    def _call(self, method: str, path: str, body: bytes | None, what: str) -> Any:
        request = urllib.request.Request(self.url + path, data=body, method=method,
                                         headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:2000]
            if exc.code >= 500:
                raise ServiceUnavailable(f"schema registry {self.url}: {what}: HTTP {exc.code}: {detail}") from None
            raise RegistryRefused(f"schema registry {self.url} refused {what}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise ServiceUnavailable(f"schema registry {self.url} unreachable while {what}: {exc}") from None
