"""Which tables, families and qualifiers go to which topics (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from cdcflow.config import RouteConfig
from cdcflow.events.cells import Cell, CellType, column_name, string_binary
from cdcflow.events.json_codec import ValueHints
from cdcflow.events.topics import change_topic
from cdcflow.patterns import NameFilter, matches_any
from cdcflow.sources.hbase.changes import split_table

_DATE_TOKENS = {"yyyy": r"\d{4}", "yy": r"\d{2}", "MM": r"\d{2}", "dd": r"\d{2}", "HH": r"\d{2}"}
_FAMILY_WIDE = (CellType.DELETE_FAMILY, CellType.DELETE_FAMILY_VERSION)


def table_pattern(pattern: str) -> re.Pattern[str]:
    """`events_${yyyyMM}` matches events_202611; `*` is a wildcard; no namespace means default."""
    if ":" not in pattern and pattern != "*":
        pattern = f"default:{pattern}"
    out = []
    for part in re.split(r"(\$\{[A-Za-z]+\}|\*)", pattern):
        if part == "*":
            out.append(".*")
        elif part.startswith("${"):
            token = part[2:-1]
            regex = ""
            rest = token
            while rest:  # ${yyyyMMdd}: consume known tokens left to right
                for name, rx in _DATE_TOKENS.items():
                    if rest.startswith(name):
                        regex += rx
                        rest = rest[len(name) :]
                        break
                else:
                    raise ValueError(f"unknown date token {token!r} in table pattern {pattern!r}")
            out.append(regex)
        else:
            out.append(re.escape(part))
    return re.compile("^" + "".join(out) + "$")


@dataclass(frozen=True)
class Route:
    topic: str
    hints: ValueHints
    columns: tuple[str, ...]
    exclude_columns: tuple[str, ...]
    fields: tuple[tuple[str, str], ...] = ()  # the upsert format's field names ("cf:q", name)

    @property
    def keeps_everything(self) -> bool:
        return self.columns == ("*",) and not self.exclude_columns

    @cached_property
    def _column_filter(self) -> NameFilter:
        return NameFilter(self.columns, self.exclude_columns)

    def keep(self, cell: Cell) -> bool:
        fam = string_binary(cell.family)
        if cell.type in _FAMILY_WIDE:
            # A family-wide delete touches every column of the family: keep it when some kept
            # column can live in this family, unless the whole family is excluded.
            if any(p in ("*", f"{fam}:*") for p in self.exclude_columns):
                return False
            return matches_any(fam, (p.split(":", 1)[0] for p in self.columns))
        name = column_name(cell.family, cell.qualifier)
        return self._column_filter(name)


class Router:
    def __init__(self, routes: tuple[RouteConfig, ...], topic_prefix: str) -> None:
        self._routes = [(table_pattern(r.table), r) for r in routes]
        self._prefix = topic_prefix
        self.route = lru_cache(maxsize=4096)(self._route)

    def _route(self, table: str) -> Route | None:
        """The route of `table` as HBase names it ("ns:t" or "t"); None if it is dropped."""
        namespace, qualifier = split_table(table)
        full = f"{namespace}:{qualifier}"
        for rx, cfg in self._routes:
            if rx.match(full):
                if cfg.drop:
                    return None
                topic = cfg.topic or change_topic(self._prefix, namespace, qualifier)
                return Route(topic, ValueHints(cfg.values), cfg.columns, cfg.exclude_columns, tuple(cfg.fields.items()))
        return Route(change_topic(self._prefix, namespace, qualifier), ValueHints(), ("*",), ())
