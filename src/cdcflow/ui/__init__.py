"""`cdcflow ui`: a status page for operators (docs/operations.md)."""
