"""Issue 26 item 13: a tool whose circuit breaker opened is hidden from MCP ``tools/list``
only while its calls are refused. A call through MCP meanwhile reaches the pipeline (which
answers ``tool_unavailable`` with ``retry_after``, not ``Unknown tool``); once the cool-down
is over the tool is listed again and an MCP call is the half-open probe that closes the
breaker. The health board's clock is the test's: no sleeping. Through the real ``/mcp``
endpoint, on its lean path and through the SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, ToolError, tool
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.model.enums import Health
from toolkeeper.model.tool import ExecutionMeta

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}
UPSTREAM = {"down": False}


@tool(side_effect=SideEffect.IDEMPOTENT, risk=Risk.LOW)
def flaky() -> str:
    """Answers ok unless its upstream is down."""
    if UPSTREAM["down"]:
        raise ToolError("upstream_error", "upstream down", retryable=True)
    return "ok"


@pytest.fixture
def mcp(tmp_path: Path) -> Iterator[tuple[Gateway, Any, str]]:
    gw = Gateway.open(f"sqlite:///{tmp_path / 'tk.db'}")
    gw.registry.register(flaky, execution=ExecutionMeta(max_retries=0))
    gw.registry.put_profile(Profile(name="p", autonomy=3,
                                    activations=(Activation(tool="flaky"),)))
    gw.registry.put_agent(Agent(name="bot", profile="p"))
    token = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]
    UPSTREAM["down"] = False
    try:
        with TestClient(create_app(gw, ApiSettings())) as client:
            yield gw, client, token
    finally:
        gw.close()


def _rpc(client: Any, token: str, method: str, **params: Any) -> dict[str, Any]:
    headers = {"Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": V,
               "Authorization": f"Bearer {token}", "Mcp-Method": method,
               **({"Mcp-Name": params["name"]} if "name" in params else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META, **params}}
    return dict(client.post("/mcp", content=json.dumps(body), headers=headers).json())


def _listed(client: Any, token: str) -> list[str]:
    return [t["name"] for t in _rpc(client, token, "tools/list")["result"]["tools"]]


def _call(client: Any, token: str) -> dict[str, Any]:
    reply = _rpc(client, token, "tools/call", name="flaky", arguments={})
    assert "result" in reply, reply  # never "Unknown tool": the pipeline answers
    return dict(reply["result"])


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "sdk"])
def test_an_open_breaker_hides_the_tool_until_it_half_opens_then_a_call_closes_it(
        mcp: tuple[Gateway, Any, str], lean: bool) -> None:
    gw, client, token = mcp
    client.app.state.mcp.fast_path = lean
    board = gw.runtime.health
    now = [1000.0]
    board.clock = lambda: now[0]
    assert _listed(client, token) == ["flaky"]

    UPSTREAM["down"] = True
    for _ in range(board.open_after):
        failed = _call(client, token)
        assert failed["structuredContent"]["reason"] == "upstream_error", failed
    assert board.get("default:flaky").status is Health.UNAVAILABLE

    assert _listed(client, token) == []  # hidden while its calls are refused
    refused = _call(client, token)["structuredContent"]
    assert refused["reason"] == "tool_unavailable", refused
    assert refused["retry_after"] == pytest.approx(board.cooldown_s)

    UPSTREAM["down"] = False
    now[0] += board.cooldown_s - 1
    assert _listed(client, token) == []
    now[0] += 1  # the cool-down is over: half-open
    assert _listed(client, token) == ["flaky"]
    probe = _call(client, token)
    assert not probe.get("isError"), probe
    assert board.get("default:flaky").status is Health.HEALTHY
    assert _listed(client, token) == ["flaky"]


def test_a_failed_probe_hides_the_tool_for_another_cool_down(
        mcp: tuple[Gateway, Any, str]) -> None:
    gw, client, token = mcp
    board = gw.runtime.health
    now = [50.0]
    board.clock = lambda: now[0]
    UPSTREAM["down"] = True
    for _ in range(board.open_after):
        _call(client, token)
    now[0] += board.cooldown_s
    assert _listed(client, token) == ["flaky"]
    assert _call(client, token)["structuredContent"]["reason"] == "upstream_error"
    assert _listed(client, token) == []  # open again
    now[0] += board.cooldown_s
    UPSTREAM["down"] = False
    assert _listed(client, token) == ["flaky"]
    assert not _call(client, token).get("isError")


def test_a_probe_that_stops_before_running_frees_the_probe(tmp_path: Path) -> None:
    """A half-open probe refused at the gate (confirmation) records no verdict: the next
    call may probe again, the breaker is not stuck half-open."""
    with Gateway.open(f"sqlite:///{tmp_path / 'tk.db'}") as gw:
        gw.registry.register(flaky, execution=ExecutionMeta(max_retries=0),
                             requires_confirmation=True)
        gw.registry.put_profile(Profile(name="p", autonomy=3,
                                        activations=(Activation(tool="flaky"),)))
        gw.registry.put_agent(Agent(name="bot", profile="p"))
        board = gw.runtime.health
        board.set("default:flaky", Health.UNAVAILABLE, retry_after_s=-1)  # half-open
        for _ in range(2):
            res = gw.call_sync("flaky", agent="bot")
            assert res.reason == "confirmation_required", res
