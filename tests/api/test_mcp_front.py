"""``/mcp`` ahead of FastAPI's stack (api/__init__.py ``_App.front``): taken when nothing in
that stack applies to ``/mcp``, never when CORS (whose middleware must see it) is on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from toolkeeper import __version__
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.gateway import Gateway
from toolkeeper.model.profile import Agent, Profile
from toolkeeper.model.wire import VERSION_HEADER

ORIGIN = "https://app.example.com"
V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}
LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    with Gateway.open(f"sqlite:///{tmp_path / 'tk.db'}") as g:
        yield g


@pytest.fixture
def stack_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths FastAPI's own ``__call__`` (its telemetry check, then the stack) saw."""
    seen: list[str] = []
    inner = FastAPI.__call__

    async def counted(self: FastAPI, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(scope["path"])
        await inner(self, scope, receive, send)

    monkeypatch.setattr(FastAPI, "__call__", counted)
    return seen


def _list(client: TestClient, token: str, **headers: str) -> Any:
    return client.post("/mcp", content=LIST, headers={
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
        "Authorization": f"Bearer {token}", "MCP-Protocol-Version": V, "Mcp-Method": "tools/list",
        **headers})


def _agent_token(gw: Gateway) -> str:
    gw.registry.put_profile(Profile(name="p", autonomy=3))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    return gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]


def test_mcp_skips_the_rest_stack_and_still_names_the_version(
        gw: Gateway, stack_calls: list[str]) -> None:
    token = _agent_token(gw)
    with TestClient(create_app(gw, ApiSettings())) as client:
        answer = _list(client, token)
        assert client.get("/healthz").status_code == 200
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["tools"] == []
    assert answer.headers[VERSION_HEADER] == __version__
    assert stack_calls == ["/healthz"]  # /mcp never entered FastAPI's stack


def test_with_cors_mcp_goes_through_the_stack_and_answers_browsers(
        gw: Gateway, stack_calls: list[str]) -> None:
    token = _agent_token(gw)
    with TestClient(create_app(gw, ApiSettings(cors_origins=[ORIGIN]))) as client:
        preflight = client.options("/mcp", headers={
            "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        answer = _list(client, token, Origin=ORIGIN)
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert answer.status_code == 200, answer.text
    assert answer.headers["access-control-allow-origin"] == ORIGIN
    assert answer.headers[VERSION_HEADER] == __version__
    assert stack_calls == ["/mcp", "/mcp"]


def test_an_error_of_the_endpoint_reaches_the_server(
        gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette's error middleware no longer wraps ``/mcp``: nothing on the way swallows
    an unhandled error, so the server gets it and answers 500 (uvicorn's own)."""
    from toolkeeper.mcp.http import McpEndpoint

    async def broken(self: Any, scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("boom")

    token = _agent_token(gw)
    with TestClient(create_app(gw, ApiSettings())) as client:
        monkeypatch.setattr(McpEndpoint, "__call__", broken)
        with pytest.raises(RuntimeError, match="boom"):
            _list(client, token)
