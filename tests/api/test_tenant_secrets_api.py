"""A tool a tenant defines through the API reaches its own tenant's credentials only —
never the operator's platform secrets, never another tenant's."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.api.identity_fixtures import identity_api
from tests.support.loopback import JsonHandler, serving
from tests.support.rest import RestClient
from toolkeeper import Activation, Agent, Autonomy, Profile, Risk, SideEffect, ToolDefinition
from toolkeeper.secrets.embedded import EmbeddedSecretsStore

PLATFORM_VALUE = "platform-secret-value-9d1e"


class _Echo(JsonHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.reply({"auth": self.headers.get("Authorization")})


@pytest.fixture
def api(tmp_path: Path) -> Iterator[RestClient]:
    with identity_api(tmp_path) as a:
        a.gw._secrets.set_secret("platform", "key", PLATFORM_VALUE)  # type: ignore[union-attr]
        a.gw.refresh_secrets()
        yield a


def _tool(api: RestClient, name: str, ref: str, url: str, admin: str = "admin") -> None:
    """A published API-defined http tool of ``admin``'s tenant sending ``ref``."""
    created = api.call("POST", "/tools", admin, json={
        "name": name, "implementation_type": "http", "side_effect": "idempotent",
        "risk_default": "low", "input_schema": {"type": "object"},
        "implementation_config": {"url": url, "method": "POST",
                                  "headers": {"Authorization": ref},
                                  "allowed_networks": ["127.0.0.0/8"]}})
    assert created.status_code == 201, created.text
    published = api.call("POST", f"/tools/{created.json()['id']}/publish", admin)
    assert published.status_code == 200, published.text


def _run(api: RestClient, name: str) -> dict[str, Any]:
    api.gw.registry.put_profile(Profile(name="hooks", autonomy=Autonomy(3),
                                        activations=(Activation(tool=name),)))
    api.gw.registry.put_agent(Agent(name="hook-bot", profile="hooks"))
    token = api.gw.store.tokens.create(tenant_id="default", role="agent", agent="hook-bot")[1]
    res = api.call("POST", "/tools/execute", who=token, json={"tool": name, "arguments": {}})
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body


def test_an_api_defined_tool_cannot_reach_a_platform_secret(api: RestClient) -> None:
    with serving(_Echo) as base:
        _tool(api, "exfil", "${secret:platform/key}", base + "/hook")
        result = _run(api, "exfil")
    assert (result["status"], result["reason"]) == ("failed", "secret_not_found")
    assert PLATFORM_VALUE not in json.dumps(result)


def test_an_api_defined_tool_uses_its_tenants_own_credential(api: RestClient) -> None:
    put = api.call("PUT", "/credentials/mine/key", json={"value": "tenant-owned-value-77"})
    assert put.status_code == 204, put.text
    with serving(_Echo) as base:
        _tool(api, "own", "${secret:mine/key}", base + "/hook")
        result = _run(api, "own")
    assert result["status"] == "succeeded", result
    assert result["output"] == {"auth": "***"}  # it reached the upstream, redacted here


# credentials are rows per tenant: names per tenant, no read-modify-write, no cross-over ------

ADMINS = {"default": "admin", "other": "other_admin"}


