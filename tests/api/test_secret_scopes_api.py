"""Secrets resolve in the scope of whoever WROTE the reference (issue 26, item 8), tried
from a tenant admin's face (REST) at every place a ``${secret:…}`` can be written:

* an agent endpoint's headers (``PUT /agents/{name}/endpoint``), carried by the global
  ``agent_call`` built-in (the operator's tool) or by a tenant's ``agent_call`` tool;
* a tool definition (``POST``/``PUT /tools``): an ``http`` tool's headers (also
  ``tests/api/test_tenant_secrets_api.py``), a ``web_search`` tool's ``api_key`` and
  ``credentials_ref``, an operator's tool whose wiring a tenant edits;
* a webhook's ``secret_ref`` (``PUT /settings/webhook``: ``tests/api/test_webhook.py``);
* an agent's arguments: never resolved (an activation policy's values neither: no policy
  field is read as a reference).

A tenant-written reference reaches that tenant's own credentials only: a platform secret or
another tenant's credential is ``secret_not_found`` at use, before anything is sent. An
operator-written endpoint (config, code) may still send a platform secret."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.loopback import JsonHandler, serving
from tests.support.rest import RestClient
from toolkeeper import (
    Activation,
    Agent,
    Autonomy,
    Profile,
    Risk,
    SideEffect,
    ToolDefinition,
)
from toolkeeper.builtins import definition
from toolkeeper.model.profile import AgentEndpoint
from toolkeeper.secrets import credentials as scope_rule

OPS_TOKEN = "operator-ops-token-4f1c"
SERPER_KEY = "operator-serper-key-88a2"
LEAKY_HEADERS = {"Authorization": "Bearer ${secret:ops/token}",
                 "X-Api-Key": "${secret:serper/api_key}"}


class _Recorder(JsonHandler):
    """Records every request's headers (a tenant's host, as the attacker would run it)."""

    got: list[dict[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.got.append(dict(self.headers.items()))
        self.reply({"run_id": "r-1", "output": "ran", "organic": []})


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    handler = type("Rec", (_Recorder,), {"got": []})
    with serving(handler) as base:
        yield base, handler.got


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    """Tenants ``default`` and ``other``; platform secrets ``ops/token`` and
    ``serper/api_key``; agents ``alice`` (caller) and ``bob`` (callee) in ``default``, whose
    profile enables the global ``agent_call`` built-in."""
    with identity_api(tmp_path) as client:
        gw = client.gw
        store = gw.runtime.secrets
        assert store is not None and hasattr(store, "set_secret")
        store.set_secret("ops", "token", OPS_TOKEN)
        store.set_secret("serper", "api_key", SERPER_KEY)
        gw.refresh_secrets()
        gw.registry.register(definition("agent_call"))
        gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3),
                                        activations=(Activation(tool="agent_call"),)))
        for name in ("alice", "bob"):
            gw.registry.put_agent(Agent(name=name, profile="callers"))
            client.tokens[name] = gw.store.tokens.create(
                tenant_id="default", role="agent", agent=name, label=name)[1]
        yield client


def _endpoint(url: str, headers: dict[str, str]) -> dict[str, Any]:
    return {"transport": "http", "url": url, "status": "published",
            "allowed_networks": ["127.0.0.1/32"], "headers": headers}


def _call_bob(api: RestClient, tool: str = "agent_call") -> dict[str, Any]:
    arguments = {"input": "hi"} if tool != "agent_call" else {
        "target_agent_slug": "bob", "input": "hi"}
    r = api.execute("alice", tool, arguments)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _leaks(got: list[dict[str, str]], *values: str) -> list[str]:
    """The values among ``values`` that arrived in any recorded header."""
    seen = json.dumps(got)
    return [v for v in values if v in seen]


def tenant_endpoint_leak(api: RestClient, url: str,
                         got: list[dict[str, str]]) -> tuple[dict[str, Any], list[str]]:
    """Item 8 as reported: a tenant admin registers bob's endpoint over REST with headers
    naming platform secrets; alice calls bob through the global ``agent_call``. Returns the
    call's result and the platform values that reached the tenant's host."""
    r = api.put("admin", "/agents/bob/endpoint", _endpoint(url + "/run", LEAKY_HEADERS))
    assert r.status_code == 200, r.text
    assert r.json()["origin"] == "api"
    result = _call_bob(api)
    return result, _leaks(got, OPS_TOKEN, SERPER_KEY)


def test_a_tenant_endpoint_never_sends_the_operators_platform_secrets(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, got = recorder
    result, leaked = tenant_endpoint_leak(api, url, got)
    assert leaked == []
    assert got == []  # refused before anything was sent
    assert (result["status"], result["reason"]) == ("failed", "secret_not_found"), result
    assert OPS_TOKEN not in json.dumps(result) and SERPER_KEY not in json.dumps(result)


def test_a_tenant_endpoint_sends_the_tenants_own_credential(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, got = recorder
    for name, value in (("ops/token", "tenant-ops-token-1"),
                        ("serper/api_key", "tenant-serper-key-1")):
        put = api.call("PUT", f"/credentials/{name}", json={"value": value})
        assert put.status_code == 204, put.text
    result, leaked = tenant_endpoint_leak(api, url, got)
    assert result["status"] == "succeeded", result
    assert leaked == []
    assert len(got) == 1
    assert got[0]["Authorization"] == "Bearer tenant-ops-token-1"
    assert got[0]["X-Api-Key"] == "tenant-serper-key-1"


def other_tenant_leak(api: RestClient, url: str,
                      got: list[dict[str, str]]) -> tuple[dict[str, Any], list[str]]:
    """Tenant ``other`` holds ``theirs/key``; ``default``'s endpoint names it."""
    put = api.call("PUT", "/credentials/theirs/key", "other_admin",
                   json={"value": "other-tenants-key-5"})
    assert put.status_code == 204, put.text
    r = api.put("admin", "/agents/bob/endpoint",
                _endpoint(url + "/run", {"Authorization": "${secret:theirs/key}"}))
    assert r.status_code == 200, r.text
    return _call_bob(api), _leaks(got, "other-tenants-key-5")


