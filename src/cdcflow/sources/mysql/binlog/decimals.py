"""MySQL's binary DECIMAL (decimal2bin), read as exact text: a column's values (columns.py) and the decimals
inside MySQL's binary JSON (mysql_json.py) both use it. Pure functions of bytes."""

from __future__ import annotations

from collections.abc import Callable

from cdcflow.sources.mysql.binlog.errors import BinlogDecodeError

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_reader(precision: int, scale: int) -> Callable[[bytes, int], tuple[object, int]]:
    """MySQL's binary DECIMAL (decimal2bin): base-10**9 groups, sign in the top bit, negatives inverted.
    Rendered as an exact string ("-12.50"), never a float."""
    if not 0 < precision <= 65 or not 0 <= scale <= min(precision, 38):
        raise BinlogDecodeError(f"DECIMAL({precision},{scale}) is not a valid column definition")
    intg = precision - scale
    intg0, intg0x = divmod(intg, 9)
    frac0, frac0x = divmod(scale, 9)
    size = intg0 * 4 + _DIG2BYTES[intg0x] + frac0 * 4 + _DIG2BYTES[frac0x]
    mask = (1 << (8 * size)) - 1

    def read_decimal(buf: bytes, off: int) -> tuple[object, int]:
        if off + size > len(buf):
            raise BinlogDecodeError(
                f"DECIMAL({precision},{scale}): needs {size} bytes at offset {off}, row data has {len(buf) - off}"
            )
        value = int.from_bytes(buf[off : off + size], "big")
        negative = not value >> (8 * size - 1)
        value ^= 1 << (8 * size - 1)
        if negative:
            value ^= mask
        raw = value.to_bytes(size, "big")
        p = 0
        int_digits = ""
        if intg0x:
            n = _DIG2BYTES[intg0x]
            int_digits = str(int.from_bytes(raw[p : p + n], "big"))
            p += n
        for _ in range(intg0):
            int_digits += f"{int.from_bytes(raw[p : p + 4], 'big'):09d}"
            p += 4
        frac_digits = ""
        for _ in range(frac0):
            frac_digits += f"{int.from_bytes(raw[p : p + 4], 'big'):09d}"
            p += 4
        if frac0x:
            n = _DIG2BYTES[frac0x]
            frac_digits += f"{int.from_bytes(raw[p : p + n], 'big'):0{frac0x}d}"
        text = (int_digits.lstrip("0") or "0") + ("." + frac_digits if scale else "")
        if len(text) > precision + 2:  # a group value above 999999999: not a decimal the server wrote
            raise BinlogDecodeError(f"DECIMAL({precision},{scale}) bytes {raw.hex()} do not hold a valid number")
        return ("-" + text if negative else text), off + size

    return read_decimal


def decimal_text(data: bytes, precision: int, scale: int) -> str:
    """A binary DECIMAL on its own (inside MySQL's binary JSON) as its exact text."""
    text, _ = decimal_reader(precision, scale)(data, 0)
    return str(text)
