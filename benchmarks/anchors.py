"""Runs a peer's side-by-side kit (in the folder $CDCFLOW_ANCHORS names) in the same run as our own
figures, and sums up its per-run table lines as median [min-max] per system.

The kits are not part of this repository (they build Debezium and Apache's hbase-kafka-proxy from
Maven Central and apache/hbase-connectors); when one is not set up, `run_kit` says so in one line and
the benchmark goes on without it.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def anchors_dir() -> Path:
    return Path(os.environ.get("CDCFLOW_ANCHORS") or REPO.parent / "shared" / "anchors")


@dataclass
class Figures:
    """One system's figures over the runs: name → values (one per run)."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.values.setdefault(name, []).append(value)

    def summary(self, name: str, fmt: str = "{:.0f}") -> str:
        v = self.values.get(name) or []
        if not v:
            return "-"
        return f"{fmt.format(statistics.median(v))} [{fmt.format(min(v))}-{fmt.format(max(v))}]"


def run_kit(kit: str, args: list[str], env: dict[str, str], parse: re.Pattern[str],
            until: str | None = None) -> dict[str, Figures] | None:  # fmt: skip
    """Run `<anchors>/<kit>/bench.py args`, echoing its output; None (with a line saying why) when the kit
    is missing. Every output line matching `parse` (named groups: system and figures, digits may have
    thousands commas) counts as one run, up to a line starting with `until` (a summary that repeats runs)."""
    bench = anchors_dir() / kit / "bench.py"
    if not bench.exists():
        print(f"anchor {kit}: skipped, no kit at {bench.parent} (set CDCFLOW_ANCHORS to the anchors folder)")
        return None
    print(f"anchor {kit}: {bench} {' '.join(args)}", flush=True)
    proc = subprocess.Popen([sys.executable, str(bench), *args], cwd=bench.parent, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    assert proc.stdout is not None
    found: dict[str, Figures] = {}
    parsing = True
    for line in proc.stdout:
        print(f"  | {line}", end="", flush=True)
        if until and line.startswith(until):
            parsing = False
        m = parse.match(line) if parsing else None
        if m:
            system = m.group("system")
            for name, value in m.groupdict().items():
                if name != "system" and value is not None:
                    found.setdefault(system, Figures()).add(name, float(value.replace(",", "")))
    if proc.wait() != 0:
        print(f"anchor {kit}: the kit failed (exit {proc.returncode}); its figures above are incomplete")
    return found
