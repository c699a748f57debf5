from __future__ import annotations

import pytest

from cdcflow.config import RouteConfig
from cdcflow.events.cells import Cell, CellType
from cdcflow.sources.hbase.routing import Router, table_pattern


@pytest.mark.parametrize(
    ("pattern", "table", "matches"),
    [
        ("events_${yyyyMM}", "default:events_202611", True),
        ("events_${yyyyMM}", "default:events_2026", False),
        ("events_${yyyyMMdd}", "default:events_20261122", True),
        ("logs:app_${yyyy}_${MM}", "logs:app_2026_11", True),
        ("logs:*", "logs:anything", True),
        ("logs:*", "default:logs", False),
        ("*", "ns:t", True),
        ("t.x", "default:t_x", False),  # dots are literal
    ],
)
def test_table_patterns(pattern: str, table: str, matches: bool) -> None:
    assert bool(table_pattern(pattern).match(table)) is matches


def test_bad_date_token() -> None:
    with pytest.raises(ValueError, match="unknown date token"):
        table_pattern("t_${yyyyQQ}")


def test_first_matching_route_wins_and_default_topic() -> None:
    router = Router(
        (
            RouteConfig(table="events_${yyyyMM}", topic="all.events"),
            RouteConfig(table="audit:*", drop=True),
            RouteConfig(table="*", columns=("cf:*",), exclude_columns=("cf:secret*",), values={"cf:n": "long"}),
        ),
        "cdc",
    )
    assert router.route("events_202611").topic == "all.events"  # type: ignore[union-attr]
    assert router.route("audit:log") is None
    route = router.route("ns:orders")
    assert route is not None and route.topic == "cdc.ns.orders" and not route.keeps_everything
    assert route.hints.encoding("cf:n") == "long"
    assert Router((), "cdc").route("t").topic == "cdc.default.t"  # type: ignore[union-attr]


def cell(family: bytes, qualifier: bytes, kind: CellType = CellType.PUT) -> Cell:
    return Cell(b"r", family, qualifier, 1, kind)


def test_column_filters_and_family_wide_deletes() -> None:
    route = Router((RouteConfig(table="*", columns=("cf:*", "cg:keep"), exclude_columns=("cf:secret*",)),), "p").route(
        "t"
    )
    assert route is not None
    assert route.keep(cell(b"cf", b"a"))
    assert not route.keep(cell(b"cf", b"secret_1"))
    assert route.keep(cell(b"cg", b"keep")) and not route.keep(cell(b"cg", b"other"))
    assert not route.keep(cell(b"ch", b"x"))
    # a family-wide delete affects kept columns, so it is kept for cf and cg, not for ch
    assert route.keep(cell(b"cf", b"", CellType.DELETE_FAMILY))
    assert route.keep(cell(b"cg", b"", CellType.DELETE_FAMILY_VERSION))
    assert not route.keep(cell(b"ch", b"", CellType.DELETE_FAMILY))
    drop_family = Router((RouteConfig(table="*", exclude_columns=("cf:*",)),), "p").route("t")
    assert drop_family is not None and not drop_family.keep(cell(b"cf", b"", CellType.DELETE_FAMILY))
