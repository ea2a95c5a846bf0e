"""Cross-tenant attack suite over MCP: every JSON-RPC method ``/mcp`` answers, sent by tenant
``default``'s tokens naming tenant ``acme``'s things (tool names, idempotency keys, approval
ids, preview tokens, turn groups, request state, discovery resources, call ids, the prompts,
resources and completions of acme's own upstream MCP server, acme's task ids), answers
exactly as for a name or id that does not exist, in both protocol eras (2026-07-28 stateless
over raw HTTP, 2025-11-25 sessions through the official SDK client), and never carries acme's
data. MCP serves agents: every other role's token is refused the same way whatever it names.
The methods come from the server itself: one answered without a probe here fails
:func:`test_every_mcp_method_has_a_probe`."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
import yaml
from mcp.shared.exceptions import MCPError
from sqlalchemy import select

from tests.attacks.table import ProbeTable
from tests.mcp.mcp_fixtures import McpServer, connect, serving
from toolkeeper import Activation, Agent, Gateway, Profile, Risk, SideEffect, tool
from toolkeeper.mcp.relay import Relay
from toolkeeper.mcp.server import McpFace
from toolkeeper.mcp.task_wire import TASKS
from toolkeeper.model.call import Principal
from toolkeeper.store.mcp_tasks import McpTaskRepo, TaskRow
from toolkeeper.store.schema import mcp_tasks

CANARY = "acme-mcp-canary-7f3a"
V = "2026-07-28"
WAIT_S = 10
QUIET_S = 0.5
HEADERS = {"Accept": "application/json, text/event-stream",
           "Content-Type": "application/json", "MCP-Protocol-Version": V}
META = {"io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {}}
PAY = {"invoice": "inv-probe", "amount": 5}
RELAY = Path(__file__).resolve().parents[1] / "mcp" / "relay_fixture.py"
ACME_RELAYED = ("am_greet", "am_leak", "am_resources")
"""Tenant acme's upstream server ``am`` (relay_fixture.py: the canary in its prompt's
description; its secret, masked in answers, behind the marks below)."""
UPSTREAM_MARKS = ("password=", "key=", "key-", "Say hello", "Note 7", "A greeting")
"""What only answers of acme's upstream server hold (its secret's resource, prompt and
completion, its greeting, a note read through its template)."""
WITH_TASKS: dict[str, Any] = {
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}
ACCEPT = {"confirm": {"action": "accept", "content": {"confirm": True}}}
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
    ("prompt prompts/get acme's upstream prompt", "bot", "prompts/get",
     {"name": "$V", "arguments": {"name": "x"}}),
    ("leak prompts/get acme's upstream prompt holding its secret", "bot", "prompts/get",
     {"name": "$V"}),
    ("prompt completion/complete a ref/prompt of acme's", "bot", "completion/complete",
     {"ref": {"type": "ref/prompt", "name": "$V"}, "argument": {"name": "name", "value": "k"}}),
    ("template completion/complete a ref/resource of acme's", "bot", "completion/complete",
     {"ref": {"type": "ref/resource", "uri": "memo://$V/{id}"},
      "argument": {"name": "id", "value": "1"}}),
    ("uri resources/read acme's upstream resource", "bot", "resources/read",
     {"uri": "memo://$V"}),
    ("note resources/read acme's upstream template", "bot", "resources/read",
     {"uri": "memo://$V/7"}),
]
# 2025-11-25 only: resource subscriptions (gone from 2026-07-28, where listen streams hold them).
LEGACY_PROBES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("uri resources/subscribe acme's upstream resource", "bot", "resources/subscribe",
     {"uri": "memo://$V"}),
    ("uri resources/unsubscribe acme's upstream resource", "bot", "resources/unsubscribe",
     {"uri": "memo://$V"}),
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
    ("task tasks/get acme's waiting task", "bot", "tasks/get",
     {"taskId": "$V", "_meta": WITH_TASKS}),
    ("task tasks/update acme's waiting task", "bot", "tasks/update",
     {"taskId": "$V", "inputResponses": ACCEPT, "_meta": WITH_TASKS}),
    ("task tasks/cancel acme's waiting task", "bot", "tasks/cancel",
     {"taskId": "$V", "_meta": WITH_TASKS}),
]
# Methods without ids: the answer must carry none of acme's data.
LISTINGS: dict[str, dict[str, Any]] = {
    "ping": {}, "server/discover": {}, "tools/list": {}, "resources/list": {},
    "resources/templates/list": {}, "prompts/list": {}, "logging/setLevel": {"level": "debug"},
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
        elif method == "prompts/list":
            r = await c.list_prompts()
        elif method == "prompts/get":
            r = await c.get_prompt(params["name"], params.get("arguments"))
        elif method == "completion/complete":
            ref = (types.PromptReference if params["ref"]["type"] == "ref/prompt"
                   else types.ResourceTemplateReference).model_validate(params["ref"])
            r = await c.complete(ref, params["argument"])
        elif method == "logging/setLevel":
            with warnings.catch_warnings():  # deprecated in 2026-07-28, not in 2025
                warnings.simplefilter("ignore")
                r = await c.set_logging_level(params["level"])
        elif method in ("resources/subscribe", "resources/unsubscribe"):
            with warnings.catch_warnings():  # gone from 2026-07-28, not from 2025
                warnings.simplefilter("ignore")
                r = await (c.subscribe_resource if method.endswith("/subscribe")
                           else c.unsubscribe_resource)(params["uri"])
        else:
            with warnings.catch_warnings():  # ping is gone from 2026-07-28, not from 2025
                warnings.simplefilter("ignore")
                r = await c.send_ping()
    except MCPError as exc:
        return f"error {exc.code} {exc.message} {exc.data}"
    return json.dumps(r.model_dump(mode="json", by_alias=True, exclude_none=True))


def _seed_acme(srv: McpServer) -> dict[str, str]:
    """Tenant acme: its own tool, keyed calls, an approved payment, a turn group, its own
    upstream server's prompts, resources and completions (its agent reaches them), a task
    waiting for its approver; returns the values the probes name, each per era where a probe
    would otherwise meet its own."""
    gw = srv.gw
    gw.registry.register(acme_vault, tenant_id="acme")
    acme_tools = ("add", "pay", "bank", "acme_vault", *ACME_RELAYED)
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
    for mark, method, params in (
            (CANARY, "prompts/list", {}), ("key=", "prompts/get", {"name": "am_leak"}),
            ("password=", "resources/read", {"uri": "memo://secret"}),
            ("key-", "completion/complete", {"ref": {"type": "ref/prompt", "name": "am_greet"},
                                             "argument": {"name": "name", "value": "k"}})):
        owned = _post(srv, "acme-bot", method, params)  # acme's own agent reaches its own
        assert mark in owned.text, owned.text
    task = _post(srv, "acme-intern", "tools/call", {"name": "pay", "arguments": {
        **PAY, "invoice": "inv-task"}, "_meta": WITH_TASKS}).json()["result"]
    assert task["resultType"] == "task" and task["status"] == "working", task
    return {"tool": "acme_vault", "approval": approval, "turn": "turn-acme", "tenant": "acme",
            "agent": "acme-bot", "call": asked["result"]["structuredContent"]["call_id"],
            "key": "k-acme-{era}", "prompt": "am_greet", "leak": "am_leak", "uri": "secret",
            "template": "note", "note": "note", "task": task["taskId"],
            "task_approval": task["statusMessage"].split("approval ")[1].split(" ")[0]
            .rstrip(":")}


def _config(tmp: Path) -> Path:
    """Tenant acme's own upstream MCP server ``am`` (prompts, resources, a template)."""
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "secrets": {"backend": "env"}, "servers": [{
        "name": "am", "tenant": "acme", "command": [sys.executable, str(RELAY)],
        "env": {"FIXTURE_SECRET": "${secret:am/key}", "FIXTURE_PROMPT": str(tmp / "am-prompt")},
    }]}))
    (tmp / "am-prompt").write_text(f"{CANARY}: greet someone")
    return path


