"""Changes too large for their topic: a stand-in event in the table's topic, the whole event in parts.

Kafka refuses a record above the topic's `max.message.bytes`; retrying it fails forever. So a change
whose encoded event is larger than the limit is published as
- its parts: the complete encoded event cut into pieces, each a small JSON record in the oversize
  topic (`id`, `part` of `parts`, total `bytes`, `sha256` of the whole, `data` in base64), all with
  the same Kafka key (`id`) so they stay in order in one partition; and
- a marker in the table's topic: the same key, op, source and position, with the largest values
  replaced until it fits (row-image values by null, HBase cell values by empty bytes), and
  `oversize` naming them ("after.blob", "cells.3") and where the whole event is: the parts' topic,
  partition and offsets. The captures publish the parts first and make the marker once Kafka has
  acknowledged them, so a reader that sees a marker finds every part at the offsets it names.
The pipeline applies a delete's marker as it is (a delete needs only its key and position) and puts
the others back together from their parts (pipeline/oversize.py); `reassemble` gives the original
bytes back. Pure functions: no I/O.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import orjson

from cdcflow.errors import TerminalError
from cdcflow.events.json_codec import encode
from cdcflow.events.model import ChangeEvent

PART_DATA_BYTES = 512 * 1024  # of the event per part record (base64 makes the record ~700 KB)


def oversize_id(event: ChangeEvent) -> str:
    s = event.source
    return f"{s.name}/{s.db}.{s.table}/{'.'.join(map(str, s.pos))}/{event.op.value}"


class Cut(NamedTuple):
    """An event cut into part records, and what its marker says of them (before their offsets are known)."""

    parts: list[bytes]
    info: dict[str, Any]


def cut(event: ChangeEvent, encoded: bytes, parts_topic: str, part_limit: int | None = None) -> Cut:
    """The part records of `encoded` (the event's encoded bytes) for `parts_topic`, each at most
    `part_limit` bytes (the topic's record limit) when given."""
    ident = oversize_id(event)
    digest = hashlib.sha256(encoded).hexdigest()
    size = PART_DATA_BYTES
    if part_limit is not None:  # base64 makes 4 bytes of 3; the record's other fields take under 1 KiB
        size = min(size, (part_limit - 1024) * 3 // 4)
        if size < 1024:
            raise TerminalError(f"the oversize topic {parts_topic} takes records of {part_limit} bytes: too few "
                                "for parts; raise its max.message.bytes")  # fmt: skip
    chunks = [encoded[i : i + size] for i in range(0, len(encoded), size)]
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
    return Cut(parts, info)


def marker(
    event: ChangeEvent,
    cut_: Cut,
    limit: int,
    located: Sequence[tuple[int, int]] | None,
    encoder: Callable[[ChangeEvent], bytes] = encode,
) -> bytes:
    """The marker's encoded bytes for the table's topic. `located`: (partition, offset) of each part
    as Kafka acknowledged it (None: unknown, and the pipeline cannot put the change back together).
    `encoder` must be the one that made the event's bytes (the marker is encoded the same way)."""
    info = dict(cut_.info)
    if located is not None:
        if len(located) != len(cut_.parts) or len({p for p, _ in located}) != 1:
            raise ValueError(f"{info['id']}: {len(cut_.parts)} parts, located at {list(located)[:5]}: "
                             "expected one partition and an offset per part")  # fmt: skip
        info["partition"] = located[0][0]
        info["offsets"] = [offset for _, offset in located]
    return _marker(event, info, limit, encoder)


def split(
    event: ChangeEvent, encoded: bytes, parts_topic: str, limit: int, encoder: Callable[[ChangeEvent], bytes] = encode
) -> tuple[list[bytes], bytes]:
    """(part records, a marker that does not say where they are): for tools that place the parts themselves."""
    parts = cut(event, encoded, parts_topic)
    return parts.parts, marker(event, parts, limit, None, encoder)


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
