"""A tenant's tool created through REST declares its costs (docs/guides/budgets.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.api.exec_fixtures import api_for
from tests.support.rest import RestClient


@pytest.fixture
def api(db_url: str) -> Iterator[RestClient]:
    with api_for(db_url) as a:
        yield a


def test_costs_are_taken_and_bad_ones_refused(api: RestClient) -> None:
    body = {"name": "priced", "implementation_type": "http", "side_effect": "pure",
            "risk_default": "low", "input_schema": {"type": "object"},
            "implementation_config": {"url": "https://example.com/x", "method": "GET"},
            "costs": {"*": {"fixed": 0.01, "from_output": "usage.cost"}}}
    created = api.call("POST", "/tools", json=body)
    assert created.status_code == 201, created.text
    record = api.gw.catalog.record("default", "priced")
    assert record is not None
    cost = record[1].costs["*"]
    assert (cost.fixed, cost.from_output) == (0.01, "usage.cost")
    bad = api.call("POST", "/tools", json={**body, "name": "neg",
                                           "costs": {"*": {"fixed": -1}}})
    assert bad.status_code == 422, bad.text
