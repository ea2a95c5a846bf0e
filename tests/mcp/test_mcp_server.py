"""SPEC §7 MCP over ``/mcp``, driven by the official SDK client in both protocol eras:
the agent's exact tool list with names and annotations from policy, calls through the
pipeline, stopped calls as ``isError`` with structured data, in-band confirmation, the
discovery resources, and foreign tools and resources answered as not found."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError
from mcp_fixtures import ERAS, McpServer, confirm_with, connect, serving

INVOICE = {"invoice": "inv-1", "amount": 5}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServer]:
    tmp = tmp_path_factory.mktemp("mcp")
    with serving(f"sqlite:///{tmp}/tk.db") as s:
        yield s


def _tools(listing: Any) -> dict[str, Any]:
    return {t.name: t for t in listing.tools}


@pytest.mark.parametrize("era", ERAS)
async def test_tools_list_is_exactly_what_the_agent_may_call_in_name_order(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "bot", era) as c:
        tools = (await c.list_tools()).tools
    # bank has three actions: one MCP tool each; wire needs a scope the profile lacks
    assert [t.name for t in tools] == ["add", "bank_hold", "bank_refund", "pay"]
    by = {t.name: t for t in tools}
    assert by["add"].annotations.read_only_hint is True
    assert by["bank_refund"].annotations.idempotent_hint is True
    assert by["bank_refund"].annotations.read_only_hint is False
    assert by["pay"].annotations.destructive_hint is True
    assert by["bank_hold"].annotations.destructive_hint is False
    assert not any(t.annotations.open_world_hint for t in tools)  # native tools
    assert by["bank_refund"].input_schema["required"] == ["invoice", "amount"]
    assert by["bank_refund"].output_schema == {"type": "object",
                                               "properties": {"done": {"type": "string"}}}
    async with connect(srv, "reader", era) as c:
        assert [t.name for t in (await c.list_tools()).tools] == ["add"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_runs_the_pipeline_and_returns_structured_content(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "bot", era) as c:
        r = await c.call_tool("add", {"a": 2, "b": 3})
        assert (r.is_error, r.structured_content) == (False, {"result": 5})
        assert r.content[0].text == "5"
        r = await c.call_tool("bank_refund", INVOICE)
        assert r.structured_content == {"done": "refund", "invoice": "inv-1"}
        bad = await c.call_tool("add", {"a": "two", "b": 3})
        assert bad.is_error and bad.structured_content["reason"] == "invalid_arguments"
    srv.gw.flush()  # the audit events of unrecorded calls are written in the background
    audit = srv.gw.store.audit.list("default", tool="add", agent="bot", limit=1000)
    assert any(e.type == "call.succeeded" for e in audit)


@pytest.mark.parametrize("era", ERAS)
async def test_a_stopped_call_is_an_error_result_carrying_the_approval(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "intern", era) as c:
        r = await c.call_tool("pay", INVOICE)
    assert r.is_error
    data = r.structured_content
    assert data["status"] == "approval_required" and data["reason"] == "approval_required"
    assert data["approval_id"] and data["call_id"]
    assert data["approval_id"] in r.content[0].text and "\n" not in r.content[0].text
    pending = srv.gw.approvals.get(data["approval_id"], "default")
    assert (pending.agent, pending.tool, pending.arguments) == ("intern", "pay", INVOICE)


@pytest.mark.parametrize("era", ERAS)
async def test_another_agents_tool_and_an_unknown_tool_are_protocol_errors(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "reader", era) as c:
        for name in ("pay", "bank_refund", "no_such_tool"):
            with pytest.raises(MCPError) as info:
                await c.call_tool(name, INVOICE)
            assert info.value.code == -32602
        assert (await c.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}
    async with connect(srv, "acme-bot", era) as c:  # same tool names, another tenant
        assert (await c.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(("answer", "status"), [("accept", "succeeded"),
                                                ("decline", "denied")])
async def test_a_confirm_gate_is_resolved_in_band_when_the_client_can_ask(
        srv: McpServer, era: str, answer: str, status: str) -> None:
    args = {"invoice": f"inv-{era}-{answer}", "amount": 7}
    async with connect(srv, "sup", era, elicitation_callback=confirm_with(answer)) as c:
        r = await c.call_tool("pay", args)
    if status == "succeeded":
        assert (r.is_error, r.structured_content) == (False, {"paid": args["invoice"],
                                                              "amount": 7})
    else:
        assert r.is_error and r.structured_content["status"] == "denied"
        assert r.structured_content["reason"] == "approval_denied"
    decided = srv.gw.approvals.list("default", status=None, limit=1000)
    mine = [a for a in decided if a.arguments == args]
    assert len(mine) == 1 and mine[0].kind == "confirm" and mine[0].decided_by == "sup"


def _token_created_while_reading_calls(gw: Any, app: Any) -> Any:
    """``app``, where a token is created (elsewhere, as another admin would) just after
    ``/mcp`` authenticated a ``tools/call`` and before its handler runs: every
    process's cache of verified tokens is dropped then."""
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def reading() -> Any:
            message = await receive()
            if b'"tools/call"' in message.get("body", b""):
                gw.store.tokens.create(tenant_id="default", role="operator")
            return message
        await app(scope, reading if scope["type"] == "http" else receive, send)
    return wrapped


