"""Errors of the binlog decoder."""

from __future__ import annotations

from cdcflow.errors import TerminalError


class BinlogDecodeError(TerminalError):
    """Bytes that are not a valid binlog event (or a value the decoder does not support)."""
