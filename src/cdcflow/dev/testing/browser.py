"""A real headless browser for page tests: Debian's `chromium` (`make test` installs it when missing)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no chromium on PATH: apt-get install chromium (make test does it when run as root)")


def _run(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="cdcflow-chromium-") as profile:
        # --no-sandbox: tests may run as root, where Chromium's sandbox refuses to start.
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               f"--user-data-dir={profile}", *args]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)


def rendered_dom(url: str, timeout_s: float = 60.0) -> str:
    """The page's DOM after Chromium loaded it (scripts run), as HTML."""
    proc = _run(["--dump-dom", url], timeout_s)
    if proc.returncode != 0 or "<html" not in proc.stdout:
        raise RuntimeError(f"chromium could not load {url} (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def screenshot(url: str, path: Path, width: int = 1400, height: int = 1600, timeout_s: float = 60.0) -> Path:
    proc = _run([f"--screenshot={path}", f"--window-size={width},{height}", "--hide-scrollbars", url], timeout_s)
    if not path.exists() or path.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot of {url} (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return path
