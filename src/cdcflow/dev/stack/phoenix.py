"""Apache Phoenix on the local HBase, and the jars cdcflow's JVMs need to reach it.

Phoenix has no process of its own here: its server side runs inside the HBase JVM (HBaseService
always puts it on the classpath), and clients use Phoenix's thick JDBC driver inside their own
JVM: the Spark pipeline's, or a small Py4J JVM for `cdcflow verify` and table checks. Why not a
query server (docs/decisions/0004-phoenix-through-jdbc.md): the only released Phoenix Query
Server works with Phoenix 5.1 only, and Avatica's wire format cuts TIMESTAMPs to milliseconds.

`cdcflow stack up phoenix` therefore starts HBase (if needed), makes sure the client jars and
cdcflow's small JVM helper jar (a Spark JDBC dialect that writes UPSERT, and a bulk row reader)
are built, and connects once, which creates Phoenix's SYSTEM tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdcflow.dev.stack.service import Service
from cdcflow.errors import StackError
from cdcflow.jars import phoenix as phoenix_jars
from cdcflow.jars import versions


def check(url: str) -> str:
    """Connect once (creating Phoenix's SYSTEM tables on first use) and count the user tables."""
    from cdcflow.clients.phoenix import PhoenixJvm  # starts a JVM: only when checked

    with PhoenixJvm.launch(url) as phoenix:
        rows = phoenix.query(
            "SELECT COUNT(DISTINCT TABLE_SCHEM || '.' || TABLE_NAME) FROM SYSTEM.CATALOG WHERE TABLE_TYPE = 'u'"
        )
    return f"Phoenix {versions.PHOENIX_VERSION} answers; {rows[0][0]} table(s)"


class PhoenixService(Service):
    """Phoenix as a stack component: no process of its own; it lives in the HBase JVM."""

    name = "phoenix"
    port_names = ()
    runs_in = "hbase"
    # The first connection creates Phoenix's SYSTEM tables (about 20 s on the reference machine).
    start_timeout_s = 180.0

    def install(self) -> None:
        phoenix_jars.client_jars()
        phoenix_jars.helper_jar()

    def start(self, home: Path, ports: dict[str, int], log: Path) -> tuple[int, dict[str, Any]]:
        raise StackError("phoenix runs inside HBase; the stack manager starts HBase instead")

    def endpoints_in(self, host: dict[str, Any]) -> dict[str, Any]:
        if "phoenix_server" not in host:
            raise StackError(
                "this HBase was started without Phoenix's server jars (an older stack); "
                "restart it: cdcflow stack down hbase && cdcflow stack up phoenix"
            )
        return {"jdbc_url": phoenix_jars.jdbc_url(host["zk_quorum"], host.get("znode_parent", "/hbase")),
                "version": versions.PHOENIX_VERSION}  # fmt: skip

    def check(self, endpoints: dict[str, Any]) -> str:
        return check(str(endpoints["jdbc_url"]))
