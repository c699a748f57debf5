from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdcflow.clients.phoenix import PhoenixJvm
from cdcflow.dev.testing import ServiceHarness

from .hbase_capture import PeerSetup


@pytest.fixture(scope="session")
def phoenix_jvm(services: ServiceHarness) -> Iterator[PhoenixJvm]:
    """One Phoenix client for the tests' own looks at Phoenix, shared by the session: a launch is a JVM and
    Phoenix's client start (about 6-13 s of CPU on two cores), and a dozen tests look. The sinks under test
    use connections of their own; this one reads table metadata afresh at every statement (Phoenix's
    default UPDATE_CACHE_FREQUENCY), so tables the sinks create or alter meanwhile show as they are."""
    jvm = PhoenixJvm.launch(str(services.endpoints("phoenix")["jdbc_url"]))
    yield jvm
    jvm.close()


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
