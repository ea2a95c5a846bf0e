"""RouteTable (api/route_table.py): operations built once by install(); including a table
like a plain router is refused instead of silently adding no route."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from toolkeeper.api.route_table import RouteTable


def _table() -> RouteTable:
    inner = RouteTable(prefix="/inner", tags=["inner"])

    @inner.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    outer = RouteTable(prefix="/v1", tags=["outer"])
    outer.include_router(inner)
    return outer


def test_install_builds_the_recorded_operations_with_prefixes_and_tags() -> None:
    app = FastAPI()
    _table().install(app.router)
    with TestClient(app) as client:
        assert client.get("/v1/inner/ping").json() == {"pong": "yes"}
        op = client.get("/openapi.json").json()["paths"]["/v1/inner/ping"]["get"]
    assert op["tags"] == ["outer", "inner"]


def test_including_a_table_as_a_plain_router_is_refused() -> None:
    with pytest.raises(TypeError, match="install"):
        FastAPI().include_router(_table())
