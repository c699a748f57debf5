"""docs/configuration.md is the config model's reference: generated from it, never edited by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcflow.config import reference

pytestmark = pytest.mark.unit
PAGE = Path(__file__).parents[2] / "docs" / "configuration.md"


def test_every_key_has_a_meaning() -> None:
    assert reference.missing_meanings() == [], "add a comment beside or above these fields in cdcflow.config"


def test_the_committed_reference_is_the_generated_one() -> None:
    assert PAGE.read_text() == reference.render(), (
        "docs/configuration.md is out of date: .venv/bin/python -m cdcflow.config.reference > docs/configuration.md"
    )


def test_the_reference_lists_keys_defaults_and_nested_sections() -> None:
    page = reference.render()
    assert "| `kafka.bootstrap_servers` | str or null | `null` | Kafka brokers" in page
    assert "| `hbase.peer.port` | int | `0` |" in page  # a section inside a section
    assert "| `hbase.routes[].table` | str | (required) |" in page  # the fields of a list's items
    assert "### `phoenix`" in page and "| `commit_rows` | int | `2000` |" in page  # sink options by type
    assert "| `pipeline.sinks` | list of SinkConfig | `[]` |" in page


def test_comments_for_tools_are_not_meanings() -> None:
    from pydantic import BaseModel

    class Example(BaseModel):
        # what a is for
        a: int = 1  # fmt: skip
        b: int = 2  # what b is for
        c: int = 3

    assert reference.field_notes(Example) == {"a": "what a is for", "b": "what b is for", "c": ""}
