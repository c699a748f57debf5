"""`cdcflow mysql offsets show | set | reset`: a stopped capture's checkpoint, read and changed by hand
the way Kafka Connect's KIP-875 manages a connector's offsets.

A checkpoint names where the capture resumes: the GTID state (MariaDB: the last GTID per domain;
MySQL: the executed GTID set) after which it reads. `set` writes a new one (from a GTID state, or
from a binlog file and position translated into the GTID state there), `reset` deletes it (the next
start begins at `mysql.start`). A running capture would overwrite either at its next checkpoint, so
both are refused while the server lists a replica with the capture's `server_id`.

Moving back replays changes the sinks have: their position guard ignores what they already hold.
Moving forward skips changes: the sinks never see them (say so, and do it on purpose only).
"""

from __future__ import annotations

from cdcflow.clients.kafka import KafkaEndpoint, create_store_topic, produce_sync, read_latest
from cdcflow.clients.mysql import AccessDenied, MySqlEndpoint, query
from cdcflow.errors import ConfigError, TerminalError
from cdcflow.sources.mysql.binlog.gtid_set import GtidSet
from cdcflow.sources.mysql.checkpoint import Checkpoint
from cdcflow.sources.mysql.gtid_state import parse_gtid_state

_INSIDE_A_GROUP = ("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT", "XA START", "XA END")


class CaptureRunning(ConfigError):
    """The capture whose checkpoint would change is connected to the server."""


def is_mariadb(ep: MySqlEndpoint) -> bool:
    return "mariadb" in str(query(ep, "SELECT @@version")[0][0]).lower()


def running_capture(ep: MySqlEndpoint, server_id: int) -> str | None:
    """The server's description of a connected replica with this `server_id`, if any (cdcflow registers
    with COM_REGISTER_SLAVE, so a running capture is listed). MariaDB shows its replicas only to users
    with REPLICATION MASTER ADMIN; without it, any binlog dump of this user counts (its own connections
    are always visible to it), which errs on the side of refusing."""
    statement = "SHOW SLAVE HOSTS" if is_mariadb(ep) else "SHOW REPLICAS"
    try:
        rows = query(ep, statement)
    except AccessDenied:
        dumps = query(ep, "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%' "
                          "AND USER = CURRENT_USER()")  # fmt: skip
        dumps = dumps or query(ep, "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE COMMAND LIKE "
                                   "'Binlog Dump%%' AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")  # fmt: skip
        return f"a binlog dump of user {ep.user} (connection {dumps[0][0]} from {dumps[0][1]})" if dumps else None
    for row in rows:
        if int(row[0]) == server_id:
            return f"server_id {row[0]} from {row[1] or '?'}"
    return None


def refuse_if_running(ep: MySqlEndpoint, server_id: int, name: str) -> None:
    found = running_capture(ep, server_id)
    if found is not None:
        raise CaptureRunning(f"MySQL source {name} is running (the server lists a replica with {found}): "
                             "stop `cdcflow mysql run` first; it would overwrite the checkpoint at its next "
                             "commit. (A capture stopped a moment ago is listed until the server notices, within a "
                             "few seconds.)")  # fmt: skip


def normalized_state(ep: MySqlEndpoint, state: str) -> str:
    """A GTID state as the capture writes it, checked against the server's kind."""
    try:
        if is_mariadb(ep):
            parse_gtid_state(state)
            return ",".join(g.strip() for g in state.split(",") if g.strip())
        return str(GtidSet.parse(state))
    except (ValueError, TerminalError) as exc:  # TerminalError: the MariaDB parser's
        raise ConfigError(f"not a GTID state for this server: {state!r} ({exc})") from exc


def state_at(ep: MySqlEndpoint, file: str, position: int) -> str:
    """The GTID state after the transaction that ends at `file:position` (refused if none ends there)."""
    if is_mariadb(ep):
        rows = query(ep, "SELECT BINLOG_GTID_POS(%s, %s)", (file, position))
        found = rows[0][0] if rows else None
        if found is None:
            raise ConfigError(f"{file}:{position} is not where a transaction ends in the server's binlog")
        return str(found)
    executed, ends = GtidSet(), {4}
    try:
        events = query(ep, f"SHOW BINLOG EVENTS IN '{file.replace(chr(39), '')}'")
    except Exception as exc:
        raise ConfigError(f"binlog file {file!r}: {exc}") from exc
    for _file, _start, kind, _server, end, info in events:
        if int(end) > position:
            break
        if kind == "Previous_gtids":
            executed = GtidSet.parse(str(info))
        elif kind == "Gtid":
            sid, gno = str(info).split("'")[1].split(":")
            executed = executed.add(sid, int(gno))
        elif kind in ("Xid", "XA_prepare") or (kind == "Query" and not str(info).upper().startswith(_INSIDE_A_GROUP)):
            ends.add(int(end))
    if position not in ends:
        raise ConfigError(f"{file}:{position} is not where a transaction ends in the server's binlog")
    return str(executed)


def show(kafka: KafkaEndpoint, offsets_topic: str, name: str) -> Checkpoint | None:
    raw = read_latest(kafka, offsets_topic, name.encode())
    return Checkpoint.from_bytes(raw) if raw else None


def set_checkpoint(kafka: KafkaEndpoint, offsets_topic: str, name: str, state: str, force: bool = False,
                   file: str = "", pos: int = 4) -> Checkpoint:  # fmt: skip
    """Store a checkpoint at `state`. Snapshot progress is kept; prepared XA transactions are not (their
    PREPARE may lie on either side of the new position), so a checkpoint holding some needs `force`."""
    current = show(kafka, offsets_topic, name)
    if current is not None and current.xa_prepared and not force:
        raise ConfigError(f"the checkpoint of {name} holds prepared XA transactions ({', '.join(current.xa_prepared)}) "
                          "whose rows wait in the XA topic; moving it may lose their rows if their XA PREPARE lies "
                          "before the new position and their XA COMMIT after it. Wait until they complete, or "
                          "pass --force")  # fmt: skip
    checkpoint = Checkpoint(gtid_state=state, file=file, pos=pos,
                            snapshot=dict(current.snapshot) if current else {})  # fmt: skip
    create_store_topic(kafka, offsets_topic, compact=True)
    produce_sync(kafka, offsets_topic, [(name.encode(), checkpoint.to_bytes())])
    return checkpoint


def reset(kafka: KafkaEndpoint, offsets_topic: str, name: str) -> None:
    """Delete the checkpoint: the next start begins at `mysql.start` (latest or earliest)."""
    produce_sync(kafka, offsets_topic, [(name.encode(), None)])