def test_a_tenant_endpoint_never_reaches_another_tenants_credential(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, got = recorder
    result, leaked = other_tenant_leak(api, url, got)
    assert (result["status"], result["reason"]) == ("failed", "secret_not_found"), result
    assert leaked == [] and got == []


def _tenant_agent_call_tool(api: RestClient) -> None:
    """``ask_bob``: an ``agent_call`` tool a tenant admin defines over REST, enabled for
    alice (the carrying tool is the tenant's)."""
    created = api.post("admin", "/tools", {
        "name": "ask_bob", "implementation_type": "agent_call",
        "implementation_config": {"target_agent_slug": "bob"},
        "input_schema": {"type": "object", "properties": {"input": {"type": "string"}},
                         "required": ["input"], "additionalProperties": False}})
    assert created.status_code == 201, created.text
    assert api.post("admin", f"/tools/{created.json()['id']}/publish").status_code == 200
    api.gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3), activations=(
        Activation(tool="agent_call"), Activation(tool="ask_bob"))), replace=True)


def test_a_tenant_agent_call_tool_with_a_tenant_endpoint_never_sends_a_platform_secret(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    url, got = recorder
    _tenant_agent_call_tool(api)
    r = api.put("admin", "/agents/bob/endpoint", _endpoint(url + "/run", LEAKY_HEADERS))
    assert r.status_code == 200, r.text
    result = _call_bob(api, "ask_bob")
    assert (result["status"], result["reason"]) == ("failed", "secret_not_found"), result
    assert got == []


@pytest.mark.parametrize("carrier", ["agent_call", "ask_bob"])
def test_an_operator_endpoint_may_send_a_platform_secret_whatever_tool_carries_it(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]], carrier: str) -> None:
    """The writer's scope, both ways: the operator wrote this endpoint (config), so its
    reference reaches the platform secret even through a tenant's ``agent_call`` tool."""
    url, got = recorder
    _tenant_agent_call_tool(api)
    endpoint = AgentEndpoint.model_validate({**_endpoint(url + "/run", LEAKY_HEADERS),
                                             "origin": "config"})
    api.gw.registry.put_agent(Agent(name="bob", profile="callers", endpoint=endpoint),
                              replace=True)
    result = _call_bob(api, carrier)
    assert result["status"] == "succeeded", result
    assert len(got) == 1 and got[0]["Authorization"] == f"Bearer {OPS_TOKEN}"
    assert OPS_TOKEN not in json.dumps(result)  # redacted from what the agent sees


