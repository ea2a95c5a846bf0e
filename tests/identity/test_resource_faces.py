"""toolkeeper as an OAuth 2.1 protected resource, against the real IdP (tests/support/idp.py):
RFC 9728 metadata, RFC 6750 challenges on REST and ``/mcp``, an MCP SDK client that finds
the authorization server from ``/mcp``'s 401 and calls a governed tool, scopes a token lacks
(narrowed listings and calls, the ``insufficient_scope`` step-up challenge), a key rotated at
the provider, ``tk_tokens: false``, and a client's token never reaching an upstream."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml

from tests.support.idp import Idp, client
from tests.support.loopback import serving_app
from tests.support.serve import free_port
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.bench.procs import listening
from toolkeeper.config.identity import IdentityConfig

UPSTREAM = Path(__file__).resolve().parents[1] / "mcp" / "upstream_fixture.py"
LEGACY = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SCOPES = "tools:call tools:wire"


@dataclass
class World:
    gw: Gateway
    base: str
    idp: Idp
    secret: str
    tk_token: str

    @property
    def mcp(self) -> str:
        return self.base + "/mcp"

    def token(self, scope: str = SCOPES, resource: str | None = None) -> str:
        got = self.idp.client_credentials("bot", self.secret, scope=scope,
                                          resource=resource or self.base)
        return str(got["access_token"])


def _config(tmp: Path, base: str, idp: Idp, upstream: str) -> Path:
    doc = {"version": 1, "secrets": {"backend": "env"},
           "servers": [{"name": "fx", "url": f"{upstream}/mcp",
                        "tools": {"whoami": {"side_effect": "pure", "risk": "low"}}}],
           "tools": [{"native": "tests.identity.resource_tools:add"},
                     {"native": "tests.identity.resource_tools:wire"}],
           "profiles": [{"name": "p", "autonomy": 3, "scopes": ["wire"],
                         "activations": [{"tool": "add"}, {"tool": "wire"},
                                         {"tool": "fx_whoami"}]}],
           "agents": [{"name": "bot", "profile": "p"}],
           "identity": {"resource": base, "issuers": [{
               "issuer": idp.issuer, "required_typ": "at+jwt", "jwks_refetch_interval_s": 0,
               "claims": {"tenant": "default", "agent_claim": "client_id",
                          "roles": [{"claim": "groups", "value": "tk-approvers",
                                     "role": "approver", "tenant": "default"}],
                          "scopes": {"tools:call": ["call"], "tools:wire": ["wire"]}}}]}}
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("rs")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    for resource in (base, base + "/mcp"):
        idp.add_resource(resource, scope=SCOPES)
    secret = idp.add_client(client("bot", scope=SCOPES))["client_secret"]
    with listening([sys.executable, str(UPSTREAM), "http", "{port}"]) as upstream, \
            Gateway.open(f"sqlite:///{tmp}/tk.db",
                         config=_config(tmp, base, idp, upstream)) as gw:
        tk = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]
        app = create_app(gw, ApiSettings())
        with serving_app(app, what="toolkeeper", port=port, lifespan="on"):
            yield World(gw=gw, base=base, idp=idp, secret=secret, tk_token=tk)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _execute(w: World, token: str, tool: str, **arguments: Any) -> httpx.Response:
    return httpx.post(f"{w.base}/tools/execute", headers=_bearer(token), timeout=20,
                      json={"tool": tool, "arguments": arguments})


def _rpc(w: World, token: str | None, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(w.mcp, headers={**LEGACY, **(_bearer(token) if token else {})},
                      json=body, timeout=20)


def test_protected_resource_metadata_names_the_idp(world: World) -> None:
    for path, resource in (("", world.base), ("/mcp", world.mcp)):
        doc = httpx.get(f"{world.base}/.well-known/oauth-protected-resource{path}",
                        timeout=10).json()
        assert doc["resource"] == resource
        assert doc["authorization_servers"] == [world.idp.issuer]
        assert doc["scopes_supported"] == ["tools:call", "tools:wire"]
        assert doc["bearer_methods_supported"] == ["header"]


def test_metadata_is_not_found_without_issuers(tmp_path: Path) -> None:
    with Gateway.open(f"sqlite:///{tmp_path}/tk.db") as gw:
        transport = httpx.ASGITransport(app=create_app(gw, ApiSettings(mcp=False)))

        async def get() -> int:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                r = await http.get("/.well-known/oauth-protected-resource")
                return r.status_code
        assert anyio.run(get) == 404


def test_a_401_without_a_token_names_the_metadata_and_the_scopes(world: World) -> None:
    rest = httpx.get(f"{world.base}/me", timeout=10)
    mcp = _rpc(world, None, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    for answer, path in ((rest, ""), (mcp, "/mcp")):
        assert answer.status_code == 401
        challenge = answer.headers["www-authenticate"]
        assert f'resource_metadata="{world.base}/.well-known/oauth-protected-resource{path}"' \
            in challenge
        assert f'scope="{SCOPES}"' in challenge and "error=" not in challenge


def test_a_refused_token_is_invalid_token_on_rest_and_mcp(world: World) -> None:
    other = "http://127.0.0.1/not-toolkeeper"
    world.idp.add_resource(other, scope=SCOPES)
    wrong_audience = world.token(resource=other)
    for answer in (httpx.get(f"{world.base}/me", headers=_bearer(wrong_audience), timeout=10),
                   _rpc(world, wrong_audience, {"jsonrpc": "2.0", "id": 1,
                                                "method": "tools/list"})):
        assert answer.status_code == 401
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]
        assert "another audience" in answer.text and wrong_audience not in answer.text


def test_expired_and_early_tokens_from_the_provider_are_refused(world: World) -> None:
    now = int(time.time())
    base = {"iss": world.idp.issuer, "aud": world.base, "client_id": "bot", "sub": "bot",
            "scope": SCOPES, "iat": now - 7200}
    for claims, why in (({"exp": now - 3600}, "expired"),
                        ({"exp": now + 3600, "nbf": now + 1800}, "not valid yet")):
        token = world.idp.sign({**base, **claims})
        answer = httpx.get(f"{world.base}/me", headers=_bearer(token), timeout=10)
        assert answer.status_code == 401 and why in answer.json()["error"]["message"]


def test_a_rest_call_with_a_jwt_runs_as_the_agent(world: World) -> None:
    token = world.token()
    me = httpx.get(f"{world.base}/me", headers=_bearer(token), timeout=10).json()
    assert me["agent"] == "bot"
    for _ in range(2):  # the second is answered from the verified-token cache (lean path)
        answer = _execute(world, token, "add", a=2, b=3)
        assert answer.status_code == 200 and answer.json()["output"] == 5, answer.text


def _list(w: World, token: str) -> httpx.Response:
    """A stateless (2026-07-28) ``tools/list``."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}}
    return httpx.post(w.mcp, json=body, timeout=20, headers={
        **LEGACY, **_bearer(token), "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list"})