def _acmes_task(srv: McpServer, ids: dict[str, str]) -> tuple[str, bool]:
    """Acme's task after every probe: still waiting for its approver, who has not decided."""
    row = srv.gw.store.mcp_tasks.get(ids["task"], "acme", "acme-intern", time.time())
    asked = srv.gw.store.approvals.get(ids["task_approval"])
    shown = f"{row.status if row else 'gone'}, approval {asked.status if asked else 'gone'}"
    return shown, (row is not None and row.status == "working" and asked is not None
                   and asked.status == "pending")


@pytest.fixture
def srv(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[McpServer]:
    monkeypatch.setenv("TOOLKEEPER_SECRET_AM__KEY", "acme-upstream-key-5150")
    with serving(f"sqlite:///{tmp_path}/tk.db", config=_config(tmp_path)) as s:
        yield s


def test_every_mcp_method_has_a_probe(tmp_path: Any) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db") as gw:
        handlers = McpFace(gw).server  # the SDK keeps no public list of what it answers
    answered = ({"initialize"} | set(handlers._request_handlers)
                | set(handlers._notification_handlers))
    probed = ({m for _, _, m, _ in PROBES + MODERN_PROBES + LEGACY_PROBES} | set(LISTINGS)
              | RUNNER_METHODS | LISTEN_METHODS)
    unprobed = sorted(answered - probed)
    assert not unprobed, f"MCP methods without a cross-tenant probe: {unprobed}"


def _value(ids: dict[str, str], probe: str, era: str) -> str:
    return ids[probe.split()[0]].replace("{era}", era)


def _no_leak(text: str, ids: dict[str, str]) -> bool:
    return CANARY not in text and all(m not in text for m in UPSTREAM_MARKS) and all(
        ids[k] not in text for k in ("approval", "call", "task", "task_approval"))


def _unlisted(text: str) -> bool:
    """A listing shows none of acme's relayed prompts, resources or templates."""
    return "acme" not in text and "memo://" not in text and all(
        name not in text for name in ACME_RELAYED)


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
                      _no_leak(seen, ids) and _unlisted(seen))
        for probe, who, method, params in PROBES + LEGACY_PROBES:
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
                  _no_leak(seen, ids) and _unlisted(seen) and not seen.startswith("5"))
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
    _probe_all(srv).check()