@pytest.mark.parametrize("place", ["api_key", "credentials_ref"])
def test_a_tenant_web_search_tool_never_reaches_a_platform_secret(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]], place: str) -> None:
    url, got = recorder
    created = api.call("POST", "/tools", json={
        "name": "search", "implementation_type": "builtin", "side_effect": "pure",
        "risk_default": "low", "input_schema": {"type": "object"},
        "implementation_config": {"builtin_key": "web_search", "endpoint": url + "/search",
                                  place: "${secret:serper/api_key}"},
        "policy": {"allowed_hosts": ["127.0.0.1"], "allowed_networks": ["127.0.0.0/8"]}})
    assert created.status_code == 201, created.text
    assert api.call("POST", f"/tools/{created.json()['id']}/publish").status_code == 200
    api.gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3),
                                        activations=(Activation(tool="search"),)), replace=True)
    r = api.execute("alice", "search", {"query": "q"})
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["reason"]) == ("failed", "secret_not_found"), r.text
    assert got == []


def test_an_agents_arguments_are_never_resolved(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    """``http_request`` sends the headers the agent wrote: a reference there is text."""
    url, got = recorder
    api.gw.registry.register(definition(
        "http_request", policy={"allowed_hosts": ["127.0.0.1"], "allowed_methods": ["POST"],
                                "allowed_networks": ["127.0.0.0/8"]}))
    api.gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3), activations=(
        Activation(tool="http_request"),)), replace=True)
    r = api.execute("alice", "http_request", {
        "method": "POST", "url": url + "/x", "headers": {"X-Api-Key": "${secret:ops/token}"},
        "body": "{}"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "succeeded", r.text
    assert len(got) == 1 and got[0]["X-Api-Key"] == "${secret:ops/token}"


def test_a_tenant_edit_of_an_operator_tools_wiring_loses_the_platform_secret(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]]) -> None:
    """An operator's http tool of the tenant sends ``ops/token`` to the operator's host; a
    tenant admin re-points it (``PUT /tools/{id}``) at its own host: the reference now sits
    in a record the tenant wrote, so it reaches the tenant's credentials only."""
    url, got = recorder
    api.gw.registry.register(ToolDefinition(
        name="ops_probe", origin="config", implementation_type="http",
        side_effect=SideEffect.IDEMPOTENT, risk_default=Risk.LOW,
        input_schema={"type": "object"},
        implementation={"url": "http://127.0.0.1:9/operator", "method": "POST",
                        "headers": {"Authorization": "Bearer ${secret:ops/token}"},
                        "allowed_networks": ["127.0.0.0/8"]}), tenant_id="default")
    tool_id = api.tool_id("ops_probe")
    edited = api.call("PUT", f"/tools/{tool_id}", json={"implementation_config": {
        "url": url + "/tenant", "method": "POST",
        "headers": {"Authorization": "Bearer ${secret:ops/token}"},
        "allowed_networks": ["127.0.0.0/8"]}})
    assert edited.status_code == 200, edited.text
    published = api.call("POST", f"/tools/{tool_id}/version?new_version=1.1.0")
    assert published.status_code == 200, published.text
    api.gw.registry.put_profile(Profile(name="callers", autonomy=Autonomy(3), activations=(
        Activation(tool="ops_probe"),)), replace=True)
    r = api.execute("alice", "ops_probe", {})
    assert r.status_code == 200, r.text
    assert (r.json()["status"], r.json()["reason"]) == ("failed", "secret_not_found"), r.text
    assert got == []


# the rule, broken on purpose: the tests above must catch the leak ----------------------

def test_the_leak_test_catches_a_platform_fallback_for_tenant_written_references(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scope_rule, "platform_allowed", lambda written_by: True)
    url, got = recorder
    _, leaked = tenant_endpoint_leak(api, url, got)
    assert leaked == [OPS_TOKEN, SERPER_KEY]


def test_the_leak_test_catches_a_look_up_in_the_carrying_tools_scope(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 8's own bug: the endpoint's references resolved as the global tool's."""
    from toolkeeper.builtins import agent_call

    monkeypatch.setattr(agent_call, "endpoint_writer", lambda endpoint: None)
    url, got = recorder
    _, leaked = tenant_endpoint_leak(api, url, got)
    assert leaked == [OPS_TOKEN, SERPER_KEY]


def test_the_leak_test_catches_a_look_up_across_tenants(
        api: RestClient, recorder: tuple[str, list[dict[str, str]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials looked up by name in any tenant: the other tenant's value arrives."""
    own = scope_rule.TenantCredentials.get

    def any_tenant(self: scope_rule.TenantCredentials, tenant_id: str,
                   connector: str | None, key: str) -> str | None:
        return own(self, tenant_id, connector, key) or own(self, "other", connector, key)

    monkeypatch.setattr(scope_rule.TenantCredentials, "get", any_tenant)
    url, got = recorder
    _, leaked = other_tenant_leak(api, url, got)
    assert leaked == ["other-tenants-key-5"]
