"""The Delta sink's consistent cut across the tables of a MySQL source (docs/pipeline.md, decision 0026):
`tally.py` the rule, `tracker.py` keeping it up to date, `state.py` where it is stored, `reads.py` reading the
tables at it."""
