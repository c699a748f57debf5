"""The configuration reference (docs/configuration.md), generated from the typed config model.

Keys, types and defaults come from the pydantic models; each key's meaning from the comment beside
or above its field in the model's source (the comments the code already keeps there), so the
reference cannot drift from the code: tests/unit/test_config_reference.py compares the committed
page with this output and fails on a key without a meaning.

    python -m cdcflow.config.reference > docs/configuration.md
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from cdcflow.config.model import CdcflowConfig, SinkConfig
from cdcflow.config.sinks import SINK_OPTIONS

# Trailing comments that are instructions to tools, not meanings.
_TOOL_COMMENTS = ("fmt:", "noqa", "type:", "pragma")


def field_notes(model: type[BaseModel]) -> dict[str, str]:
    """Each field's comment: the block of comment lines right above it and the comment at its end."""
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    comments: dict[int, str] = {}  # line number (1-based) → comment text
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if not text.startswith(_TOOL_COMMENTS):
                comments[tok.start[0]] = text
    notes: dict[str, str] = {}
    (cls,) = ast.parse(source).body
    assert isinstance(cls, ast.ClassDef)
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#") and line in comments:
            above.insert(0, comments[line])
            line -= 1
        end = node.end_lineno or node.lineno
        beside = [comments[n] for n in range(node.lineno, end + 1) if n in comments]
        notes[node.target.id] = " ".join([*above, *beside]).strip()
    return notes


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """(the model a field holds, "" | "[]" for a tuple of them), or (None, "") for a plain value."""
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, ""
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _nested_model(args[0])
    if origin is tuple and args and inspect.isclass(args[0]) and issubclass(args[0], BaseModel):
        return args[0], "[]"
    return None, ""


def _type_name(annotation: Any) -> str:
    """A field's type in words (no `|`: the reference is a Markdown table)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is tuple:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} to {_type_name(args[1])}"
    if annotation is Path:
        return "path"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: Any) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "(required)"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def rows(model: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    """(key, type, default, meaning) for every key of `model` under `prefix`, depth first."""
    notes: dict[str, str] = {}
    for base in reversed(model.__mro__):  # inherited fields keep the comment where they are declared
        if inspect.isclass(base) and issubclass(base, BaseModel) and base is not BaseModel:
            notes.update({k: v for k, v in field_notes(base).items() if v})
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested, suffix = _nested_model(field.annotation)
        if nested is not None:
            if suffix:
                yield key, f"list of {nested.__name__}", _default(field), notes.get(name, "")
            yield from rows(nested, f"{key}{suffix}.")
            continue
        yield key, _type_name(field.annotation), _default(field), _cell(notes.get(name, ""))


def _cell(text: str) -> str:
    """Text for a Markdown table cell: `|` escaped, and `<...>` outside code shown, not taken as HTML."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def render() -> str:
    out = [
        "# Configuration reference",
        "",
        "Every key of cdcflow's YAML config (`--config FILE`; without one, every default below), its default and",
        "what it means. Any key can also be set from the environment: `CDCFLOW__<SECTION>__<KEY>=value`",
        "(e.g. `CDCFLOW__KAFKA__BOOTSTRAP_SERVERS=broker:9092`; values are read as YAML scalars). A key the",
        "model does not know, or a value of the wrong type, stops the command with the key named.",
        "",
        "Generated from the typed config model (`cdcflow.config`) by `python -m cdcflow.config.reference`;",
        "a test keeps this page equal to it.",
        "",
    ]
    table_head = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for section, field in CdcflowConfig.model_fields.items():
        model, _ = _nested_model(field.annotation)
        assert model is not None
        out += [f"## `{section}`", "", _doc(model), "", *table_head]
        out += [f"| `{k}` | {t} | {d} | {m} |" for k, t, d, m in rows(model, f"{section}.")]
        out.append("")
    out += ["## Sink options (`pipeline.sinks[].options`, by `type`)", ""]
    out.append(_doc(SinkConfig))
    out.append("")
    for type_name, options in SINK_OPTIONS.items():
        out += [f"### `{type_name}`", "", _doc(options), "", *table_head]
        out += [f"| `{k}` | {t} | {d} | {m} |" for k, t, d, m in rows(options, "")]
        out.append("")
    return "\n".join(line.rstrip() for line in out).rstrip() + "\n"


def missing_meanings() -> list[str]:
    """Keys whose field has no comment to explain it."""
    keys = [k for section, f in CdcflowConfig.model_fields.items()
            for k, _t, _d, m in rows(_nested_model(f.annotation)[0], f"{section}.") if not m]  # type: ignore[arg-type]  # fmt: skip
    keys += [f"{name}.{k}" for name, o in SINK_OPTIONS.items() for k, _t, _d, m in rows(o, "") if not m]
    return keys


if __name__ == "__main__":
    print(render(), end="")
