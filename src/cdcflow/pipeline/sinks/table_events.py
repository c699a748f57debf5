"""Events about whole tables (op t: a MySQL table emptied by TRUNCATE, DROP, RENAME or a new key), as the
sinks that keep current state take them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# The truncate causes a sink's `on_drop: keep` leaves alone: the source table is gone, not emptied in place.
DROP_CAUSES = ("drop", "rename")


def under_policy(events: DataFrame, on_drop: str) -> DataFrame:
    """A batch's events less the op t events `on_drop` says to ignore (a filter in the batch's one pass)."""
    if on_drop == "empty":
        return events
    gone = (F.col("op") == "t") & F.coalesce(F.col("truncate.cause").isin(*DROP_CAUSES), F.lit(False))
    return events.where(~gone)