def test_a_token_narrows_the_profile_scopes_in_listings_and_calls(world: World) -> None:
    narrow = world.token(scope="tools:call")
    listed = _list(world, narrow)
    full = _list(world, world.token())
    names = {t["name"] for t in _result(listed)["tools"]}
    assert "add" in names and "wire" not in names
    assert "wire" in {t["name"] for t in _result(full)["tools"]}
    stopped = _execute(world, narrow, "wire", amount=1).json()
    assert stopped["reason"] == "scope_missing", stopped
    assert _execute(world, world.token(), "wire", amount=1).json()["output"] == {"wired": 1}


def test_an_mcp_call_the_token_lacks_scope_for_gets_the_step_up_challenge(
        world: World) -> None:
    narrow = world.token(scope="tools:call")
    answer = _rpc(world, narrow, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "wire", "arguments": {"amount": 1}}})
    assert answer.status_code == 403
    challenge = answer.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="tools:wire"' in challenge
    assert "resource_metadata=" in challenge


def _result(answer: httpx.Response) -> dict[str, Any]:
    import json

    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    out: dict[str, Any] = json.loads(text)["result"]
    return out


async def _mcp_client_call(w: World) -> tuple[Any, Any]:
    import httpx2
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    class Memory:
        tokens: Any = None
        client: Any = None

        async def get_tokens(self) -> Any:
            return self.tokens

        async def set_tokens(self, tokens: Any) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> Any:
            return self.client

        async def set_client_info(self, info: Any) -> None:
            self.client = info

    storage = Memory()
    auth = ClientCredentialsOAuthProvider(w.mcp, storage, "bot", w.secret,
                                          issuer=w.idp.issuer)
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(auth=auth, timeout=20) as http, \
                Client(streamable_http_client(w.mcp, http_client=http)) as mcp_client:
            result = await mcp_client.call_tool("add", {"a": 20, "b": 22})
    return result, storage.tokens


def test_an_mcp_client_discovers_the_idp_from_the_401_and_calls_a_governed_tool(
        world: World) -> None:
    result, tokens = anyio.run(_mcp_client_call, world)
    assert not result.is_error and result.structured_content == {"result": 42}, result
    assert tokens is not None and set(tokens.scope.split()) == set(SCOPES.split())


def test_a_key_rotated_at_the_provider_is_picked_up(world: World) -> None:
    before = world.token()
    assert httpx.get(f"{world.base}/me", headers=_bearer(before), timeout=10).status_code == 200
    world.idp.rotate_keys()
    after = world.token()
    answer = httpx.get(f"{world.base}/me", headers=_bearer(after), timeout=10)
    assert answer.status_code == 200, answer.text


