"""The change event: the contract between sources and the pipeline (docs/design.md §3). Pure, no I/O."""

from cdcflow.events.model import ChangeEvent, Op, SourceInfo

__all__ = ["ChangeEvent", "Op", "SourceInfo"]
