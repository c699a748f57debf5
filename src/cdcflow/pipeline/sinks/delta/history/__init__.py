"""History of MySQL-sourced tables (SCD type 2) and point-in-time reads, kept by a Delta sink's folds.

A table with history (`history`, `history_tables` in the sink's options) has a third Delta table beside its
state and deletes: `<state path>.cdcflow_history` (`records.history_path`), one row per **version** of a source
row: the row as one transaction left it, valid from that transaction's position and source time up to the
next version's (or the truncate or delete that ended it; none while it is current). Deletes and truncates are
rows of their own (op `d`, op `t` under the empty key), so a change that arrives late lands in its place: the
versions around it are cut at its position.

- `versions.py`: the rules, as SQL text shared by the fold and the reads (a version per key and transaction;
  validity from the next version and the truncates).
- `append.py`: typed tables (history format 2, decision 0027): the history table keeps the closed versions, appended
  by each fold from the state's Change Data Feed; the open ones are the state's rows.
- `fold.py`: the fold's step that merges a fold's versions into the history table (format 1: the JSON layout).
- `reads.py`: the history view (registered as `<db>.<table>_history`), and the table as of a position, a GTID
  or a source time, exact up to the last applied batch (the history plus the changes not folded yet).
"""
