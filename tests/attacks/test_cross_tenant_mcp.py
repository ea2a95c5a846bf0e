"""Cross-tenant attack suite over MCP: every JSON-RPC method ``/mcp`` answers, sent by tenant
``default``'s tokens naming tenant ``acme``'s things (tool names, idempotency keys, approval
ids, preview tokens, turn groups, request state, discovery resources, call ids), answers
exactly as for a name or id that does not exist, in both protocol eras (2026-07-28 stateless
over raw HTTP, 2025-11-25 sessions through the official SDK client), and never carries acme's
data. MCP serves agents: every other role's token is refused the same way whatever it names.
The methods come from the server itself: one answered without a probe here fails
:func:`test_every_mcp_method_has_a_probe`."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.attacks.table import ProbeTable
from tests.mcp.mcp_fixtures import McpServer, connect, serving
from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.mcp.server import McpFace

CANARY = "acme-mcp-canary-7f3a"
V = "2026-07-28"
WAIT_S = 10
QUIET_S = 0.5
HEADERS = {"Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": V}
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}
PAY = {"invoice": "inv-probe", "amount": 5}
_MINTED = re.compile(r'("(?:call_id|approval_id|preview_token|side_effect_id)": ?)"[^"]*"'
                     r"|\b(?:ap|pv)_[0-9A-Za-z_-]{6,}")

# (probe, caller, method, params): ``$V`` is acme's value (named in ``_seed_acme``'s ids by
# the probe's first word) or a value that does not exist.
PROBES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("tool tools/call acme's tool by name", "bot", "tools/call",
     {"name": "$V", "arguments": {"text": "x"}}),
    ("key tools/call with acme's idempotency key", "bot", "tools/call",
     {"name": "add", "arguments": {"a": 1, "b": 1}, "_meta": {"toolkeeper/idempotency_key": "$V"}}),
    ("approval tools/call with acme's approved approval_id", "intern", "tools/call",
     {"name": "pay", "arguments": PAY, "_meta": {"toolkeeper/approval_id": "$V"}}),
    ("approval tools/call with acme's approval as preview_token", "intern", "tools/call",
     {"name": "pay", "arguments": PAY, "_meta": {"toolkeeper/preview_token": "$V"}}),
    ("turn tools/call in acme's turn group", "bot", "tools/call",
     {"name": "add", "arguments": {"a": 2, "b": 2}, "_meta": {"toolkeeper/turn_group_id": "$V"}}),
    ("tenant resources/read acme's tenant listing", "bot", "resources/read",
     {"uri": "toolkeeper://tools/tenant/$V/available"}),
    ("agent resources/read acme's agent enabled", "bot", "resources/read",
     {"uri": "toolkeeper://tools/agent/$V/enabled"}),
    ("agent resources/read acme's agent unavailable", "bot", "resources/read",
     {"uri": "toolkeeper://tools/agent/$V/unavailable"}),
]
# 2026-07-28 only: an in-band confirmation resumed with acme's approval as the request state,
# and notifications naming acme's call (a notification has no answer: 202 either way).
MODERN_PROBES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("approval tools/call resumed with acme's approval as requestState", "sup", "tools/call",
     {"name": "pay", "arguments": PAY, "requestState": "$V",
      "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}}}),
    ("call notifications/cancelled naming acme's call", "bot", "notifications/cancelled",
     {"requestId": "$V", "reason": "probe"}),
    ("call notifications/initialized naming acme's call", "bot", "notifications/initialized",
     {"requestId": "$V"}),
]
# Methods without ids: the answer must carry none of acme's data.
LISTINGS: dict[str, dict[str, Any]] = {
    "ping": {}, "server/discover": {}, "tools/list": {}, "resources/list": {},
    "resources/templates/list": {},
}
# Answered by the SDK's runner itself, and proved by their own probes below.
RUNNER_METHODS = {"initialize", "notifications/initialized", "notifications/cancelled"}
LISTEN_METHODS = {"subscriptions/listen"}
REFUSED_ROLES = ("admin", "operator", "approver")


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def acme_vault(text: str) -> str:
    """acme-mcp-canary-7f3a: a tool only tenant acme owns."""
    return text


def _post(srv: McpServer, who: str, method: str, params: dict[str, Any],
          http: httpx.Client | None = None) -> httpx.Response:
    """One 2026-07-28 JSON-RPC message over plain HTTP (a notification when it names one)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method,
                            "params": {**params, "_meta": {**META, **params.get("_meta", {})}}}
    if not method.startswith("notifications/"):
        body["id"] = 7
    routing = {"Mcp-Method": method}
    name = params.get("name", params.get("uri"))
    if isinstance(name, str):
        routing["Mcp-Name"] = name
    return (http or httpx).post(srv.url, json=body, timeout=20, headers={
        **HEADERS, **routing, "Authorization": f"Bearer {srv.tokens[who]}"})


def _norm(text: str, value: str) -> str:
    return _MINTED.sub(lambda m: (m[1] or "") + '"<id>"' if m[1] else "<id>",
                       text.replace(value, "<V>"))


