"""MariaDB's GTID state as text ("0-1-100,1-2-30": the last GTID per replication domain), as checkpoints and
the server's gtid_binlog_pos hold it. Pure."""

from __future__ import annotations

from cdcflow.errors import TerminalError


def parse_gtid_state(text: str) -> dict[int, str]:
    """MariaDB's gtid_binlog_pos text ("0-1-100,1-2-30") → {domain: GTID}."""
    state = {}
    for gtid in filter(None, (g.strip() for g in text.split(","))):
        parts = gtid.split("-")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise TerminalError(f"bad MariaDB GTID {gtid!r} in checkpoint")
        state[int(parts[0])] = gtid
    return state


def format_gtid_state(state: dict[int, str]) -> str:
    return ",".join(state[d] for d in sorted(state))


def history_behind(checkpoint_state: str, server_state: str) -> list[str]:
    """Domains where the server's binlog is behind the checkpoint: its history is not the one the checkpoint
    came from (RESET MASTER, or a failover to a server that lacks transactions the capture published)."""
    ours, theirs = parse_gtid_state(checkpoint_state), parse_gtid_state(server_state)
    problems = []
    for domain, gtid in sorted(ours.items()):
        seq = int(gtid.rsplit("-", 1)[1])
        server = theirs.get(domain)
        if server is None:
            problems.append(f"domain {domain}: the checkpoint is at {gtid}, the server's binlog has no such domain")
        elif int(server.rsplit("-", 1)[1]) < seq:
            problems.append(f"domain {domain}: the checkpoint is at {gtid}, the server's binlog ends at {server}")
    return problems
