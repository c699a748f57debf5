"""The machine line every benchmark prints (cores, CPU model, memory, Python)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def machine_summary() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "?")
    mem = int(next(line.split()[1] for line in meminfo if line.startswith("MemTotal"))) // 1024 // 1024
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB; Python {platform.python_version()}"
