"""The committed hbase.pb modules match their .proto sources (run `make protos` after editing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PB = SRC / "cdcflow" / "protocols" / "hbase" / "pb"


def test_generated_modules_are_up_to_date(tmp_path: Path) -> None:
    protos = sorted(PB.glob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{SRC}", f"--python_out={tmp_path}",
         f"--pyi_out={tmp_path}", *map(str, protos)],
        check=True,
    )  # fmt: skip
    for proto in protos:
        for suffix in ("_pb2.py", "_pb2.pyi"):
            name = proto.stem + suffix
            fresh = (tmp_path / "cdcflow" / "protocols" / "hbase" / "pb" / name).read_text()
            assert (PB / name).read_text() == fresh, f"{name} is stale: run `make protos`"