class _Digest(JsonHandler):
    """Answers with a digest of the Authorization header: which value arrived, unredacted."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        auth = (self.headers.get("Authorization") or "").encode()
        self.reply({"digest": hashlib.sha256(auth).hexdigest()})


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def both(db_url: str) -> Iterator[RestClient]:
    """The identity app (tenants ``default`` and ``other``) on SQLite and PostgreSQL."""
    with identity_api(db_url) as a:
        yield a


def _put(api: RestClient, tenant: str, name: str, value: str) -> int:
    return api.call("PUT", f"/credentials/{name}", ADMINS[tenant],
                    json={"value": value}).status_code


def _names(api: RestClient, tenant: str) -> list[str]:
    listing = api.call("GET", "/credentials", ADMINS[tenant])
    assert listing.status_code == 200, listing.text
    return [f"{c['connector']}/{c['key']}" for c in listing.json()]


def _probe(api: RestClient, tenant: str, name: str, ref: str, url: str) -> str:
    """An API-defined tool of ``tenant`` sending ``ref``; returns an agent token to call it."""
    _tool(api, name, ref, url, ADMINS[tenant])
    return _agent(api, tenant, name)


def _agent(api: RestClient, tenant: str, tool_name: str) -> str:
    api.gw.registry.put_profile(Profile(name=f"p-{tool_name}", tenant_id=tenant,
                                        autonomy=Autonomy(3),
                                        activations=(Activation(tool=tool_name),)))
    api.gw.registry.put_agent(Agent(name=f"a-{tool_name}", profile=f"p-{tool_name}",
                                    tenant_id=tenant))
    return api.gw.store.tokens.create(tenant_id=tenant, role="agent",
                                      agent=f"a-{tool_name}")[1]


def _sent(api: RestClient, token: str, tool_name: str) -> dict[str, Any]:
    res = api.call("POST", "/tools/execute", who=token, json={"tool": tool_name,
                                                              "arguments": {}})
    assert res.status_code == 200, res.text
    body: dict[str, Any] = res.json()
    return body


def test_concurrent_puts_of_two_tenants_lose_nothing_and_never_cross(both: RestClient) -> None:
    names = [f"c{i}/token" for i in range(24)]
    jobs = [(tenant, name) for name in names for tenant in ADMINS]
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda job: _put(both, job[0], job[1], f"{job[0]}:{job[1]}"),
                                 jobs))
    assert statuses == [204] * len(jobs)
    creds = both.gw.credentials
    assert creds is not None
    for tenant in ADMINS:
        assert _names(both, tenant) == sorted(names)
        for name in names:
            connector, _, key = name.partition("/")
            assert creds.get(tenant, connector, key) == f"{tenant}:{name}"


def test_a_put_of_another_tenants_name_makes_the_callers_own_credential(both: RestClient) -> None:
    assert _put(both, "other", "b0/token", "other-tenant-value-1") == 204
    # no 409, no hint that the name exists elsewhere: the caller's own credential
    assert _put(both, "default", "b0/token", "default-tenant-value-1") == 204
    assert _names(both, "default") == ["b0/token"]
    assert _names(both, "other") == ["b0/token"]
    with serving(_Digest) as base:
        mine = _probe(both, "default", "probe", "${secret:b0/token}", base + "/p")
        theirs = _probe(both, "other", "probe", "${secret:b0/token}", base + "/p")
        assert _sent(both, mine, "probe")["output"] == {
            "digest": _digest("default-tenant-value-1")}
        assert _sent(both, theirs, "probe")["output"] == {
            "digest": _digest("other-tenant-value-1")}


def test_listing_and_deleting_see_only_the_callers_tenant(both: RestClient) -> None:
    assert _put(both, "other", "theirs/key", "other-only-value-1") == 204
    assert _put(both, "other", "shared/key", "other-shared-value") == 204
    assert _put(both, "default", "shared/key", "default-shared-value") == 204
    assert _names(both, "default") == ["shared/key"]
    assert _names(both, "other") == ["shared/key", "theirs/key"]
    gone = both.call("DELETE", "/credentials/theirs/key", "admin")
    never = both.call("DELETE", "/credentials/nobody/key", "admin")
    assert (gone.status_code, never.status_code) == (404, 404)
    assert gone.json()["error"]["message"].replace("theirs", "nobody") == (
        never.json()["error"]["message"])  # the same answer: nothing tells them apart
    assert both.call("DELETE", "/credentials/shared/key", "admin").status_code == 204
    assert _names(both, "default") == []
    assert _names(both, "other") == ["shared/key", "theirs/key"]
    assert both.gw.credentials is not None
    assert both.gw.credentials.get("other", "shared", "key") == "other-shared-value"


def test_an_operator_tool_uses_the_tenants_credential_else_the_platform_secret(
        both: RestClient) -> None:
    creds = both.gw.runtime.secrets
    assert isinstance(creds, EmbeddedSecretsStore)
    creds.set_secret("platform", "key", PLATFORM_VALUE)
    both.gw.refresh_secrets()
    with serving(_Digest) as base:
        both.gw.registry.register(ToolDefinition(
            name="op_probe", implementation_type="http", side_effect=SideEffect.IDEMPOTENT,
            risk_default=Risk.LOW, input_schema={"type": "object"},
            implementation={"url": base + "/p", "method": "POST",
                            "headers": {"Authorization": "${secret:platform/key}"},
                            "allowed_networks": ["127.0.0.0/8"]}))
        assert _put(both, "default", "platform/key", "default-own-platform-key") == 204
        mine, theirs = _agent(both, "default", "op_probe"), _agent(both, "other", "op_probe")
        assert _sent(both, mine, "op_probe")["output"] == {
            "digest": _digest("default-own-platform-key")}
        assert _sent(both, theirs, "op_probe")["output"] == {"digest": _digest(PLATFORM_VALUE)}
    assert both.gw.run_sync(creds.get_secret("platform", "key")) == PLATFORM_VALUE
