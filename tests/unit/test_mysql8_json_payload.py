"""MySQL 8's binary JSON and compressed transactions, decoded from bytes a real mysqld 8.0.31 wrote
(tests/unit/data/record_mysql80_json.py) and compared with what MySQL's own SELECT printed for them."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path

import pytest
import zstandard

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError
from cdcflow.sources.mysql.binlog.events import HEADER, BinlogDecoder, BinlogEvent, RowsEvent, XidEvent
from cdcflow.sources.mysql.binlog.mysql_events import TRANSACTION_PAYLOAD, TransactionPayloadEvent
from cdcflow.sources.mysql.binlog.mysql_json import parse, render, to_text

DATA = Path(__file__).parent / "data"


def recorded() -> list[bytes]:
    raw = (DATA / "mysql80_json.binlog").read_bytes()
    out, p = [], 0
    while p < len(raw):
        (n,) = struct.unpack_from("<I", raw, p)
        out.append(raw[p + 4 : p + 4 + n])
        p += 4 + n
    return out


def decode_all(events: list[bytes]) -> tuple[list[BinlogEvent], int]:
    """Every event, those inside compressed transactions included; and how many payload events there were."""
    d = BinlogDecoder()
    out: list[BinlogEvent] = []
    payloads = 0
    for raw in events:
        ev = d.decode(raw)
        if isinstance(ev, TransactionPayloadEvent):
            payloads += 1
            out.extend(d.decode(inner, inner=True) for inner in ev.events())
        else:
            out.append(ev)
    return out, payloads


def test_every_json_document_decodes_to_the_text_mysql_prints() -> None:
    facts = json.loads((DATA / "mysql80_json.json").read_text())
    events, payloads = decode_all(recorded())
    docs = {str(a["id"]): a["j"] for e in events if isinstance(e, RowsEvent) for _, a in e.rows if a is not None}
    assert payloads == len(facts["select"]) // 2  # every other transaction was compressed
    assert sum(isinstance(e, XidEvent) for e in events) == len(facts["select"])
    assert docs == facts["select"]


def test_compressed_transactions_carry_the_payload_end_position_and_no_checksum() -> None:
    events = recorded()
    d = BinlogDecoder()
    payload = next(ev for raw in events if isinstance(ev := d.decode(raw), TransactionPayloadEvent))
    inner = list(payload.events())
    assert sum(len(i) for i in inner) == payload.uncompressed_size
    assert all(HEADER.unpack_from(i)[4] == payload.header.log_pos for i in inner)
    assert isinstance(d.decode(inner[-1], inner=True), XidEvent)


def _payload_event(body: bytes) -> bytes:
    import zlib

    data = HEADER.pack(1_700_000_000, TRANSACTION_PAYLOAD, 1, 19 + len(body) + 4, 5000, 0) + body
    return data + zlib.crc32(data).to_bytes(4, "little")


def _payload_body(payload: bytes, uncompressed: int, compression: int = 0) -> bytes:
    def field(kind: int, value: int) -> bytes:
        packed = bytes([value]) if value < 251 else b"\xfd" + value.to_bytes(3, "little")
        return bytes([kind, len(packed)]) + packed

    return field(2, compression) + field(3, uncompressed) + field(1, len(payload)) + b"\x00" + payload


def test_broken_payloads_are_refused_with_a_decode_error() -> None:
    d = BinlogDecoder()
    d.checksum = True
    inner = HEADER.pack(1, 2, 1, 19 + 4, 0, 0) + b"\x00" * 4  # a tiny event
    good = zstandard.ZstdCompressor().compress(inner * 3)
    ev = d.decode(_payload_event(_payload_body(good, len(inner) * 3)))
    assert isinstance(ev, TransactionPayloadEvent) and len(list(ev.events())) == 3
    cases = {
        "declared too small": _payload_body(good, len(inner) * 2),
        "declared too large": _payload_body(good, len(inner) * 4),
        "corrupt frame": _payload_body(good[:8] + b"\xff" * (len(good) - 8), len(inner) * 3),
        "cut frame": _payload_body(good[:-6], len(inner) * 3),
        "unknown compression": _payload_body(good, len(inner) * 3, compression=7),
    }
    for name, body in cases.items():
        with pytest.raises(BinlogDecodeError):
            inner_events(d, _payload_event(body))
            pytest.fail(f"{name}: accepted")
    # an inner event that claims more than the payload holds
    huge = HEADER.pack(1, 2, 1, 2**31, 0, 0)
    with pytest.raises(BinlogDecodeError, match="inner event"):
        inner_events(d, _payload_event(_payload_body(zstandard.ZstdCompressor().compress(huge), len(huge))))


def inner_events(d: BinlogDecoder, raw: bytes) -> list[bytes]:
    ev = d.decode(raw)
    assert isinstance(ev, TransactionPayloadEvent)
    return list(ev.events())


def test_malformed_binary_json_raises_only_decode_errors() -> None:
    """Truncations and byte flips of real documents: a clear error or some value, never another exception."""
    rng = random.Random(7)
    samples = [
        b"\x00\x02\x00\x19\x00\x12\x00\x01\x00\x13\x00\x01\x00\x05\x01\x00\x02\x16\x00ab\x02\x02\x00\x0c\x00\x01\x00"
        b"\x05\x02\x00",
        b"\x02\x03\x00\x0d\x00\x04\x01\x00\x04\x02\x00\x05\x07\x00",
        b"\x0c\x05hello",
        b"\x0f\xf6\x04\x05\x02\x80\x01\x3a",
    ]
    for sample in samples:
        for _ in range(300):
            data = bytearray(sample)
            if rng.random() < 0.5:
                data = data[: rng.randrange(len(data))]
            else:
                data[rng.randrange(len(data))] = rng.randrange(256)
            try:
                render(parse(bytes(data)))
            except BinlogDecodeError:
                pass


def test_json_rendering_follows_mysql() -> None:
    assert to_text(b"") == "null"
    assert (
        render({"a": [1, 2.5, None, True], "b": 'x"\\\n\x01'})
        == '{"a": [1, 2.5, null, true], "b": "x\\"\\\\\\n\\u0001"}'
    )
    assert [render(v) for v in (1e15, 1e14, 1e-15, 1e-16, 1234567890123456.8, -0.0)] == [
        "1e15", "100000000000000.0", "0.000000000000001", "1e-16", "1234567890123456.8", "-0.0",
    ]  # fmt: skip
    with pytest.raises(BinlogDecodeError, match="nested too deeply"):
        parse(b"\x02" + _deep(200))


def _deep(levels: int) -> bytes:
    """The body of a small array nested `levels` deep (each holding one array)."""
    inner = b"\x00\x00\x04\x00"  # an empty small array's body: count 0, size 4
    for _ in range(levels):
        inner = struct.pack("<HH", 1, 7 + len(inner)) + b"\x02" + struct.pack("<H", 7) + inner
    return inner


def test_partial_json_diffs_apply_to_the_before_image() -> None:
    from cdcflow.sources.mysql.binlog.partial_json import apply_diffs, parse_path

    # the diff mysqld 8.0.31 wrote for JSON_REPLACE(j, '$.b[1]', 9): REPLACE, path, an int16 value
    real = bytes.fromhex("0006242e625b315d03050900")
    assert apply_diffs('{"a": 2, "b": [1, 2]}', real, "t") == '{"a": 2, "b": [1, 9]}'

    def diff(op: int, path: str, value: bytes | None = None) -> bytes:
        out = bytes([op, len(path)]) + path.encode()
        return out + (bytes([len(value)]) + value if value is not None else b"")

    string = b"\x0c\x03abc"
    doc = '{"a": 1.50, "b": [1, 2, 3], "zz": {"k": "v"}}'.replace("1.50", "1.5")
    assert apply_diffs(doc, diff(1, "$.c", string), "t") == '{"a": 1.5, "b": [1, 2, 3], "c": "abc", "zz": {"k": "v"}}'
    assert apply_diffs(doc, diff(2, "$.b[0]") + diff(1, "$.b[9]", b"\x04\x00"), "t") == (
        '{"a": 1.5, "b": [2, 3, null], "zz": {"k": "v"}}'
    )
    assert apply_diffs(doc, diff(0, '$.zz."k"', b"\x04\x01"), "t") == '{"a": 1.5, "b": [1, 2, 3], "zz": {"k": true}}'
    assert parse_path('$."a \\"b\\""[3].c') == ['a "b"', 3, "c"]
    for bad in (diff(0, "$.missing", string), diff(2, "$.b[7]"), diff(9, "$.a"), diff(0, "x.a", string),
                diff(1, "$.a.b", string), real[:-2], diff(0, "$.b[", string)):  # fmt: skip
        with pytest.raises(BinlogDecodeError):
            apply_diffs(doc, bad, "t")
    with pytest.raises(BinlogDecodeError, match="NULL"):
        apply_diffs(None, real, "t")
