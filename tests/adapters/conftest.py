"""Fixtures of the adapter tests: ``remote``, one real ``toolkeeper serve`` per module; and
in-process, ``gw`` (:func:`open_gateway`'s tools, executions counted in ``counts``) and
``box``, agent ``bot``'s Toolbox over it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.remote_support import Remote, running
from toolkeeper import Gateway
from toolkeeper.toolbox import InProcessBackend, Toolbox


@pytest.fixture(scope="module")
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    with running(tmp_path_factory.mktemp("adapters-serve")) as server:
        yield server


@pytest.fixture
def counts() -> dict[str, int]:
    return {}


@pytest.fixture
def gw(db_url: str, counts: dict[str, int]) -> Iterator[Gateway]:
    from tests.adapters.agent_support import open_gateway  # Pydantic AI's models: used here only

    gateway = open_gateway(db_url, counts)
    yield gateway
    gateway.close()


@pytest.fixture
def box(gw: Gateway) -> Toolbox:
    return Toolbox(InProcessBackend(gw), agent="bot")
