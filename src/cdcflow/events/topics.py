"""Where a table's change events go by default: one rule for every source."""

from __future__ import annotations

import re

# Kafka topic names allow ASCII letters, digits, '.', '_' and '-'.
_UNSAFE = re.compile(r"[^A-Za-z0-9._\-]")


def change_topic(prefix: str, db: str, table: str) -> str:
    """`<prefix>.<db>.<table>` (HBase: namespace as db), characters Kafka refuses replaced by `_`."""
    return _UNSAFE.sub("_", f"{prefix}.{db}.{table}")
