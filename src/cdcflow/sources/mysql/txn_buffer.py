"""Records of one binlog event group held back until the group's end says whether they happened.

MariaDB writes rows into the binlog that a later `ROLLBACK TO SAVEPOINT` or `ROLLBACK` in the same
group undoes, whenever the transaction also changed a non-transactional table (MyISAM, Aria); and
the rows of a prepared XA transaction wait for a later `XA COMMIT` or `XA ROLLBACK`. Such records
wait here: in memory up to a byte budget, then in an unnamed temporary file, so a large group never
grows the process beyond the budget. `mark()`/`truncate()` undo back to a savepoint.
"""

from __future__ import annotations

import struct
import tempfile
from array import array
from collections.abc import Iterator
from typing import IO, NamedTuple

_FRAME = struct.Struct("<Hi H I")  # topic length, key length (-1: no key), table length, value length
# Records with a tombstone or an identity (the debezium format) take a second frame, marked by a topic
# length no topic has (Kafka allows 249 characters), so records held in the XA topic by an earlier
# version still read: marker, topic length, key length, table length, value length (-1: a tombstone),
# identity length (-1: none).
_MARK = 0xFFFF
_FRAME2 = struct.Struct("<HHi H i i")


class HeldRecord(NamedTuple):
    """One record of a change or schema event (a named tuple: the capture makes one per row)."""

    topic: str
    key: bytes | None
    value: bytes | None  # None: a tombstone (the debezium format's record after a delete)
    table: str = ""  # "db.table" of a change event ("" for anything else)
    # The row's identity as the snapshot compares it (changes.py's key), where the Kafka key is another
    # form of it (the debezium format); None: the key is the identity.
    identity: bytes | None = None

    def size(self) -> int:
        held = len(self.value or b"") + len(self.key or b"") + len(self.identity or b"")
        return held + len(self.topic) + len(self.table)

    def to_bytes(self) -> bytes:
        topic, table = self.topic.encode(), self.table.encode()
        key_len = -1 if self.key is None else len(self.key)
        if self.value is not None and self.identity is None:
            return b"".join((_FRAME.pack(len(topic), key_len, len(table), len(self.value)), topic, self.key or b"",
                             table, self.value))  # fmt: skip
        value_len = -1 if self.value is None else len(self.value)
        identity_len = -1 if self.identity is None else len(self.identity)
        return b"".join((_FRAME2.pack(_MARK, len(topic), key_len, len(table), value_len, identity_len), topic,
                         self.key or b"", table, self.value or b"", self.identity or b""))  # fmt: skip

    @classmethod
    def from_bytes(cls, data: bytes) -> HeldRecord:
        record, end = _read_frame(data, 0)
        if end != len(data):
            raise ValueError(f"held record: {len(data) - end} bytes after the record")
        return record


def _read_frame(data: bytes, offset: int) -> tuple[HeldRecord, int]:
    if offset + _FRAME.size > len(data):
        raise ValueError("held record: truncated frame header")
    if struct.unpack_from("<H", data, offset)[0] == _MARK:
        if offset + _FRAME2.size > len(data):
            raise ValueError("held record: truncated frame header")
        _mark, topic_len, key_len, table_len, value_len, identity_len = _FRAME2.unpack_from(data, offset)
        p = offset + _FRAME2.size
    else:
        topic_len, key_len, table_len, value_len = _FRAME.unpack_from(data, offset)
        identity_len = -1
        p = offset + _FRAME.size
    end = p + topic_len + max(key_len, 0) + table_len + max(value_len, 0) + max(identity_len, 0)
    if end > len(data):
        raise ValueError("held record: truncated frame")
    topic = data[p : p + topic_len].decode()
    p += topic_len
    key = None if key_len < 0 else data[p : p + key_len]
    p += max(key_len, 0)
    table = data[p : p + table_len].decode()
    p += table_len
    value = None if value_len < 0 else data[p : p + value_len]
    p += max(value_len, 0)
    identity = None if identity_len < 0 else data[p : p + identity_len]
    return HeldRecord(topic, key, value, table, identity), end


