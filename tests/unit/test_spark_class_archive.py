"""Which class-data archive a Spark JVM of the tests gets (cdcflow.dev.testing.spark_classes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdcflow.dev.testing import spark_classes


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    monkeypatch.setenv("CDCFLOW_CACHE_DIR", str(tmp_path / "cache"))
    java, jars = tmp_path / "java", tmp_path / "jars"
    java.write_text("jvm")
    jars.mkdir()
    for name in ("spark-core.jar", "scala-library.jar"):
        (jars / name).write_text(name)
    return java, jars


def test_the_archive_is_named_by_the_java_binary_and_every_jar(install: tuple[Path, Path]) -> None:
    java, jars = install
    first = spark_classes.archive_path(java, jars)
    assert first is not None and first.parent == Path(os.environ["CDCFLOW_CACHE_DIR"]) / "spark-classes"
    assert spark_classes.archive_path(java, jars) == first
    (jars / "spark-core.jar").write_text("spark-core, another build")
    second = spark_classes.archive_path(java, jars)
    assert second != first
    (jars / "delta.jar").write_text("one more")
    assert spark_classes.archive_path(java, jars) not in (first, second)
    java.write_text("another jvm")
    assert spark_classes.archive_path(java, jars) not in (first, second)


def test_only_the_newest_archives_of_other_installs_are_kept(tmp_path: Path) -> None:
    paths = [tmp_path / f"{n}.jsa" for n in range(5)]
    for age, path in enumerate(paths):
        path.write_text("archive")
        path.with_suffix(".lock").touch()
        os.utime(path, (1_000_000 - age * 10, 1_000_000 - age * 10))
    spark_classes._prune(tmp_path, keep=paths[4], others=2)
    assert sorted(p.name for p in tmp_path.glob("*.jsa")) == ["0.jsa", "1.jsa", "4.jsa"]
    assert sorted(p.name for p in tmp_path.glob("*.lock")) == ["0.lock", "1.lock", "4.lock"]
