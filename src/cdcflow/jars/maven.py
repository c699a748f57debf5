"""Resolve a component's Java classpath from a committed POM into the download cache."""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from cdcflow.config.paths import cache_dir
from cdcflow.errors import StackError
from cdcflow.jars import versions

log = logging.getLogger(__name__)
POM_DIR = Path(__file__).parent / "poms"
_COMPLETE = ".complete"


def resolve_classpath(pom_name: str, properties: dict[str, str]) -> Path:
    """Return a folder holding every runtime jar of `pom_name`; run Maven only on a cache miss.

    The folder name hashes the POM and its properties, so a version change gets a new folder
    and an unchanged one needs no network at all.
    """
    pom = POM_DIR / pom_name
    digest = hashlib.sha256(pom.read_bytes() + repr(sorted(properties.items())).encode()).hexdigest()[:12]
    target = cache_dir() / "jars" / f"{pom.stem}-{digest}"
    if (target / _COMPLETE).exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("Maven ('mvn') is not on PATH; it is needed once to download the Java services")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{pom.stem}-", dir=target.parent))
    cmd = [
        mvn, "-q", "-B", "-gs", str(POM_DIR / "settings.xml"), "-f", str(pom),
        f"org.apache.maven.plugins:maven-dependency-plugin:{versions.MAVEN_DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime", f"-DoutputDirectory={staging}",
        *(f"-D{k}={v}" for k, v in sorted(properties.items())),
    ]  # fmt: skip
    log.info("resolving %s with Maven into %s", pom.name, target)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise StackError(f"Maven could not resolve {pom.name}:\n{tail}")
    (staging / _COMPLETE).write_text(" ".join(cmd) + "\n")
    if target.exists():  # a concurrent resolver won; keep theirs
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.rename(target)
    return target


_VERSIONED = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def artifact_name(jar: Path) -> str:
    """ "guava-27.0.1-jre.jar" → "guava"."""
    m = _VERSIONED.match(jar.name)
    return m.group("name") if m else jar.stem


def jars_not_in(lib: Path, base: Path) -> list[Path]:
    """The jars of `lib` whose artifact is not in `base` in any version (so `base`'s versions win)."""
    have = {artifact_name(j) for j in base.glob("*.jar")}
    return [j for j in sorted(lib.glob("*.jar")) if artifact_name(j) not in have]


def classpath(*entries: Path) -> str:
    """A JVM -cp value: config folders as they are, jar folders as dir/* (the JVM expands it)."""
    return ":".join(str(e) if not (e / _COMPLETE).exists() else f"{e}/*" for e in entries)
