"""docs/development.md's layout map cannot drift from the code: every package and top-level module is named in
it, and every file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "cdcflow"


def layout_map() -> str:
    text = (ROOT / "docs" / "development.md").read_text()
    found = re.search(r"^## Layout\n.*?```\n(.*?)```", text, re.S | re.M)
    assert found, "docs/development.md has no Layout section with a map"
    return found.group(1)


def test_every_package_and_top_level_module_is_on_the_map() -> None:
    named = layout_map()
    missing = []
    for path in sorted(PACKAGE.iterdir()):
        if path.is_dir() and (path / "__init__.py").exists():
            if not re.search(rf"(?<![\w.]){re.escape(path.name)}/", named):
                missing.append(f"{path.name}/")
            for sub in sorted(path.iterdir()):  # second level: each subpackage by name
                if (
                    sub.is_dir()
                    and (sub / "__init__.py").exists()
                    and not re.search(rf"\b{re.escape(sub.name)}/", named)
                ):
                    missing.append(f"{path.name}/{sub.name}/")
        elif path.suffix == ".py" and path.name != "__init__.py" and not re.search(rf"\b{re.escape(path.name)}", named):
            missing.append(path.name)
    assert not missing, f"not on docs/development.md's layout map: {missing}"


def test_every_file_the_map_names_exists() -> None:
    files = {p.name for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and "target" not in p.parts}
    named = set(re.findall(r"\b[\w-]+\.(?:py|rs|pyi)\b", layout_map()))
    assert named, "the map names no files"
    assert not named - files, f"docs/development.md's layout map names files that do not exist: {sorted(named - files)}"
