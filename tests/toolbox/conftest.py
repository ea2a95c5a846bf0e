"""Toolboxes over in-process gateways on a real store (SQLite and PostgreSQL: ``db_url``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.pipeline.gw_helpers import build_gateway
from tests.pipeline.sample_tools import LEDGER, reset_ledger
from toolkeeper import Gateway, Principal, Role
from toolkeeper.toolbox import InProcessBackend, Toolbox

BoxFactory = Callable[..., Toolbox]


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    reset_ledger()


@pytest.fixture
def approver() -> Principal:
    return Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))


@pytest.fixture
def make_box(db_url: str) -> Iterator[BoxFactory]:
    """``make_box(tools=[…], autonomy=…, scopes=…)``: agent ``bot``'s toolbox on a gateway
    with those tools published and activated (profile ``p``)."""
    made: list[Gateway] = []

    def make(*, agent: str = "bot", **kw: Any) -> Toolbox:
        gw = build_gateway(db_url, **kw)
        made.append(gw)
        return Toolbox(InProcessBackend(gw), agent=agent)

    yield make
    for gw in made:
        gw.close()


@pytest.fixture
def ledger() -> dict[str, Any]:
    return LEDGER


def gateway_of(box: Toolbox) -> Gateway:
    backend = box.backend
    assert isinstance(backend, InProcessBackend)
    return backend.gateway
