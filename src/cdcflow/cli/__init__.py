"""The `cdcflow` command: a thin layer over the packages; no logic of its own."""
