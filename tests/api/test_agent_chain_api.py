"""``agent_call``'s cycle and depth guard holds when the callee sends nothing back (issue 26,
item 11): the callee agents here drop ``Toolkeeper-Agent-Chain`` (or send a forged one) and
call back into the real REST server, or its MCP endpoint, with their own agent tokens. The
gateway knows the chain from its own record of the agent calls it is making."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.loopback import JsonHandler, serving, serving_app
from tests.support.rest import RestClient
from toolkeeper import Activation, Agent, Autonomy, Profile
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.builtins import agent_call, definition
from toolkeeper.store import Store

CHAIN = "Toolkeeper-Agent-Chain"
AGENTS = ("a1", "a2", "a3", "a4")
MAX_DEPTH = 2


@pytest.fixture
def api(tmp_path: Any) -> Iterator[RestClient]:
    """Agents ``a1``…``a4`` whose profile enables ``agent_call`` (``max_depth`` 2), each
    with an agent token."""
    with identity_api(tmp_path) as client:
        gw = client.gw
        gw.registry.register(definition("agent_call"))
        gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3), activations=(
            Activation(tool="agent_call", policy={"max_depth": MAX_DEPTH}),)))
        for name in AGENTS:
            gw.registry.put_agent(Agent(name=name, profile="callers"))
            client.tokens[name] = gw.store.tokens.create(
                tenant_id="default", role="agent", agent=name, label=name)[1]
        yield client


@pytest.fixture
def server(api: RestClient) -> Iterator[str]:
    """The same app served for real on loopback (the callees call back over HTTP)."""
    with serving_app(create_app(api.gw, ApiSettings()),
                     what="the REST server to start") as port:
        yield f"http://127.0.0.1:{port}"


Back = Callable[[str, str], Any]
"""How a callee calls back: ``(as_agent, target) -> the inner call's result``."""


def _rest_back(api: RestClient, server: str, header: str | None = None) -> Back:
    """Calls back over REST with its own token, without the chain (or a forged one)."""
    def back(me: str, target: str) -> Any:
        headers = {"Authorization": f"Bearer {api.tokens[me]}"}
        if header is not None:
            headers[CHAIN] = header
        r = httpx.post(server + "/tools/execute", timeout=20, headers=headers, json={
            "tool": "agent_call", "arguments": {"target_agent_slug": target, "input": "x"}})
        return r.json()
    return back


def _mcp_back(api: RestClient, server: str) -> Back:
    """Calls back over MCP (which has no chain header at all) with its own token."""
    async def call(me: str, target: str) -> Any:
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        from mcp import Client

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {api.tokens[me]}"},
                                      timeout=20) as http, \
                Client(streamable_http_client(server + "/mcp", http_client=http)) as client:
            result = await client.call_tool("agent_call", {"target_agent_slug": target,
                                                           "input": "x"})
            return result.structured_content

    return lambda me, target: anyio.run(call, me, target)


def _callee(me: str, then: str | None, back: Back, hits: dict[str, list[Any]]) -> type:
    """Agent ``me``'s endpoint: records what arrived and, if ``then``, asks ``then`` through
    the gateway as itself (dropping the chain it was sent)."""
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            hits[me].append({"chain": body["chain"], "header": self.headers.get(CHAIN)})
            inner = back(me, then) if then is not None else None
            self.reply({"run_id": f"{me}-run", "output": inner})
    return Handler


def _run(api: RestClient, server: str, links: dict[str, str | None], back: Back,
         first: str = "a1", target: str = "a2") -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Endpoints for the agents of ``links`` (agent -> whom it asks next), then ``first``
    asks ``target``; the outer result and what each endpoint received."""
    hits: dict[str, list[Any]] = {name: [] for name in AGENTS}
    with serving(_callee("a1", links.get("a1"), back, hits)) as u1, \
            serving(_callee("a2", links.get("a2"), back, hits)) as u2, \
            serving(_callee("a3", links.get("a3"), back, hits)) as u3, \
            serving(_callee("a4", links.get("a4"), back, hits)) as u4:
        for name, url in zip(AGENTS, (u1, u2, u3, u4), strict=True):
            _publish(api, name, url)
        r = httpx.post(server + "/tools/execute", timeout=30, headers={
            "Authorization": f"Bearer {api.tokens[first]}"}, json={
            "tool": "agent_call", "arguments": {"target_agent_slug": target, "input": "go"}})
    assert r.status_code == 200, r.text
    outer: dict[str, Any] = r.json()
    assert outer["status"] == "succeeded", outer
    return outer, hits


def _publish(api: RestClient, name: str, url: str) -> None:
    """``name``'s endpoint published at ``url``."""
    r = api.put("admin", f"/agents/{name}/endpoint", {
        "transport": "http", "url": url + "/run", "status": "published",
        "allowed_networks": ["127.0.0.1/32"]})
    assert r.status_code == 200, r.text


@contextmanager
def _one_callee(api: RestClient, server: str, name: str) -> Iterator[dict[str, list[Any]]]:
    """Only ``name``'s endpoint, calling no one, until the block ends: what each endpoint
    received."""
    hits: dict[str, list[Any]] = {agent: [] for agent in AGENTS}
    with serving(_callee(name, None, _rest_back(api, server), hits)) as url:
        _publish(api, name, url)
        yield hits


def _inner(outer: dict[str, Any]) -> Any:
    """The call the callee made back (its reply's ``output``)."""
    return outer["output"]["output"]