def _gist(answer: str) -> str:
    """A table cell: the HTTP status (2026-07-28), then the stop reason or JSON-RPC code."""
    status, _, body = answer.partition(" ") if answer[:3].isdigit() else ("", "", answer)
    for pattern in (r'"reason": ?"(\w+)"', r'"code": ?(-?\d+)', r"^error (-?\d+)"):
        found = re.search(pattern, body)
        if found:
            return f"{status} {found[1]}".strip()
    return f"{status} {'result' if body else 'no body'}".strip()


def _fill(params: dict[str, Any], value: str) -> dict[str, Any]:
    filled: dict[str, Any] = json.loads(json.dumps(params).replace("$V", value))
    return filled


def _modern(srv: McpServer, who: str, method: str, params: dict[str, Any], value: str,
            http: httpx.Client) -> str:
    resp = _post(srv, who, method, _fill(params, value), http)
    return _norm(f"{resp.status_code} {resp.text}", value)


async def _legacy(c: Any, method: str, params: dict[str, Any]) -> str:
    """One request through a 2025-11-25 session, as the SDK client sends it."""
    try:
        if method == "tools/call":
            r: Any = await c.call_tool(params["name"], params.get("arguments"),
                                       meta=params.get("_meta"))
        elif method == "resources/read":
            r = await c.read_resource(params["uri"])
        elif method == "tools/list":
            r = await c.list_tools()
        elif method == "resources/list":
            r = await c.list_resources()
        elif method == "resources/templates/list":
            r = await c.list_resource_templates()
        else:
            with warnings.catch_warnings():  # ping is gone from 2026-07-28, not from 2025
                warnings.simplefilter("ignore")
                r = await c.send_ping()
    except MCPError as exc:
        return f"error {exc.code} {exc.message} {exc.data}"
    return json.dumps(r.model_dump(mode="json", by_alias=True, exclude_none=True))


def _seed_acme(srv: McpServer) -> dict[str, str]:
    """Tenant acme: its own tool, keyed calls, an approved payment, a turn group; returns
    the values the probes name, each per era where a probe would otherwise meet its own."""
    gw = srv.gw
    gw.registry.register(acme_vault, tenant_id="acme")
    acme_tools = ("add", "pay", "bank", "acme_vault")
    gw.registry.put_profile(Profile(name="acme", tenant_id="acme", autonomy=3, activations=tuple(
        Activation(tool=t) for t in acme_tools)), replace=True)
    gw.registry.put_profile(Profile(name="acme-manual", tenant_id="acme", autonomy=0,
                                    activations=(Activation(tool="pay"),)), replace=True)
    gw.registry.put_agent(Agent(name="acme-intern", profile="acme-manual", tenant_id="acme"),
                          replace=True)
    for role in REFUSED_ROLES:
        srv.tokens[role] = gw.store.tokens.create(tenant_id="default", role=role)[1]
    srv.tokens["acme-intern"] = gw.store.tokens.create(
        tenant_id="acme", role="agent", agent="acme-intern")[1]
    srv.tokens["acme-approver"] = gw.store.tokens.create(tenant_id="acme", role="approver")[1]
    vault = _post(srv, "acme-bot", "tools/call", {"name": "acme_vault", "arguments": {
        "text": CANARY}, "_meta": {"toolkeeper/idempotency_key": "k-vault",
                                   "toolkeeper/turn_group_id": "turn-acme"}}).json()
    assert CANARY in json.dumps(vault), vault
    for era in ("legacy", V):
        keyed = _post(srv, "acme-bot", "tools/call", {"name": "add", "arguments": {
            "a": 40, "b": 2}, "_meta": {"toolkeeper/idempotency_key": f"k-acme-{era}"}})
        assert "42" in keyed.text, keyed.text
    asked = _post(srv, "acme-intern", "tools/call", {"name": "pay", "arguments": PAY}).json()
    approval = asked["result"]["structuredContent"]["approval_id"]
    approved = httpx.post(f"{srv.base}/approvals/{approval}/approve", json={}, timeout=20,
                          headers={"Authorization": f"Bearer {srv.tokens['acme-approver']}"})
    assert approved.status_code == 200, approved.text
    return {"tool": "acme_vault", "approval": approval, "turn": "turn-acme", "tenant": "acme",
            "agent": "acme-bot", "call": asked["result"]["structuredContent"]["call_id"],
            "key": "k-acme-{era}"}


@pytest.fixture
def srv(tmp_path: Any) -> Iterator[McpServer]:
    with serving(f"sqlite:///{tmp_path}/tk.db") as s:
        yield s


def test_every_mcp_method_has_a_probe(tmp_path: Any) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db") as gw:
        handlers = McpFace(gw).server  # the SDK keeps no public list of what it answers
    answered = ({"initialize"} | set(handlers._request_handlers)
                | set(handlers._notification_handlers))
    probed = ({m for _, _, m, _ in PROBES + MODERN_PROBES} | set(LISTINGS) | RUNNER_METHODS
              | LISTEN_METHODS)
    unprobed = sorted(answered - probed)
    assert not unprobed, f"MCP methods without a cross-tenant probe: {unprobed}"


def _value(ids: dict[str, str], probe: str, era: str) -> str:
    return ids[probe.split()[0]].replace("{era}", era)


