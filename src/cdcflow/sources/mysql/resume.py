"""Where a MySQL capture starts: its stored checkpoint, checked against the server's binlog history, or
(no checkpoint yet) the position `mysql.start` names."""

from __future__ import annotations

from cdcflow.clients.kafka import KafkaEndpoint, read_latest
from cdcflow.clients.mysql import MySqlEndpoint, query
from cdcflow.config import MySqlSourceConfig
from cdcflow.errors import TerminalError
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.gtid_state import history_behind
from cdcflow.sources.mysql.preflight import ServerInfo


class BinlogHistoryChanged(TerminalError):
    """The server's binlog is not the history the checkpoint was taken from."""


def load_checkpoint(bootstrap: KafkaEndpoint, cfg: MySqlSourceConfig) -> Checkpoint | None:
    raw = read_latest(bootstrap, cfg.offsets_topic, cfg.name.encode())
    return Checkpoint.from_bytes(raw) if raw else None


def initial_checkpoint(cfg: MySqlSourceConfig, server: ServerInfo) -> Checkpoint:
    if server.mysql:  # MySQL: the transactions to skip; `earliest` = those whose binlogs are gone
        state = server.gtid_purged if cfg.start == "earliest" else server.gtid_executed
        return Checkpoint(gtid_state=str(GtidSet.parse(state)), file="", pos=4, server_id=server.server_id)
    if cfg.start == "earliest":
        return Checkpoint(gtid_state="", file="", pos=4)
    return Checkpoint(gtid_state=server.gtid_binlog_pos, file="", pos=4)


def check_history(cfg: MySqlSourceConfig, ep: MySqlEndpoint, server: ServerInfo, checkpoint: Checkpoint) -> None:
    """Refuse to resume on a binlog history other than the checkpoint's: positions would go backwards
    and every sink would ignore the changes that follow."""
    if server.mysql:
        problems = _mysql_history_problems(checkpoint.gtid_state or "", server)
    else:
        problems = history_behind(checkpoint.gtid_state or "", server.gtid_binlog_pos)
    if not problems and server.mariadb and checkpoint.file and checkpoint.server_id == server.server_id:
        # The same server: its binlog at the checkpoint's file/position must be where the checkpoint says.
        rows = query(ep, "SELECT BINLOG_GTID_POS(%s, %s)", (checkpoint.file, checkpoint.pos))
        there = rows[0][0] if rows else None
        if there is not None and there != "" and there != checkpoint.gtid_state:
            problems.append(f"{checkpoint.file}:{checkpoint.pos} is at GTID {there} on the server, "
                            f"not at the checkpoint's {checkpoint.gtid_state}")  # fmt: skip
    if problems:
        raise BinlogHistoryChanged(
            f"MySQL source {cfg.name}: the server's binlog history is not the one this capture's checkpoint "
            f"came from ({'; '.join(problems)}). Resuming would publish positions that go backwards. If the "
            f"history was reset on purpose, delete the checkpoint (key {cfg.name!r} in "
            f"{cfg.offsets_topic}) and start again, rebuilding the sinks."
        )


def _mysql_history_problems(checkpoint_state: str, server: ServerInfo) -> list[str]:
    """MySQL: the server must hold every transaction the checkpoint passed (else its history is another one),
    and still have the binlogs of every transaction the checkpoint did not pass (else they are lost)."""
    ours, executed = GtidSet.parse(checkpoint_state), GtidSet.parse(server.gtid_executed)
    purged = GtidSet.parse(server.gtid_purged)
    problems = []
    if not ours.issubset(executed):
        problems.append(f"the checkpoint passed {ours}, the server has executed only {executed}")
    if not purged.issubset(ours):
        problems.append(f"the server purged the binlogs of {purged}, some of which the capture never read "
                        f"(it passed {ours})")  # fmt: skip
    return problems
