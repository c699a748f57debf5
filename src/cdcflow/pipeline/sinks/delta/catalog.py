"""A Delta sink's tables by name in the Spark session's catalog (decision 0014, "Names").

For every source table: a view `<prefix><db>.<table>` (the current view, `views.view_sql`), its
state table `<prefix><db>.<table>_state` (an external Delta table at the state path), and for a table that keeps
history, `<prefix><db>.<table>_history` (`history.reads.history_sql`). Spark's own
catalog keeps them for the session; a Hive metastore (`spark.sql.catalogImplementation: hive`) or a
catalog the user configured as `spark_catalog` keeps them for every job that uses it.

The view's SQL names the version its table is folded to, so it is replaced after every fold. It
carries the state path as a property: a name some other table or view holds (the user's, another
sink's, another source with the same db.table) is left alone, with a warning.
"""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from cdcflow.errors import ConfigError
from cdcflow.pipeline.sinks.delta.history.reads import history_sql
from cdcflow.pipeline.sinks.delta.sql import delta_path, quoted, sql_string
from cdcflow.pipeline.sinks.delta.views import view_sql

log = logging.getLogger(__name__)

STATE_PATH_PROPERTY = "cdcflow.state_path"
STATE_SUFFIX = "_state"
HISTORY_SUFFIX = "_history"


def names(prefix: str, db: str, table: str) -> tuple[str, str]:
    """(view, state table) as quoted identifiers."""
    database = quoted(prefix + db)
    return f"{database}.{quoted(table)}", f"{database}.{quoted(table + STATE_SUFFIX)}"


def register(spark: SparkSession, state_path: str, prefix: str, db: str, table: str, known: bool = False) -> bool:
    """Create or refresh the view and the state table's name; False when a name belongs to
    something else (logged). `known`: this process registered both names before (only the view's
    text is replaced)."""
    view, state = names(prefix, db, table)
    if known:
        _replace_view(spark, view, state_path)
        return True
    if not spark.catalog.databaseExists(prefix + db):
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {quoted(prefix + db)}")
    if DeltaTable.isDeltaTable(spark, state_path):
        if not spark.catalog.tableExists(state):
            spark.sql(f"CREATE TABLE IF NOT EXISTS {state} USING delta LOCATION {sql_string(state_path)}")
        elif not _same_location(spark, state, state_path):
            log.warning("%s already names another table; %s is not registered under it", state, state_path)
            return False
    if _held_by_another(spark, view, state_path, "the current view"):
        return False
    _replace_view(spark, view, state_path)
    return True


def register_history(spark: SparkSession, state_path: str, prefix: str, db: str, table: str) -> bool:
    """Create or refresh the history view `<prefix><db>.<table>_history` (`history.reads.history_sql`); False when
    the name belongs to something else (logged)."""
    name = f"{quoted(prefix + db)}.{quoted(table + HISTORY_SUFFIX)}"
    if _held_by_another(spark, name, state_path, "the history"):
        return False
    _replace_view(spark, name, state_path, history_sql(spark, state_path))
    return True


def _held_by_another(spark: SparkSession, name: str, state_path: str, what: str) -> bool:
    """Whether `name` is taken by something other than this state path's view (logged: it is left alone)."""
    if not spark.catalog.tableExists(name):
        return False
    owner = _property(spark, name, STATE_PATH_PROPERTY)
    if owner == state_path:
        return False
    log.warning("%s already names %s; %s of %s is not registered under it", name,
                owner or "a table or view cdcflow did not create", what, state_path)  # fmt: skip
    return True


def state_path_of(spark: SparkSession, name: str) -> str:
    """The state path behind a name the sink registered (the current view `db.table`, its `_state` table or its
    `_history` view)."""
    path = _property(spark, name, STATE_PATH_PROPERTY) if spark.catalog.tableExists(name) else None
    if path is None and name.endswith(STATE_SUFFIX) and spark.catalog.tableExists(name):
        row = spark.sql(f"DESCRIBE DETAIL {name}").first()
        path = str(row["location"]) if row else None
    if path is None:
        raise ConfigError(f"{name}: not a table a cdcflow Delta sink registered (give the state table's path)")
    return path


def _replace_view(spark: SparkSession, view: str, state_path: str, query: str | None = None) -> None:
    """The view `view` of `state_path` as `query` (None: its current view), owned by the path (a property)."""
    spark.sql(
        f"CREATE OR REPLACE VIEW {view} TBLPROPERTIES ({sql_string(STATE_PATH_PROPERTY)} = {sql_string(state_path)}) "
        f"AS {query if query is not None else view_sql(spark, state_path)}"
    )


def _property(spark: SparkSession, name: str, key: str) -> str | None:
    for row in spark.sql(f"SHOW TBLPROPERTIES {name}").collect():
        if row["key"] == key:
            return str(row["value"])
    return None


def _same_location(spark: SparkSession, name: str, path: str) -> bool:
    def location(table: str) -> str:
        row = spark.sql(f"DESCRIBE DETAIL {table}").first()
        return str(row["location"]).rstrip("/") if row else ""

    try:
        return location(name) == location(delta_path(path))
    except Exception:  # not a Delta table: not ours
        return False
