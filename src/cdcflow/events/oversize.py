"""Changes too large for their topic: a stand-in event in the table's topic, the whole event in parts.

Kafka refuses a record above the topic's `max.message.bytes`; retrying it fails forever. So a change
whose encoded event is larger than the limit is published as
- its parts: the complete encoded event cut into pieces, each a small JSON record in the oversize
  topic (`id`, `part` of `parts`, total `bytes`, `sha256` of the whole, `data` in base64), all with
  the same Kafka key (`id`) so they stay in order in one partition; and
- a marker in the table's topic: the same key, op, source and position, with the largest values
  replaced until it fits (row-image values by null, HBase cell values by empty bytes), and
  `oversize` naming them ("after.blob", "cells.3") and where the whole event is.
The pipeline applies a delete's marker (a delete needs only its key and position) and dead-letters the
others (it cannot apply a change it does not have); `reassemble` gives the original bytes back. Pure
functions: no I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from typing import Any

import orjson

from cdcflow.errors import TerminalError
from cdcflow.events.json_codec import encode
from cdcflow.events.model import ChangeEvent

PART_DATA_BYTES = 512 * 1024  # of the event per part record (base64 makes the record ~700 KB)


def oversize_id(event: ChangeEvent) -> str:
    s = event.source
    return f"{s.name}/{s.db}.{s.table}/{'.'.join(map(str, s.pos))}/{event.op.value}"


def split(
    event: ChangeEvent, encoded: bytes, parts_topic: str, limit: int, encoder: Callable[[ChangeEvent], bytes] = encode
) -> tuple[list[bytes], bytes]:
    """(part records for `parts_topic`, the marker's encoded bytes for the table's topic).
    `encoder` must be the one that made `encoded` (the marker is encoded the same way)."""
    ident = oversize_id(event)
    digest = hashlib.sha256(encoded).hexdigest()
    chunks = [encoded[i : i + PART_DATA_BYTES] for i in range(0, len(encoded), PART_DATA_BYTES)]
    parts = [
        orjson.dumps(
            {
                "id": ident,
                "part": i,
                "parts": len(chunks),
                "bytes": len(encoded),
                "sha256": digest,
                "data": base64.b64encode(chunk).decode("ascii"),
            }
        )
        for i, chunk in enumerate(chunks)
    ]
    info = {"id": ident, "topic": parts_topic, "parts": len(chunks), "bytes": len(encoded), "sha256": digest}
    return parts, _marker(event, info, limit, encoder)


def _marker(event: ChangeEvent, info: dict[str, Any], limit: int, encoder: Callable[[ChangeEvent], bytes]) -> bytes:
    images = {"before": dict(event.before or {}), "after": dict(event.after or {})}
    cells = list(event.cells or ())
    sizes = sorted(
        [
            *(
                (len(orjson.dumps(value)), side, column)
                for side, row in images.items()
                for column, value in row.items()
            ),
            *((len(cell.value), "cells", str(i)) for i, cell in enumerate(cells) if cell.value),
        ],
        reverse=True,
    )
    replaced: list[str] = []
    while True:
        marker = dataclasses.replace(
            event,
            before=images["before"] if event.before is not None else None,
            after=images["after"] if event.after is not None else None,
            cells=tuple(cells) if event.cells is not None else None,
            oversize={**info, "columns": sorted(replaced)},
        )
        encoded = encoder(marker)
        if len(encoded) <= limit:
            return encoded
        if not sizes:
            raise TerminalError(
                f"change {info['id']} does not fit in {limit} bytes even with every value left out; "
                "raise max_record_bytes"
            )
        _size, side, column = sizes.pop(0)
        if side == "cells":
            cells[int(column)] = cells[int(column)]._replace(value=b"")
        else:
            images[side][column] = None
        replaced.append(f"{side}.{column}")


def reassemble(records: Iterable[bytes]) -> bytes:
    """The original encoded event from its part records (any order); checks count, size and digest."""
    parts = [orjson.loads(r) for r in records]
    if not parts:
        raise ValueError("no parts")
    first = parts[0]
    by_index = {p["part"]: p for p in parts if p["id"] == first["id"]}
    if sorted(by_index) != list(range(first["parts"])):
        raise ValueError(f"{first['id']}: have parts {sorted(by_index)} of {first['parts']}")
    data = b"".join(base64.b64decode(by_index[i]["data"]) for i in range(first["parts"]))
    if len(data) != first["bytes"] or hashlib.sha256(data).hexdigest() != first["sha256"]:
        raise ValueError(f"{first['id']}: reassembled bytes do not match the recorded size and digest")
    return data