def _no_leak(text: str, ids: dict[str, str]) -> bool:
    return CANARY not in text and ids["approval"] not in text and ids["call"] not in text


async def _legacy_rows(srv: McpServer, ids: dict[str, str], table: ProbeTable) -> None:
    async with connect(srv, "bot", "legacy") as bot, connect(srv, "intern", "legacy") as intern:
        sessions = {"bot": bot, "intern": intern}
        shown = json.dumps([bot.server_info.model_dump(mode="json") if bot.server_info else None,
                            bot.instructions, bot.server_capabilities.model_dump(mode="json")])
        table.add("legacy   agent initialize", "no acme data", "server info",
                  _no_leak(shown, ids) and "acme" not in shown)
        for method, params in LISTINGS.items():
            if method == "server/discover":
                continue  # 2026-07-28 only
            seen = await _legacy(bot, method, params)
            table.add(f"legacy   agent {method}", "no acme data", _gist(seen),
                      _no_leak(seen, ids) and "acme" not in seen)
        for probe, who, method, params in PROBES:
            value = _value(ids, probe, "legacy")
            other = _norm(await _legacy(sessions[who], method, _fill(params, value)), value)
            missing = "zz-missing-legacy"
            absent = _norm(await _legacy(sessions[who], method, _fill(params, missing)),
                           missing)
            table.add(f"legacy   {who:6} {probe.split(' ', 1)[1]}", _gist(absent),
                      _gist(other), other == absent and _no_leak(other, ids))


def _modern_rows(srv: McpServer, ids: dict[str, str], table: ProbeTable,
                 http: httpx.Client) -> None:
    for method, params in LISTINGS.items():
        seen = _modern(srv, "bot", method, params, "zz-missing", http)
        table.add(f"{V} agent {method}", "no acme data", _gist(seen),
                  _no_leak(seen, ids) and "acme" not in seen and not seen.startswith("5"))
    for probe, who, method, params in PROBES + MODERN_PROBES:
        value = _value(ids, probe, V)
        other = _modern(srv, who, method, params, value, http)
        absent = _modern(srv, who, method, params, f"zz-missing-{V}", http)
        table.add(f"{V} {who:6} {probe.split(' ', 1)[1]}", _gist(absent), _gist(other),
                  other == absent and _no_leak(other, ids) and not other.startswith("5"))
    for role in REFUSED_ROLES:
        for probe, _who, method, params in PROBES + MODERN_PROBES:
            value = _value(ids, probe, V)
            other = _modern(srv, role, method, params, value, http)
            absent = _modern(srv, role, method, params, "zz-missing", http)
            table.add(f"{V} {role:8} {probe.split(' ', 1)[1]}", _gist(absent),
                      _gist(other), other == absent and other.startswith("403"))


def test_acmes_names_and_ids_answer_as_missing_ones_over_mcp(srv: McpServer) -> None:
    ids = _seed_acme(srv)
    table = ProbeTable("cross-tenant MCP (every method, both eras)")
    with httpx.Client() as http:
        _modern_rows(srv, ids, table, http)
    anyio.run(_legacy_rows, srv, ids, table)
    ran = srv.gw.store.approvals.get(ids["approval"])
    table.add("acme's approved payment after every probe", "still approved",
              str(ran.status) if ran else "gone", ran is not None and ran.status == "approved")
    table.check()


def _grant_acme(srv: McpServer, *tools: str) -> None:
    srv.gw.registry.put_profile(Profile(name="acme", tenant_id="acme", autonomy=3, activations=(
        tuple(Activation(tool=t) for t in tools))), replace=True)


async def test_acmes_catalog_changes_never_reach_another_tenants_streams(
        srv: McpServer) -> None:
    """``subscriptions/listen`` (2026-07-28) and a session's standalone stream (2025-11-25):
    a change of acme's tools is heard by acme's agent and by nobody in tenant default."""
    heard: list[Any] = []
    witness = anyio.Event()

    async def on_legacy(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(("legacy", message))

    async def on_acme(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            witness.set()

    table = ProbeTable("cross-tenant MCP (change notifications)")
    async with connect(srv, "bot", V) as modern, \
            connect(srv, "bot", "legacy", message_handler=on_legacy) as legacy, \
            connect(srv, "acme-bot", "legacy", message_handler=on_acme) as acme:
        for c in (modern, legacy, acme):
            await c.list_tools()
        async with modern.listen(tools_list_changed=True) as stream:
            await anyio.to_thread.run_sync(_grant_acme, srv, "add")
            with anyio.fail_after(WAIT_S):
                await witness.wait()  # the server has acted on the change
            with anyio.move_on_after(QUIET_S) as quiet:
                heard.append((V, await stream.__anext__()))
        table.add("acme's agent, after acme's change", "notified", "notified", True)
        table.add(f"{V} bot's subscriptions/listen", "quiet",
                  "quiet" if quiet.cancelled_caught else "NOTIFIED", quiet.cancelled_caught)
        table.add("legacy bot's session stream", "quiet", "quiet" if not heard else "NOTIFIED",
                  not heard)
    table.check()