def test_the_client_token_never_reaches_an_upstream(world: World) -> None:
    token = world.token()
    seen = _execute(world, token, "fx_whoami").json()
    assert seen["status"] == "succeeded", seen
    assert seen["output"] in ("", None), seen  # the Authorization header it saw: none
    assert token not in str(seen)


def test_tk_tokens_off_refuses_them_on_rest_and_mcp(world: World) -> None:
    assert httpx.get(f"{world.base}/me", headers=_bearer(world.tk_token),
                     timeout=10).status_code == 200
    saved, bearers = world.gw.identity_config, world.gw._bearers
    world.gw.identity_config = IdentityConfig.model_validate(
        {**saved.model_dump(), "tk_tokens": False})
    world.gw._bearers = None
    try:
        rest = httpx.get(f"{world.base}/me", headers=_bearer(world.tk_token), timeout=10)
        mcp = _rpc(world, world.tk_token, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        for answer in (rest, mcp):
            assert answer.status_code == 401 and "turned off" in answer.text
        assert httpx.get(f"{world.base}/me", headers=_bearer(world.token()),
                         timeout=10).status_code == 200
    finally:
        world.gw.identity_config, world.gw._bearers = saved, bearers


def _with_introspection(w: World, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, str]:
    """The world's issuer, also introspecting opaque tokens for ``<base>/opaque``."""
    opaque = w.base + "/opaque"
    w.idp.add_resource(opaque, scope=SCOPES, format="opaque")
    who, secret = w.idp.introspector
    monkeypatch.setenv("TOOLKEEPER_SECRET_IDP__INTROSPECTION", secret)
    saved, bearers = w.gw.identity_config, w.gw._bearers
    doc = saved.model_dump()
    doc["issuers"][0].update(
        audiences=[w.base, w.mcp, opaque],
        introspection={"endpoint": w.idp.endpoint("introspection_endpoint"),
                       "client_id": who, "client_secret": "${secret:idp/introspection}"})
    w.gw.identity_config = IdentityConfig.model_validate(doc)
    w.gw._bearers = None
    return saved, bearers, opaque


def test_an_opaque_token_is_introspected_and_a_revoked_one_refused(
        world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    saved, bearers, opaque = _with_introspection(world, monkeypatch)
    try:
        token = world.token(resource=opaque)
        assert token.count(".") != 2  # opaque, not a JWT
        answer = _execute(world, token, "add", a=1, b=1)
        assert answer.status_code == 200 and answer.json()["output"] == 2, answer.text
        revoked = world.token(resource=opaque)
        world.idp.revoke(revoked)
        refused = httpx.get(f"{world.base}/me", headers=_bearer(revoked), timeout=10)
        assert refused.status_code == 401 and "not active" in refused.text
        assert secret_free(refused.text, world.idp.introspector[1])
        elsewhere = "http://127.0.0.1/elsewhere"
        world.idp.add_resource(elsewhere, scope=SCOPES, format="opaque")
        foreign = httpx.get(f"{world.base}/me", timeout=10,
                            headers=_bearer(world.token(resource=elsewhere)))
        assert foreign.status_code == 401 and "another audience" in foreign.text
    finally:
        world.gw.identity_config, world.gw._bearers = saved, bearers


def secret_free(text: str, secret: str) -> bool:
    return secret not in text


def test_an_oversized_token_is_refused_on_rest_and_mcp(world: World) -> None:
    huge = "x" * 9000  # under the server's header cap, over the token cap
    for answer in (httpx.get(f"{world.base}/me", headers=_bearer(huge), timeout=10),
                   _rpc(world, huge, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})):
        assert answer.status_code == 401 and "longer than 8192" in answer.text
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]


def test_a_person_in_the_approvers_group_is_an_approver_and_others_are_forbidden(
        world: World) -> None:
    alice = world.idp.login_code_flow("console", "alice", scope="openid tools:call",
                                      resource=world.base)["access_token"]
    me = httpx.get(f"{world.base}/me", headers=_bearer(alice), timeout=10)
    assert me.status_code == 200 and "approver" in me.text and "alice@acme.test" in me.text
    not_an_agent = _rpc(world, alice, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert not_an_agent.status_code == 403
    bob = world.idp.login_code_flow("console", "bob", scope="openid tools:call",
                                    resource=world.base)["access_token"]
    refused = httpx.get(f"{world.base}/me", headers=_bearer(bob), timeout=10)
    assert refused.status_code == 403 and refused.json()["error"]["reason"] == "forbidden"
    assert "maps to no agent" in refused.text
    assert "invalid_token" not in refused.headers["www-authenticate"]