@pytest.mark.parametrize("era", ERAS)
async def test_a_token_cache_dropped_mid_request_does_not_unauthenticate_the_caller(
        tmp_path: Path, era: str) -> None:
    with serving(f"sqlite:///{tmp_path}/tk.db",
                 around=_token_created_while_reading_calls) as s:
        async with connect(s, "bot", era) as c:
            for n in range(3):
                r = await c.call_tool("add", {"a": n, "b": 1})
                assert (r.is_error, r.structured_content) == (False, {"result": n + 1})


@pytest.mark.parametrize("era", ERAS)
async def test_without_elicitation_a_confirm_gate_answers_confirmation_required(
        srv: McpServer, era: str) -> None:
    async with connect(srv, "sup", era) as c:
        r = await c.call_tool("pay", {"invoice": f"inv-noask-{era}", "amount": 1})
    assert r.is_error and r.structured_content["status"] == "confirmation_required"
    assert r.structured_content["approval_id"]


@pytest.mark.parametrize("era", ERAS)
async def test_discovery_resources_are_the_callers_own(srv: McpServer, era: str) -> None:
    async with connect(srv, "reader", era) as c:
        listed = [str(r.uri) for r in (await c.list_resources()).resources]
        assert listed == ["toolkeeper://tools/tenant/default/available",
                          "toolkeeper://tools/agent/reader/enabled",
                          "toolkeeper://tools/agent/reader/unavailable"]
        templates = (await c.list_resource_templates()).resource_templates
        assert len(templates) == 3
        enabled = (await c.read_resource(listed[1])).contents[0].text
        assert '"name":"add"' in enabled and '"name":"pay"' not in enabled
        # an agent is never shown the tools its profile does not give it (SPEC §2: what is
        # listed is decided by the policy that decides what can be called)
        unavailable = (await c.read_resource(listed[2])).contents[0].text
        assert '"name":"bank"' not in unavailable and '"name":"pay"' not in unavailable
        available = (await c.read_resource(listed[0])).contents[0].text
        assert '"name":"add"' in available and '"name":"bank"' not in available
        for foreign in ("toolkeeper://tools/agent/bot/enabled",
                        "toolkeeper://tools/tenant/acme/available",
                        "toolkeeper://tools/agent/reader/secrets", "file:///etc/passwd"):
            with pytest.raises(MCPError) as info:
                await c.read_resource(foreign)
            assert info.value.code == -32602


async def test_the_core_path_on_both_databases(db_url: str, tmp_path: Path) -> None:
    with serving(db_url) as s:
        for era in ERAS:
            async with connect(s, "bot", era) as c:
                assert "pay" in [t.name for t in (await c.list_tools()).tools]
                r = await c.call_tool("pay", {"invoice": f"db-{era}", "amount": 1},
                                      meta={"toolkeeper/idempotency_key": f"k-{era}"})
                again = await c.call_tool("pay", {"invoice": f"db-{era}", "amount": 1},
                                          meta={"toolkeeper/idempotency_key": f"k-{era}"})
            assert not r.is_error and not again.is_error
        outcomes = s.gw.calls.list("default", limit=100)
        keys = sorted(o.key for o in outcomes if o.tool == "pay")  # once per key: deduped
        assert len(keys) == 2 and keys[0].endswith("k-2026-07-28") and keys[1].endswith("k-legacy")


@pytest.mark.parametrize("era", ERAS)
async def test_discovery_resources_carry_each_tools_input_schema(srv: McpServer,
                                                                 era: str) -> None:
    import json

    async with connect(srv, "reader", era) as c:
        listed = {t.name: t.input_schema for t in (await c.list_tools()).tools}
        enabled = json.loads((await c.read_resource(
            "toolkeeper://tools/agent/reader/enabled")).contents[0].text)
        available = json.loads((await c.read_resource(
            "toolkeeper://tools/tenant/default/available")).contents[0].text)
    add = next(t for t in enabled["tools"] if t["name"] == "add")
    assert add["input_schemas"]["run"] == listed["add"]  # the schema tools/list carries
    assert add["input_schemas"]["run"]["required"] == ["a", "b"]
    assert next(t for t in available["tools"] if t["name"] == "add")["input_schemas"] == \
        {"run": listed["add"]}