class RecordBuffer:
    """An append-only list of records that can be cut back to a mark; spills to a temp file."""

    def __init__(self, memory_bytes: int = 32 * 2**20, spill_dir: str | None = None) -> None:
        self.memory_bytes = memory_bytes
        self.spill_dir = spill_dir
        self._memory: list[HeldRecord] = []
        self._memory_size = 0
        self._file: IO[bytes] | None = None
        self._offsets = array("q")  # file offset of each spilled record
        self._file_end = 0

    def __len__(self) -> int:
        return len(self._offsets) + len(self._memory)

    @property
    def spilled(self) -> int:
        """Records kept in the temporary file."""
        return len(self._offsets)

    def append(self, record: HeldRecord) -> None:
        self._memory.append(record)
        self._memory_size += record.size()
        if self._memory_size > self.memory_bytes:
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(dir=self.spill_dir, prefix="cdcflow-txn-")  # noqa: SIM115
        self._file.seek(self._file_end)
        for record in self._memory:
            frame = record.to_bytes()
            self._offsets.append(self._file_end)
            self._file.write(frame)
            self._file_end += len(frame)
        self._memory.clear()
        self._memory_size = 0

    def mark(self) -> int:
        """A point to `truncate` back to (a savepoint)."""
        return len(self)

    def truncate(self, mark: int) -> int:
        """Forget every record appended after `mark`; returns how many were dropped."""
        dropped = len(self) - mark
        if dropped <= 0:
            return 0
        spilled = len(self._offsets)
        if mark >= spilled:
            del self._memory[mark - spilled :]
            self._memory_size = sum(r.size() for r in self._memory)
        else:
            assert self._file is not None
            self._file_end = self._offsets[mark]
            self._file.truncate(self._file_end)
            del self._offsets[mark:]
            self._memory.clear()
            self._memory_size = 0
        return dropped

    def __iter__(self) -> Iterator[HeldRecord]:
        if self._file is not None and self._offsets:
            self._file.flush()
            self._file.seek(0)
            chunk, chunk_start = b"", 0  # file bytes [chunk_start, chunk_start + len(chunk)) in memory
            for i, offset in enumerate(self._offsets):
                end = self._offsets[i + 1] if i + 1 < len(self._offsets) else self._file_end
                if end > chunk_start + len(chunk):  # read on in 8 MB steps, keeping the unread tail
                    chunk = chunk[offset - chunk_start :]
                    chunk_start = offset
                    while end > chunk_start + len(chunk):
                        more = self._file.read(max(8 * 2**20, end - chunk_start - len(chunk)))
                        if not more:
                            raise OSError("transaction spill file is shorter than written")
                        chunk += more
                record, _ = _read_frame(chunk, offset - chunk_start)
                yield record
        yield from list(self._memory)

    def clear(self) -> None:
        self._memory.clear()
        self._memory_size = 0
        self._offsets = array("q")
        self._file_end = 0
        if self._file is not None:
            self._file.close()
            self._file = None


class GroupBuffer(RecordBuffer):
    """The held records of one event group, with where each rows event's records start: the capture's core
    counts held rows in events (a savepoint is "after the first k"), the buffer in records."""

    def __init__(self, memory_bytes: int = 32 * 2**20, spill_dir: str | None = None) -> None:
        super().__init__(memory_bytes, spill_dir)
        self._event_starts = array("q")

    def start_event(self) -> None:
        """The records appended next belong to the next held rows event."""
        self._event_starts.append(len(self))

    def keep_events(self, kept: int) -> int:
        """Forget the records of every rows event after the first `kept`; how many records were dropped."""
        if kept >= len(self._event_starts):
            return 0
        dropped = self.truncate(self._event_starts[kept])
        del self._event_starts[kept:]
        return dropped

    def clear(self) -> None:
        super().clear()
        self._event_starts = array("q")
