"""What production binlogs contain besides plain commits: savepoints in transactions that also touch a
MyISAM table (MariaDB then writes rows that a ROLLBACK TO / ROLLBACK undoes), XA PREPARE / COMMIT /
ROLLBACK interleaved with other transactions and across a capture restart. The tables rebuilt from
the events must equal SELECT *, and a restart must not replay what a checkpoint already covered."""

from __future__ import annotations

import collections
from typing import Any

import orjson

from cdcflow.clients.kafka import end_offsets
from cdcflow.clients.kafka.client import consume
from cdcflow.clients.mysql import connect, execute, query
from cdcflow.dev.testing import unique_name
from cdcflow.dev.testing.mysql import CaptureThread, admin_endpoint, position_reached, source_config
from cdcflow.events.transactions import read_transaction_record
from cdcflow.verify.mysql import compare_tables, rebuild, source_rows

TABLES = {"inno": "ENGINE=InnoDB", "myi": "ENGINE=MyISAM", "aria": "ENGINE=Aria"}


def run(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def all_values(bootstrap: str, topics: list[str]) -> list[bytes]:
    out: list[bytes] = []
    for topic in topics:
        expected = sum(end_offsets(bootstrap, topic).values())
        out += [r.value for r in consume(bootstrap, topic, expected=expected, timeout_s=60) if r.value is not None]
    return out


def test_savepoints_mixed_engines_and_xa_are_published_exactly_as_committed(
    mariadb: dict[str, Any], kafka: dict[str, Any]
) -> None:
    bootstrap = kafka["bootstrap_servers"]
    admin = admin_endpoint(mariadb)
    db = unique_name("txns")
    execute(
        admin,
        f"CREATE DATABASE {db}",
        *(f"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v VARCHAR(20)) {engine}" for t, engine in TABLES.items()),
        f"CREATE DATABASE {db}_other",  # not captured
        f"CREATE TABLE {db}_other.t (id INT PRIMARY KEY) ENGINE=InnoDB",
    )
    name = unique_name("txnsrc")
    cfg = source_config(name, [db], output={"transaction_topic": f"{name}-transactions"})
    conn, other, xa = (connect(admin_endpoint(mariadb, database=db), autocommit=True) for _ in range(3))
    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    try:
        # A savepoint in the middle of a transaction that also writes MyISAM: row 2 stays in the binlog group,
        # followed by ROLLBACK TO `s1`; rows after it (3, the update of 1) are committed.
        run(conn, "BEGIN", "INSERT INTO inno VALUES (1, 'a')", "INSERT INTO myi VALUES (1, 'a')", "SAVEPOINT s1",
            "INSERT INTO inno VALUES (2, 'rolled back')", "UPDATE inno SET v = 'rolled back' WHERE id = 1",
            "INSERT INTO myi VALUES (2, 'kept')", "SAVEPOINT s2", "INSERT INTO aria VALUES (1, 'kept')",
            "INSERT INTO inno VALUES (4, 'rolled back')", "ROLLBACK TO s1", "INSERT INTO inno VALUES (3, 'after')",
            "UPDATE inno SET v = 'committed' WHERE id = 1", "COMMIT")  # fmt: skip
        # The savepoint as the first statement: MariaDB writes the undone row as its own group ending in ROLLBACK.
        run(conn, "BEGIN", "SAVEPOINT s1", "INSERT INTO inno VALUES (10, 'rolled back')",
            "INSERT INTO myi VALUES (10, 'kept')", "ROLLBACK TO s1", "INSERT INTO inno VALUES (11, 'after')",
            "COMMIT")  # fmt: skip
        # Savepoints in plain InnoDB transactions, a full rollback of a mixed one, RELEASE SAVEPOINT.
        run(conn, "BEGIN", "INSERT INTO inno VALUES (20, 'a')", "SAVEPOINT s1", "DELETE FROM inno WHERE id = 3",
            "ROLLBACK TO s1", "SAVEPOINT s3", "UPDATE inno SET v = 'kept' WHERE id = 20", "RELEASE SAVEPOINT s3",
            "COMMIT")  # fmt: skip
        run(conn, "BEGIN", "INSERT INTO inno VALUES (30, 'rolled back')", "INSERT INTO myi VALUES (30, 'kept')",
            "DELETE FROM inno WHERE id = 11", "ROLLBACK")  # fmt: skip
        # XA: committed and rolled back, each with an ordinary transaction between PREPARE and the outcome.
        run(xa, f"XA START '{db}-x1'", "INSERT INTO inno VALUES (40, 'xa')", "UPDATE inno SET v = 'xa' WHERE id = 20",
            f"XA END '{db}-x1'", f"XA PREPARE '{db}-x1'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (41, 'between')")
        run(xa, f"XA COMMIT '{db}-x1'")
        run(xa, f"XA START '{db}-x2'", "INSERT INTO inno VALUES (42, 'xa rolled back')",
            "DELETE FROM inno WHERE id = 41", f"XA END '{db}-x2'", f"XA PREPARE '{db}-x2'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (43, 'between')")
        run(xa, f"XA ROLLBACK '{db}-x2'")
        # XA transactions of tables the capture does not read are none of its business (nor of its counters):
        # other applications' XA on the same server come and go while it runs.
        foreign = connect(admin_endpoint(mariadb), autocommit=True)
        for n, outcome in ((1, "COMMIT"), (2, "ROLLBACK")):
            run(foreign, f"XA START '{db}-other{n}'", f"INSERT INTO {db}_other.t VALUES ({n})",
                f"XA END '{db}-other{n}'", f"XA PREPARE '{db}-other{n}'", f"XA {outcome} '{db}-other{n}'")  # fmt: skip
        run(foreign, f"XA START '{db}-other3'", f"INSERT INTO {db}_other.t VALUES (3)", f"XA END '{db}-other3'",
            f"XA PREPARE '{db}-other3'")  # fmt: skip
        foreign.close()  # (a prepared XA transaction outlives its connection)
        # Prepared before a restart, committed after it: the checkpoint passes the PREPARE.
        run(xa, f"XA START '{db}-x3'", "INSERT INTO inno VALUES (50, 'prepared')", "DELETE FROM inno WHERE id = 43",
            f"XA END '{db}-x3'", f"XA PREPARE '{db}-x3'")  # fmt: skip
        run(other, "INSERT INTO inno VALUES (51, 'after prepare')")
        (gtid_pos,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
        capture.wait_for_checkpoint(gtid_pos)
    finally:
        first = capture.stop()
    # past the prepared XA
    assert first.checkpoint is not None and position_reached(first.checkpoint.gtid_state, gtid_pos)
    assert first.xa_waiting == 1 and first.xa_committed == 1 and first.xa_rolled_back == 1
    assert first.rolled_back_groups >= 1 and first.rolled_back_rows >= 5, first
    topics = [f"{cfg.topic_prefix}.{db}.{t}" for t in TABLES]
    before_restart = sum(sum(end_offsets(bootstrap, t).values()) for t in topics)

    capture = CaptureThread(cfg, mariadb, bootstrap).start()
    try:
        run(xa, f"XA COMMIT '{db}-x3'")
        run(other, f"XA COMMIT '{db}-other3'")  # prepared before the restart, of a table not captured
        run(other, "UPDATE inno SET v = 'last' WHERE id = 50")
        (gtid_pos,) = query(admin, "SELECT @@gtid_binlog_pos")[0]
        capture.wait_for_checkpoint(gtid_pos)
    finally:
        second = capture.stop()
        for c in (conn, other, xa):
            c.close()
    assert second.xa_committed == 1 and second.xa_waiting == 0 and second.xa_unknown == 0
    assert second.events == 3  # x3's two rows and the update: nothing from before the restart again

    values = all_values(bootstrap, topics)
    assert len(values) == before_restart + 3
    rebuilt, malformed = rebuild(values)
    assert malformed == 0
    for table in TABLES:
        report = compare_tables(source_rows(admin, db, table), rebuilt.get((db, table), {}))
        assert report.clean, f"{table}: {report.summary()}\n" + "\n".join(report.examples)
    events = [orjson.loads(v) for v in values]
    positions = collections.Counter(
        (e["source"]["table"], orjson.dumps(e["key"]), tuple(e["source"]["pos"])) for e in events
    )
    assert max(positions.values()) == 1, "an event was published twice"
    assert not any((e.get("after") or {}).get("v") == "rolled back" for e in events)
    assert not any((e.get("after") or {}).get("v") == "xa rolled back" for e in events)
    # One transaction record per transaction that published changes, counting them per table: what a reader needs
    # to know it has a transaction whole (savepoint rollbacks not counted; XA under its prepare's position).
    published = collections.Counter((e["source"]["pos"][0], f"{db}.{e['source']['table']}") for e in events)
    transactions_topic = f"{name}-transactions"
    ends = [read_transaction_record(r.value or b"") for r in consume(
        bootstrap, transactions_topic, expected=sum(end_offsets(bootstrap, transactions_topic).values()))]  # fmt: skip
    counted = collections.Counter({(end.seq, table): n for end in ends for table, n in end.counts.items()})
    assert counted == published
    assert len({end.seq for end in ends}) == len(ends), "a transaction record was written twice"
    assert all(end.source == cfg.name and end.id.startswith("0-") for end in ends)
    assert second.transaction_records == 2  # x3 (prepared before the restart) and the update after it
    # XA-topic records of completed transactions are deleted once a checkpoint past them is stored.
    xa_records = consume(bootstrap, cfg.xa_topic, expected=sum(end_offsets(bootstrap, cfg.xa_topic).values()))
    live: dict[bytes, bool] = {}
    for r in xa_records:
        live[r.key or b""] = r.value is not None
    assert xa_records and not any(live.values()), "held XA rows left in the XA topic"
