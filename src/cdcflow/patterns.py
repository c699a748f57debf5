"""Name filters by shell-style patterns (fnmatch, case-sensitive): the one rule every include/exclude
option in cdcflow follows (MySQL tables, snapshot tables, HBase columns, sink tables)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class NameFilter:
    """Keeps a name matched by some `include` pattern and by no `exclude` pattern; names in `always`
    are kept whatever the patterns say."""

    def __init__(self, include: Iterable[str] = ("*",), exclude: Iterable[str] = (), always: Iterable[str] = ()):
        self.include, self.exclude, self.always = tuple(include), tuple(exclude), frozenset(always)

    def __call__(self, name: str) -> bool:
        if name in self.always:
            return True
        return matches_any(name, self.include) and not matches_any(name, self.exclude)

    @property
    def keeps_everything(self) -> bool:
        return self.include == ("*",) and not self.exclude and not self.always