def test_a_callee_that_drops_the_chain_still_stops_on_the_cycle(
        api: RestClient, server: str) -> None:
    outer, hits = _run(api, server, {"a2": "a1"}, _rest_back(api, server))
    inner = _inner(outer)
    assert (inner["status"], inner["reason"]) == ("denied", "agent_call_cycle"), inner
    assert hits["a1"] == []  # a1 never ran twice
    assert hits["a2"] == [{"chain": ["a1"], "header": "a1"}]


def test_a_forged_chain_header_cannot_shorten_what_the_gateway_knows(
        api: RestClient, server: str) -> None:
    outer, hits = _run(api, server, {"a2": "a1"}, _rest_back(api, server, header="a4"))
    inner = _inner(outer)
    assert (inner["status"], inner["reason"]) == ("denied", "agent_call_cycle"), inner
    assert hits["a1"] == []


def test_a_chain_of_callees_that_drop_the_header_stops_at_the_depth_limit(
        api: RestClient, server: str) -> None:
    outer, hits = _run(api, server, {"a2": "a3", "a3": "a4"}, _rest_back(api, server))
    from_a2 = _inner(outer)  # a2 -> a3: depth 2, allowed
    assert from_a2["status"] == "succeeded", from_a2
    from_a3 = from_a2["output"]["output"]  # a3 -> a4: depth 3 > 2
    assert (from_a3["status"], from_a3["reason"]) == ("denied", "agent_call_depth"), from_a3
    assert hits["a3"] == [{"chain": ["a1", "a2"], "header": "a1,a2"}]
    assert hits["a4"] == []


def test_a_callee_calling_back_over_mcp_stops_on_the_cycle(
        api: RestClient, server: str) -> None:
    outer, hits = _run(api, server, {"a2": "a1"}, _mcp_back(api, server))
    inner = _inner(outer)
    assert (inner["status"], inner["reason"]) == ("denied", "agent_call_cycle"), inner
    assert hits["a1"] == []


def test_once_the_call_is_over_the_callee_calls_freely_again(
        api: RestClient, server: str) -> None:
    """The record lasts as long as the call: afterwards a2 asking a1 is a new chain."""
    _run(api, server, {}, _rest_back(api, server))
    with _one_callee(api, server, "a1") as hits:
        later = _rest_back(api, server)("a2", "a1")
    assert later["status"] == "succeeded", later
    assert hits["a1"] == [{"chain": ["a2"], "header": "a2"}]
    assert api.gw.runtime.agent_calls.chains_into("default", "a1") == []


def test_the_cycle_test_catches_a_guard_that_trusts_only_the_header(
        api: RestClient, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard as it was: the chain only from what the request carries."""
    monkeypatch.setattr(agent_call, "_paths", lambda ctx: [
        (*ctx.chain, ctx.agent) if ctx.agent else tuple(ctx.chain)])
    outer, hits = _run(api, server, {"a2": "a1"}, _rest_back(api, server))
    assert _inner(outer)["status"] == "succeeded"  # the loop went round
    assert len(hits["a1"]) == 1  # a1 ran again: what the test above refuses


def test_a_call_left_by_a_dead_process_counts_until_it_expires(
        api: RestClient, server: str) -> None:
    """Another process (a worker, a replica) died while running a2 for a1: its row still
    refuses a2 -> a1 (a refusal, never an escape) until the row's expiry, then not."""
    from sqlalchemy import update

    from toolkeeper.store.schema import agent_calls_in_flight as calls

    other = Store.open(api.gw.store.db.url)  # the dead process's store
    try:
        row = other.agent_calls.start("default", "a2", ("a1",), ttl_s=300)
    finally:
        other.close()
    with _one_callee(api, server, "a1") as hits:
        refused = _rest_back(api, server)("a2", "a1")
        assert (refused["status"], refused["reason"]) == ("denied", "agent_call_cycle")
        with api.gw.store.db.write() as conn:  # its timeout and margin passed
            conn.execute(update(calls).where(calls.c.id == row).values(
                expires_at=time.time() - 1))
        later = _rest_back(api, server)("a2", "a1")
    assert later["status"] == "succeeded", later
    assert hits["a1"] == [{"chain": ["a2"], "header": "a2"}]


def test_nothing_is_sent_when_the_record_cannot_be_written(
        api: RestClient, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: a call the other processes could not see is not made."""
    def broken(*args: Any, **kwargs: Any) -> str:
        raise OSError("disk I/O error")

    monkeypatch.setattr(api.gw.store.agent_calls, "start", broken)
    with _one_callee(api, server, "a2") as hits:
        result = _rest_back(api, server)("a1", "a2")
    assert result["status"] != "succeeded", result
    assert hits["a2"] == []


def test_a_record_that_cannot_be_deleted_does_not_fail_the_answered_call(
        api: RestClient, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(row: str) -> None:
        raise OSError("disk I/O error")

    monkeypatch.setattr(api.gw.store.agent_calls, "end", broken)
    with _one_callee(api, server, "a2") as hits:
        result = _rest_back(api, server)("a1", "a2")
    assert result["status"] == "succeeded", result
    assert len(hits["a2"]) == 1
    # the row stays until its expiry: a2 asking a1 meanwhile is refused, not let through
    assert api.gw.runtime.agent_calls.chains_into("default", "a2") == [("a1",)]
