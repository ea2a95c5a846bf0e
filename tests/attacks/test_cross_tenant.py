"""Cross-tenant attack suite: every REST route of the app, called by every role of tenant
``default`` with tenant ``other``'s ids, answers exactly as for an id that does not exist
(normally 404; names are per tenant, so acting on one's own namesake is allowed), never
carries ``other``'s data, and leaves ``other``'s state unchanged. Routes come from the app's own
OpenAPI document: a new route without a
probe here fails :func:`test_every_route_has_a_probe`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.identity_fixtures import identity_api
from tests.attacks.table import ProbeTable
from tests.support.rest import RestClient
from toolkeeper import Risk, SideEffect, tool

CANARY = "other-tenant-canary-5d1e"
ROLES = ("admin", "operator", "approver", "agent")
MISSING = "zz-no-such-id-0000"

# (method, path template) -> body sent with the probe; path params are filled with other's ids.
PROBES: dict[tuple[str, str], Any] = {
    ("GET", "/tools/{tool_id}"): None,
    ("PUT", "/tools/{tool_id}"): {"name": "mine", "description": "taken over"},
    ("POST", "/tools/{tool_id}/publish"): {},
    ("POST", "/tools/{tool_id}/version"): {"version": "9.9.9"},
    ("GET", "/tools/{tool_id}/versions"): None,
    ("GET", "/tools/{tool_id}/quarantine"): None,
    ("GET", "/tools/{tool_id}/impact"): None,
    ("GET", "/credentials/{connector}/{key}/impact"): None,
    ("POST", "/turns/{turn_group_id}/decisions"): {"decision": "supersede"},
    ("GET", "/calls/{call_id}"): None,
    ("GET", "/calls/{call_id}/story"): None,
    ("POST", "/calls/{call_id}/resolve"): {"status": "failed", "note": "probe"},
    ("GET", "/approvals/{approval_id}"): None,
    ("POST", "/approvals/{approval_id}/approve"): {"note": "probe"},
    ("POST", "/approvals/{approval_id}/deny"): {"note": "probe"},
    ("POST", "/approvals/{approval_id}/confirm"): {},
    ("GET", "/approvals/{approval_id}/wait"): None,
    ("GET", "/discovery/agents/{agent}/enabled"): None,
    ("GET", "/discovery/agents/{agent}/unavailable"): None,
    ("DELETE", "/tokens/{token_id}"): None,
    ("PUT", "/credentials/{connector}/{key}"): {"value": "overwritten"},
    ("DELETE", "/credentials/{connector}/{key}"): None,
    ("GET", "/agents/{name}"): None,
    ("PUT", "/agents/{name}"): {"name": "{name}", "profile": "reader"},
    ("DELETE", "/agents/{name}"): None,
    ("GET", "/agents/{name}/endpoint"): None,
    ("PUT", "/agents/{name}/endpoint"): {"url": "http://127.0.0.1:9/x"},
    ("DELETE", "/agents/{name}/endpoint"): None,
    ("GET", "/profiles/{name}"): None,
    ("PUT", "/profiles/{name}"): {"name": "{profile}", "autonomy": 0},
    ("DELETE", "/profiles/{name}"): None,
    ("DELETE", "/activations/{profile}/{tool}"): None,
    ("POST", "/turns/{turn_group_id}/supersede"): {},
    ("POST", "/side-effects/{side_effect_id}/compensate"): {},
    ("GET", "/retrieval/pipelines/{pipeline}"): None,
    ("DELETE", "/retrieval/pipelines/{pipeline}"): None,
    ("GET", "/retrieval/pipelines/{pipeline}/documents"): None,
    ("POST", "/retrieval/pipelines/{pipeline}/documents"):
        {"documents": [{"text": "planted", "source": "probe"}]},
    ("DELETE", "/retrieval/pipelines/{pipeline}/documents/{document_id}"): None,
    ("POST", "/retrieval/pipelines/{pipeline}/query"): {"query": "canary"},
}
# Routes without ids in the path: listings must not carry other's data; writes naming other's
# things in the body are refused or land in the caller's own tenant (checked by the snapshot).
BODY_PROBES: dict[tuple[str, str], Any] = {
    ("POST", "/tools"): {"name": "planted", "tenant_id": "other", "implementation_type": "http",
                         "implementation": {"url": "http://127.0.0.1:9/"}},
    ("POST", "/tools/execute"): {"tool": "other_secret_tool", "arguments": {"text": "x"}},
    ("POST", "/tools/check"): {"tool": "other_secret_tool", "arguments": {"text": "x"}},
    ("POST", "/tools/execute-batch"): {"calls": [{"tool": "other_secret_tool",
                                                  "arguments": {"text": "x"}}]},
    ("POST", "/tokens"): {"tenant_id": "other", "role": "admin", "label": "planted"},
    ("POST", "/tenants"): {"tenant_id": "other"},
    ("PUT", "/settings/webhook"): {"url": "http://127.0.0.1:9/hook", "tenant_id": "other"},
    ("DELETE", "/settings/webhook"): None,
    ("POST", "/agents"): {"name": "planted", "profile": "other-prof", "tenant_id": "other"},
    ("POST", "/profiles"): {"name": "planted", "tenant_id": "other", "autonomy": 3},
    ("POST", "/activations"): {"profile": "other-prof", "tool": "other_secret_tool"},
    ("POST", "/retrieval/pipelines"): {"name": "planted", "tenant_id": "other"},
}
LISTINGS = ("/tools", "/tools/health", "/tools/builtins/templates", "/tools/sources", "/calls",
            "/calls/recent", "/stats/overview", "/graph", "/audit/export",
            "/approvals", "/audit", "/audit/verify", "/discovery/catalog",
            "/discovery/available", "/me", "/tokens", "/credentials", "/tenants",
            "/settings/webhook", "/agents", "/profiles", "/activations", "/healthz",
            "/readyz", "/metrics", "/retrieval/pipelines",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp", "/")
SNAPSHOT = ("/tools", "/calls", "/approvals", "/tokens", "/credentials", "/settings/webhook",
            "/agents", "/profiles", "/activations", "/retrieval/pipelines")


@tool(side_effect=SideEffect.PURE, inline=True, risk=Risk.LOW)
def other_secret_tool(text: str) -> str:
    """other-tenant-canary-5d1e: a tool only tenant ``other`` owns."""
    return text


def _seed_other(api: RestClient) -> dict[str, str]:
    """Data of every kind in tenant ``other``, each carrying the canary where it can."""
    gw = api.gw
    gw.registry.register(other_secret_tool, tenant_id="other")
    done = api.execute("other_agent", "echo", {"text": CANARY}, idempotency_key="k-other")
    assert done.status_code == 200, done.text
    pending = api.execute("other_agent", "wire", {"amount": 5})
    assert pending.status_code in (200, 202), pending.text
    cred = api.call("PUT", "/credentials/other-conn/key", "other_admin", json={"value": CANARY})
    assert cred.status_code < 300, cred.text
    gw.retrieval.create("other", "kb-other")
    gw.retrieval.ingest("other", "kb-other", [{"text": CANARY, "source": "s", "metadata": {}}])
    docs = api.get("other_admin", "/retrieval/pipelines/kb-other/documents").json()
    token = next(t for t in gw.store.tokens.list() if t.tenant_id == "other")
    body = done.json()
    seen = api.get("other_admin", f"/calls/{body['call_id']}").text
    assert CANARY in seen, "the probes need other's data to carry the canary"
    return {"tool_id": api.tool_id("other_secret_tool", "other"), "call_id": body["call_id"],
            "approval_id": pending.json()["approval_id"], "agent": "other-bot",
            "token_id": token.id, "connector": "other-conn", "key": "key", "name": "other-bot",
            "profile": "other-prof", "tool": "echo", "turn_group_id": "turn-other",
            "side_effect_id": body.get("side_effect_id") or MISSING, "pipeline": "kb-other",
            "document_id": _first_id(docs)}


def _first_id(listing: Any) -> str:
    items = listing.get("documents", listing) if isinstance(listing, dict) else listing
    return str(items[0].get("id") or items[0].get("document_id")) if items else MISSING


def _fill(template: str, ids: dict[str, str], *, missing: bool = False) -> str:
    path = template
    for name, value in ids.items():
        path = path.replace("{" + name + "}", MISSING if missing else value)
    return path


def _body(raw: str) -> dict[str, Any]:
    body = json.loads(raw)
    return {} if body is None else {"json": body}


def _snapshot(api: RestClient) -> str:
    return json.dumps({p: api.get("other_admin", p).json() for p in SNAPSHOT}, sort_keys=True)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    with identity_api(tmp_path) as client:
        yield client


def _routes(api: RestClient) -> set[tuple[str, str]]:
    paths = api.client.get("/openapi.json").json()["paths"]
    return {(m.upper(), p) for p, ops in paths.items() for m in ops}


def test_every_route_has_a_probe(api: RestClient) -> None:
    probed = set(PROBES) | set(BODY_PROBES) | {("GET", p) for p in LISTINGS}
    unprobed = sorted(_routes(api) - probed)
    assert not unprobed, f"routes without a cross-tenant probe: {unprobed}"


def _shape(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        body = None
    reason = body.get("error", {}).get("reason", "") if isinstance(body, dict) else ""
    return f"{resp.status_code} {reason}".strip()


def test_other_tenants_ids_are_indistinguishable_from_missing_ones(api: RestClient) -> None:
    ids = _seed_other(api)
    before = _snapshot(api)
    table = ProbeTable("cross-tenant REST (ids in the path)")
    for (method, template), body in sorted(PROBES.items()):
        template = template.replace("/profiles/{name}", "/profiles/{profile}")
        for role in ROLES:
            raw = json.dumps(body)
            other = api.call(method, _fill(template, ids), role,
                             **_body(_fill(raw, ids)))
            absent = api.call(method, _fill(template, ids, missing=True), role,
                              **_body(_fill(raw, ids, missing=True)))
            # Same answer as for an id that does not exist (names are per tenant: acting on
            # one's own namesake is fine, the snapshot below proves other's state untouched).
            held = (other.status_code < 500 and _shape(other) == _shape(absent)
                    and CANARY not in other.text)
            table.add(f"{role:8} {method} {template}", _shape(absent), _shape(other), held)
    table.add("other's state after every probe", "unchanged",
              "unchanged" if _snapshot(api) == before else "CHANGED", _snapshot(api) == before)
    table.check()


def test_listings_and_body_references_never_reach_the_other_tenant(api: RestClient) -> None:
    _seed_other(api)
    before = _snapshot(api)
    table = ProbeTable("cross-tenant REST (listings and bodies)")
    for role in ROLES:
        for path in LISTINGS:
            resp = api.get(role, path)
            table.add(f"{role:8} GET {path}", "no canary", _shape(resp),
                      CANARY not in resp.text and resp.status_code < 500)
        for (method, path), body in sorted(BODY_PROBES.items()):
            kw = {} if body is None else {"json": body}
            resp = api.call(method, path, role, **kw)
            table.add(f"{role:8} {method} {path}", "no canary, no 5xx", _shape(resp),
                      CANARY not in resp.text and resp.status_code < 500)
    after = _snapshot(api)
    table.add("other's state after every probe", "unchanged",
              "unchanged" if after == before else "CHANGED", after == before)
    table.check()