def _probe_all(srv: McpServer) -> ProbeTable:
    ids = _seed_acme(srv)
    table = ProbeTable("cross-tenant MCP (every method, both eras)")
    with httpx.Client() as http:
        _modern_rows(srv, ids, table, http)
    anyio.run(_legacy_rows, srv, ids, table)
    ran = srv.gw.store.approvals.get(ids["approval"])
    table.add("acme's approved payment after every probe", "still approved",
              str(ran.status) if ran else "gone", ran is not None and ran.status == "approved")
    table.add("acme's task after every probe", "working, approval pending", *_acmes_task(srv, ids))
    return table


def _task_by_id_only(self: McpTaskRepo, task_id: str, tenant_id: str, agent: str,
                     now: float) -> TaskRow | None:
    """The task lookup with its owner check removed (the rule broken on purpose)."""
    with self._db.read() as conn:
        found = conn.execute(select(mcp_tasks).where(mcp_tasks.c.id == task_id)).first()
    return TaskRow(**found._mapping) if found is not None else None


def _entries_of_every_tenant(original: Any) -> Any:
    """The relayed prompts/resources lookup also seeing tenant acme's (broken on purpose)."""
    def entries(self: Relay, who: Principal, kind: str) -> list[Any]:
        acme = dataclasses.replace(who, tenant_id="acme", agent="acme-bot")
        return [*original(self, who, kind), *original(self, acme, kind)]
    return entries


@pytest.mark.parametrize("rule", ["task owner", "relayed entries' tenant"])
def test_the_probes_catch_each_isolation_broken_on_purpose(
        srv: McpServer, monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    if rule == "task owner":
        monkeypatch.setattr(McpTaskRepo, "get", _task_by_id_only)
        caught = {f"{V} bot    tasks/{m} acme's waiting task" for m in ("get", "update", "cancel")}
        caught.add("acme's task after every probe")
    else:
        monkeypatch.setattr(Relay, "entries", _entries_of_every_tenant(Relay.entries))
        caught = {f"{era} agent {m}" for era in (V, "legacy  ") for m in (
            "prompts/list", "resources/list", "resources/templates/list")}
        caught |= {f"{era} bot    {probe}" for era in (V, "legacy  ") for probe in (
            "prompts/get acme's upstream prompt", "completion/complete a ref/prompt of acme's",
            "completion/complete a ref/resource of acme's")}
        caught.add("legacy   bot    resources/subscribe acme's upstream resource")
    table = _probe_all(srv)
    broken = {probe for probe, _, _, held in table.rows if not held}
    print("\n" + table.render())
    assert caught <= broken, f"not caught with the {rule} rule broken: {caught - broken}"


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
