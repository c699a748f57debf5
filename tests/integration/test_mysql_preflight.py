"""`preflight` refuses a server whose binlog would make capture wrong, naming every problem at once."""

from __future__ import annotations

from typing import Any

import pytest

from cdcflow.clients.mysql import BinlogStream, MySqlEndpoint, StreamStart, execute
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.sources.mysql.preflight import preflight
from cdcflow.testing.mysql import admin_endpoint, repl_endpoint


def test_preflight_accepts_the_stack_and_refuses_bad_settings(mariadb: dict[str, Any]) -> None:
    admin = admin_endpoint(mariadb)
    info = preflight(repl_endpoint(mariadb), replica_server_id=6401)
    assert info.mariadb and info.collations[45] == "utf8mb4" and info.server_id == 1
    with pytest.raises(ConfigError, match="equals the server's own server_id"):
        preflight(repl_endpoint(mariadb), replica_server_id=1)
    # binlog_row_metadata and binlog_row_image are dynamic: flip them for a moment (restored below)
    execute(admin, "SET GLOBAL binlog_row_metadata = 'MINIMAL'", "SET GLOBAL binlog_row_image = 'NOBLOB'")
    try:
        with pytest.raises(ConfigError) as err:
            preflight(repl_endpoint(mariadb), replica_server_id=6401)
    finally:
        execute(admin, "SET GLOBAL binlog_row_metadata = 'FULL'", "SET GLOBAL binlog_row_image = 'FULL'")
    text = str(err.value)
    assert "binlog_row_metadata=MINIMAL, needs binlog_row_metadata=FULL" in text
    assert "binlog_row_image=NOBLOB, needs binlog_row_image=FULL" in text


def test_wrong_password_and_unknown_position_are_terminal(mariadb: dict[str, Any]) -> None:
    bad = MySqlEndpoint(mariadb["host"], mariadb["port"], mariadb["repl_user"], "wrong")
    with pytest.raises(TerminalError):
        BinlogStream(bad, server_id=6402).open(StreamStart(gtid_state=""))
    stream = BinlogStream(repl_endpoint(mariadb), server_id=6403)
    stream.open(StreamStart(gtid_state="0-1-999999999"))  # a GTID the server never wrote
    with pytest.raises(TerminalError, match="not available"):
        stream.read()
