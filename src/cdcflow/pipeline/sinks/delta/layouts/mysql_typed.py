"""MySQL-sourced state tables, typed (the default): the source's columns with their types (`mysql_types.py`)
plus cdcflow's position columns, shaped after the capture's schema history; the table follows the source's
DDL (columns added, types widened, or the table rewritten for a drop, a rename or a narrowing)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdcflow.errors import ConfigError, TerminalError
from cdcflow.pipeline import metrics
from cdcflow.pipeline.sinks.delta.layouts import mysql_types as mt
from cdcflow.pipeline.sinks.delta.layouts.base import FoldJob
from cdcflow.pipeline.sinks.delta.layouts.mysql import MySqlRows, first_fold
from cdcflow.pipeline.sinks.delta.records import FoldRecord
from cdcflow.pipeline.sinks.delta.sql import quoted, steps
from cdcflow.pipeline.sinks.delta.tables import ensure_table, merge_guarded
from cdcflow.pipeline.sinks.mysql_history import MySqlColumn

log = logging.getLogger(__name__)

# Change Data Feed for downstream readers, type widening for MODIFY COLUMN.
TYPED_TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableTypeWidening": "true"}
# Raised inside the MERGE by a row that does not fit the table's known shape.
UNFIT_MARK = "cdcflow: the row does not fit the typed table's known shape"


class MySqlTyped(MySqlRows):
    def _merge(self, job: FoldJob, latest: DataFrame) -> None:
        """The MERGE checks inside its own pass that every value fits the table's known shape (UNFIT_MARK raised
        from the source rows; a failed MERGE commits nothing). Only a batch that does not fit pays for the
        separate check: the schema history is read again, the table evolved, or the batch refused with the
        columns and values named."""
        try:
            merge_guarded(job.sink, job.path, self._merge_of(job, latest, checked=False))
        except Exception as exc:
            if UNFIT_MARK not in str(exc):
                raise
            r = job.record
            log.info("sink %s: %s: the batch holds columns or values the known shape of %s/%s.%s does not fit; "
                     "checking it against the schema history", job.sink, job.path, r.source, r.db, r.table)  # fmt: skip
            metrics.DELTA_SHAPE_CHECKS.labels(job.sink).inc()
            merge_guarded(job.sink, job.path, self._merge_of(job, latest, checked=True))

    def _merge_of(self, job: FoldJob, batch: DataFrame, checked: bool) -> Callable[[], None]:
        """Convert the batch to the table's columns (the newest shape in the schema history), evolve the table
        (new columns, widened types), and return the guarded MERGE.

        Unchecked, with the shape known so far, the MERGE itself fails with UNFIT_MARK on a row that carries a
        column the shape lacks or a value that does not convert. Checked, a job of its own looks first, and the
        schema history is read again when the events do not fit."""
        spark, path, r = job.spark, job.path, job.record
        label = f"{r.source}/{r.db}.{r.table}"
        key_text = job.history is not None  # the history (format 2) groups a row's versions by the log's key
        if checked:
            columns, rows = self._fitting_shape(job, batch, key_text)
        else:
            columns = job.shapes.mysql_columns(r.source, r.db, r.table, refresh=False)
            rows = mt.typed_rows(batch, columns, key_text)
            # In the column every MERGE clause reads for every source row (the guard; inserted), so a row that
            # does not fit fails the MERGE before it commits.
            known = F.array(*(F.lit(c.name) for c in columns))
            unfit = (F.size("_misfits") > 0) | (F.size(F.array_except("_event_columns", known)) > 0)
            rows = rows.withColumn(mt.POS, F.when(unfit, F.raise_error(F.lit(UNFIT_MARK))).otherwise(F.col(mt.POS)))
        keys = mt.key_columns(columns)
        if not keys:
            raise ConfigError(
                f"sink {job.sink}: MySQL table {label} has no primary key in its schema history: a typed Delta "
                "table needs one to match rows; set mysql_layout: json for this sink (or map the table elsewhere)"
            )
        schema = mt.table_schema(columns)
        if key_text:
            schema = StructType([*schema.fields, mt.HIDDEN_FIELDS[0]])
        fresh = not DeltaTable.isDeltaTable(spark, path)
        target = ensure_table(spark, path, schema, {**TYPED_TABLE_PROPERTIES, **job.state_properties()})
        if fresh:
            first = rows.drop("_misfits", "_event_columns")
            return lambda: first_fold(first, path, mt.DELETED)
        current = target.toDF().schema
        if mt.POS not in current.fieldNames():
            raise ConfigError(
                f"sink {job.sink}: {path} holds {label} in the JSON layout (key, after); set mysql_layout: json "
                "for this sink, or move the table away so the typed one is built from the topics"
            )
        hidden = self._evolve(job, current, schema, label)
        rows = rows.drop("_misfits", "_event_columns")
        for name in sorted(hidden - set(rows.columns)):  # (UPDATE SET * sets every column: null, not kept)
            rows = rows.withColumn(name, F.lit(None).cast("string"))
        source_rows = job.hooks.merge_source(path, rows)
        on = " AND ".join(f"t.{quoted(k)} <=> s.{quoted(k)}" for k in keys)

        def merge() -> None:
            # The position guard is inside the MERGE, so Delta's conflict detection covers it.
            (
                DeltaTable.forPath(spark, path).alias("t")
                .merge(source_rows.alias("s"), on)
                .whenMatchedDelete(condition=f"s.{mt.DELETED} AND s.{mt.POS} > t.{mt.POS}")
                .whenMatchedUpdateAll(condition=f"s.{mt.POS} > t.{mt.POS}")
                .whenNotMatchedInsertAll(condition=f"NOT s.{mt.DELETED}")
                .execute()
            )  # fmt: skip

        return merge

    def _evolve(self, job: FoldJob, current: StructType, schema: StructType, label: str) -> set[str]:
        """The table brought to the source's shape: rewritten for dropped columns or types Delta cannot widen in
        place, then new columns added where MySQL has them and types widened. Returns the hidden columns
        (`mt.HIDDEN`) the table has then."""
        spark, path = job.spark, job.path
        widen, refuse = mt.type_changes(current, schema)
        shape_names = {f.name.lower() for f in (*schema.fields, *mt.META_FIELDS, *mt.HIDDEN_FIELDS)}
        dropped = [f.name for f in current.fields if f.name.lower() not in shape_names]
        if refuse or dropped:
            self._reshape(job, schema, {c.split(": ", 1)[0].lower() for c in refuse}, dropped, label)
            current = DeltaTable.forPath(spark, path).toDF().schema
            widen = []
        have = {n.lower() for n in current.fieldNames()}
        previous = None
        for field in schema.fields:  # columns added in MySQL, placed where MySQL has them
            if field.name.lower() not in have:
                where = f"AFTER {quoted(previous)}" if previous else "FIRST"
                log.info("sink %s: %s: adding column %s %s", job.sink, path, field.name, field.dataType.simpleString())
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({quoted(field.name)} "
                          f"{field.dataType.simpleString()} {where})")  # fmt: skip
            previous = field.name
        for change in widen:
            column, wanted = change.split(": ", 1)[0], schema[change.split(": ", 1)[0]].dataType.simpleString()
            log.info("sink %s: %s: widening column %s", job.sink, path, change)
            spark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN {quoted(column)} TYPE {wanted}")
        return {n for n in (*current.fieldNames(), *schema.fieldNames()) if n in mt.HIDDEN}

    def _reshape(self, job: FoldJob, schema: StructType, retyped: set[str], dropped: list[str], label: str) -> None:
        """The source dropped or renamed columns, or changed a type in a way Delta cannot widen in place: the table
        is rewritten in the source's shape (one overwrite; a DDL like this rewrites the MySQL table too). A retyped
        column starts empty: the capture reads the table again after such a DDL (mysql.snapshot.on_ddl), and those
        rows, newer than every stored one, fill it.

        A table whose history keeps its open versions in the state (format 2, `history/append.py`) keeps each
        row's image from before the rewrite (`mt.IMAGE`, until the row changes again), so the history shows the
        version as it was; the history reads the commits it has not read before the rewrite (`before_rewrite`)."""
        if job.before_rewrite is not None:
            job.before_rewrite()
        stored = job.spark.read.format("delta").load(job.path)
        have = {n.lower(): n for n in stored.columns}
        columns = [
            (F.col(quoted(have[f.name.lower()])).cast(f.dataType) if f.name.lower() in have and f.name.lower()
             not in retyped else F.lit(None).cast(f.dataType)).alias(f.name)
            for f in schema.fields
        ]  # fmt: skip
        r = job.record
        if job.history is not None and r.history_seeded and r.history_format == 2:
            before = [c for c in (MySqlColumn(**d) for d in r.mysql_columns) if c.name.lower() in have]
            image = F.expr(mt.row_image_sql([dataclasses.replace(c, name=have[c.name.lower()]) for c in before]))
            if mt.IMAGE in stored.columns:  # rewritten before: the image from before the first rewrite stays
                image = F.coalesce(F.col(mt.IMAGE), image)
            columns.append(image.alias(mt.IMAGE))
        log.warning("sink %s: %s: %s dropped column(s) %s and changed %s: rewriting the table in its new shape",
                    job.sink, job.path, label, dropped or "none", sorted(retyped) or "no type")  # fmt: skip
        stored.select(*columns).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(job.path)
        metrics.DELTA_RESHAPES.labels(job.sink).inc()

    def _fitting_shape(self, job: FoldJob, batch: DataFrame, key_text: bool) -> tuple[list[MySqlColumn], DataFrame]:
        """The table's shape that every event of the batch fits (the known one, else the schema history's
        newest), and the batch converted to it; refused naming what does not fit."""
        r = job.record
        for refresh in (False, True):
            columns = job.shapes.mysql_columns(r.source, r.db, r.table, refresh)
            rows = mt.typed_rows(batch, columns, key_text)
            found = rows.agg(
                F.array_distinct(F.flatten(F.collect_set("_misfits"))).alias("misfits"),
                F.array_distinct(F.flatten(F.collect_set("_event_columns"))).alias("columns"),
            ).first()
            misfits = sorted(found["misfits"] or []) if found else []
            unknown = sorted(set(found["columns"] or []) - {c.name for c in columns}) if found else []
            if not misfits and not unknown:
                return columns, rows
            if refresh and not misfits:
                # Columns the source has dropped or renamed since these changes: nothing holds them now (the
                # capture reads the table again after such a DDL, so newer rows follow).
                log.info("sink %s: %s/%s.%s: the changes carry column(s) %s the table no longer has; left out",
                         job.sink, r.source, r.db, r.table, unknown)  # fmt: skip
                return columns, rows
        why = []
        if unknown:
            why.append(f"the events carry column(s) {unknown} that its newest schema-history record lacks")
        if misfits:
            why.append(f"values of column(s) {misfits} do not fit the types of its schema-history record")
        raise TerminalError(f"sink {job.sink}: MySQL table {r.source}/{r.db}.{r.table}: {'; '.join(why)} "
                            f"(history topic {job.shapes.history_topic()})")  # fmt: skip

    def _refreshed_after_truncate(self, job: FoldJob) -> None:
        job.shapes.refresh(job.record.source, job.record.db, job.record.table)

    def _position_column(self) -> str:
        return mt.POS

    def _view_rows(self, record: FoldRecord, newest: str) -> tuple[list[str], str, list[str], str] | None:
        if not record.mysql_columns:  # only truncates so far (a table dropped before a row event described it)
            return None
        shape = [MySqlColumn(**c) for c in record.mysql_columns]
        names = [*(c.name for c in shape), mt.DELETED, mt.OP, mt.POS, mt.SOURCE_TS]
        return names, mt.POS, mt.key_columns(shape), steps(newest, [["*", mt.VALUES_SQL], mt.typed_columns_sql(shape)])


LAYOUT = MySqlTyped()
