from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .hbase_capture import PeerSetup


@pytest.fixture
def peer_setup(
    hbase: dict[str, Any], kafka: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[PeerSetup]:
    setup = PeerSetup(f"p{uuid.uuid4().hex[:10]}", hbase, kafka, tmp_path)
    setup.write_config()
    yield setup
    setup.stop_all()
    try:
        setup.cli("hbase", "peer", "remove", "--config", str(setup.config_path))
    except AssertionError:
        pass  # the peer was never added
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(setup.logs())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    setattr(item, f"rep_{rep.when}", rep)
