"""A binlog event the decoder cannot read: stop (the default), or dead-letter its raw bytes and go on.

Pure: the decision and the dead letter's record, from the raw bytes and where the stream stands.
"""

from __future__ import annotations

import base64

import orjson

from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import TABLE_MAP
from cdcflow.sources.mysql.transactions import TransactionState

_ROWS_EVENT_TYPES = frozenset((23, 24, 25, 30, 31, 32, 39))


class UndecodableEvent(TerminalError):
    """A binlog event the decoder cannot read, under `on_undecodable: stop`."""


def dead_letter(raw: bytes, exc: BinlogDecodeError, table: str | None, position: TransactionState, source: str,
                policy: str) -> bytes:  # fmt: skip
    """The dead letter of `raw` (`table`: the table its TABLE_MAP names, if known), or UndecodableEvent when
    `policy` is 'stop' or the event cannot be left out (only rows and TABLE_MAP events of an open group can:
    anything else moves the position or the group's state)."""
    event_type = raw[4] if len(raw) > 4 else -1
    end_pos = int.from_bytes(raw[13:17], "little") if len(raw) >= 17 else None
    gtid = position.ctx.gtid if position.ctx else None
    where = (f"binlog event type {event_type}{f' of table {table}' if table else ''} ending at "
             f"{position.file}:{end_pos} (GTID {gtid or 'none open'})")  # fmt: skip
    can_skip = position.open is not None and (event_type == TABLE_MAP or event_type in _ROWS_EVENT_TYPES)
    if policy == "stop" or not can_skip:
        why = (
            "mysql.on_undecodable is 'stop'"
            if policy == "stop"
            else "only rows and TABLE_MAP events can be dead-lettered"
        )
        raise UndecodableEvent(f"cannot decode the {where}: {exc}. Stopped: {why}; nothing after this event was "
                               "published or checkpointed.")  # fmt: skip
    return orjson.dumps({
        "source": source, "error": str(exc), "file": position.file, "table": table, "gtid": gtid,
        "raw_event": base64.b64encode(raw).decode("ascii"), "end_pos": end_pos,
    })  # fmt: skip
