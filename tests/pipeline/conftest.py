"""Gateways on a real store (SQLite file, and PostgreSQL where a test asks for ``db_url``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.pipeline.gw_helpers import build_gateway
from tests.pipeline.sample_tools import LEDGER, reset_ledger
from toolkeeper import Gateway, Principal, Role

GatewayFactory = Callable[..., Gateway]


@pytest.fixture(autouse=True)
def _fresh_ledger() -> None:
    reset_ledger()


@pytest.fixture
def make_gateway(db_url: str) -> Iterator[GatewayFactory]:
    """Gateways on the test's database: every pipeline test runs on SQLite and PostgreSQL."""
    made: list[Gateway] = []

    def make(*, url: str | None = None, **kw: Any) -> Gateway:
        gw = build_gateway(url or db_url, **kw)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.close()


@pytest.fixture
def approver() -> Principal:
    return Principal(name="alice", tenant_id="default", roles=frozenset({Role.APPROVER}))


@pytest.fixture
def ledger() -> dict[str, Any]:
    return LEDGER
