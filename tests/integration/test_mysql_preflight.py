"""`preflight` refuses a server whose binlog would make capture wrong, naming every problem at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.mysql import BinlogStream, MySqlEndpoint, StreamStart, execute
from cdcflow.dev.testing.mysql import admin_endpoint, private_server, repl_endpoint
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.sources.mysql.preflight import preflight


def test_preflight_accepts_the_stack_and_refuses_bad_settings(mariadb: dict[str, Any], tmp_path: Path) -> None:
    info = preflight(repl_endpoint(mariadb), replica_server_id=6401)
    assert info.mariadb and info.collations[45] == "utf8mb4" and info.server_id == 1
    with pytest.raises(ConfigError, match="equals the server's own server_id"):
        preflight(repl_endpoint(mariadb), replica_server_id=1)
    # binlog_row_metadata and binlog_row_image are dynamic: flip them, on a server of this test's own (on the
    # shared one, another lane's capture would read events written meanwhile without column names)
    with private_server(tmp_path, "mariadb") as own:
        execute(admin_endpoint(own), "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
                "SET GLOBAL binlog_row_image = 'NOBLOB'")  # fmt: skip
        with pytest.raises(ConfigError) as err:
            preflight(repl_endpoint(own), replica_server_id=6401)
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
