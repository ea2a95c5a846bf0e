"""OAuth to upstreams, against the real IdP (tests/support/idp.py) and an upstream MCP
server + HTTP endpoint that require its tokens (tests/support/oauth_upstream.py): client
credentials for an MCP server and an ``http`` tool, a token renewed before expiry, a token
revoked at the IdP (401 → one renewal → success), a disabled client (clear reason, one
renewal, no loop), token exchange on behalf of the calling agent (REST, OAuth principal),
and no token anywhere it must not be (result, audit, logs, the upstream never sees the
agent's own token)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml
from sqlalchemy import text

from tests.support.idp import TOKEN_EXCHANGE, Idp, client
from tests.support.loopback import serving_app
from tests.support.oauth_upstream import OAuthUpstream, sha256, start_oauth_upstream
from tests.support.serve import free_port
from toolkeeper import Gateway
from toolkeeper.api import ApiSettings, create_app
from toolkeeper.model.enums import CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.secrets.embedded import EmbeddedSecretsStore, generate_key_file, read_key_file
from toolkeeper.store import Store

PURE = {"side_effect": "pure", "risk": "low"}
OVERRIDES = {"whoami": PURE, "echo": PURE}
SCOPES = "tools:call"


@dataclass
class World:
    gw: Gateway
    base: str
    idp: Idp
    up: OAuthUpstream
    short: OAuthUpstream
    intro: OAuthUpstream
    disabled: OAuthUpstream
    bot_secret: str
    tk_token: str

    def agent_token(self, resource: str | None = None) -> str:
        got = self.idp.client_credentials("bot", self.bot_secret, scope=SCOPES,
                                          resource=resource or self.base)
        return str(got["access_token"])

    def call(self, tool: str, **arguments: Any) -> Any:
        return self.gw.call_sync(tool, "run", arguments, agent="bot")


def _oauth(idp: Idp, up: OAuthUpstream, client_id: str, **extra: Any) -> dict[str, Any]:
    return {"token_endpoint": idp.endpoint("token_endpoint"), "client_id": client_id,
            "client_secret": f"${{secret:idp/{client_id}}}", "scope": "upstream:call",
            "resource": up.resource, **extra}


def _config(tmp: Path, base: str, idp: Idp, w: dict[str, OAuthUpstream]) -> Path:
    server = {"tools": OVERRIDES, "side_effect": "pure", "risk": "low"}
    doc = {
        "version": 1,
        "servers": [
            {"name": "up", "url": w["up"].mcp_url, **server,
             "oauth": _oauth(idp, w["up"], "tk-up")},
            {"name": "short", "url": w["short"].mcp_url, **server,
             "oauth": _oauth(idp, w["short"], "tk-up", refresh_skew_s=3)},
            {"name": "intro", "url": w["intro"].mcp_url, **server,
             "oauth": _oauth(idp, w["intro"], "tk-up")},
            {"name": "dis", "url": w["disabled"].mcp_url, **server,
             "oauth": _oauth(idp, w["disabled"], "tk-dis")},
            {"name": "xch", "url": w["up"].mcp_url, **server,
             "oauth": _oauth(idp, w["up"], "tk-up", grant="token_exchange",
                             subject="agent", issuer=idp.issuer, token_endpoint=None)},
        ],
        "tools": [{"name": "api_wrong", "implementation_type": "http",
                   "side_effect": "pure", "risk_default": "low",
                   "implementation": {"url": w["intro"].echo_url,
                                      "allowed_networks": ["127.0.0.0/8"],
                                      # a token for another resource: refused every time
                                      "oauth": _oauth(idp, w["up"], "tk-up")}},
                  {"name": "api_xch", "implementation_type": "http",
                   "side_effect": "pure", "risk_default": "low",
                   "implementation": {"url": w["up"].echo_url,
                                      "allowed_networks": ["127.0.0.0/8"],
                                      "oauth": _oauth(idp, w["up"], "tk-up",
                                                      grant="token_exchange",
                                                      subject="agent")}},
                  {"name": "api_guarded", "implementation_type": "http",
                   "side_effect": "pure", "risk_default": "low",
                   "implementation": {"url": w["up"].echo_url,
                                      "allowed_networks": ["127.0.0.1/32"],
                                      # a token endpoint outside the tool's networks
                                      "oauth": {**_oauth(idp, w["up"], "tk-up"),
                                                "token_endpoint": idp.endpoint(
                                                    "token_endpoint").replace(
                                                    "127.0.0.1", "127.0.0.2")}}},
                  {"name": "api_echo", "implementation_type": "http",
                   "side_effect": "pure", "risk_default": "low",
                   "input_schema": {"type": "object", "properties": {
                       "hello": {"type": "string"}}},
                   "implementation": {"url": w["up"].echo_url,
                                      "allowed_networks": ["127.0.0.0/8"],
                                      "oauth": _oauth(idp, w["up"], "tk-up")}}],
        "profiles": [{"name": "p", "autonomy": 3, "activations": [
            {"tool": t} for t in ("up_whoami", "up_echo", "short_whoami", "intro_whoami",
                                  "dis_whoami", "xch_whoami", "api_echo", "api_wrong",
                                  "api_xch", "api_guarded")]}],
        "agents": [{"name": "bot", "profile": "p"}],
        "identity": {"resource": base, "issuers": [{
            "issuer": idp.issuer, "required_typ": "at+jwt", "jwks_refetch_interval_s": 0,
            "claims": {"tenant": "default", "agent_claim": "client_id",
                       "scopes": {"tools:call": ["call"]}}}]},
    }
    path = tmp / "toolkeeper.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def world(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("up")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    idp.add_resource(base, scope=SCOPES)
    idp.add_resource(base + "/mcp", scope=SCOPES)
    bot_secret = idp.add_client(client("bot", scope=SCOPES))["client_secret"]
    secrets = {cid: idp.add_client(client(cid, grant_types=["client_credentials",
                                                            TOKEN_EXCHANGE]))["client_secret"]
               for cid in ("tk-up", "tk-dis")}
    url = f"sqlite:///{tmp}/tk.db"
    key_file = tmp / "secrets.key"
    generate_key_file(key_file)
    store = Store.open(url)
    sealer = EmbeddedSecretsStore(store.blobs, read_key_file(key_file, "key"))
    for cid, secret in secrets.items():
        sealer.set_secret("idp", cid, secret)
    store.close()
    with start_oauth_upstream(idp, tmp, mode="jwt") as up, \
            start_oauth_upstream(idp, tmp, mode="jwt", ttl_s=5) as short, \
            start_oauth_upstream(idp, tmp, mode="introspect") as intro, \
            start_oauth_upstream(idp, tmp, mode="introspect") as disabled:
        ups = {"up": up, "short": short, "intro": intro, "disabled": disabled}
        with Gateway.open(url, config=_config(tmp, base, idp, ups), secrets="embedded",
                          secrets_key_file=key_file) as gw:
            tk = gw.store.tokens.create(tenant_id="default", role="agent", agent="bot")[1]
            with serving_app(create_app(gw, ApiSettings()), what="toolkeeper", port=port,
                             lifespan="on"):
                yield World(gw=gw, base=base, idp=idp, up=up, short=short, intro=intro,
                            disabled=disabled, bot_secret=bot_secret, tk_token=tk)


def _everything(gw: Gateway) -> str:
    gw.flush()
    with gw.store.db.engine.connect() as conn:
        parts = []
        for table in ("audit_events", "outcomes", "approvals", "side_effects"):
            parts += [repr(tuple(r)) for r in conn.execute(text(f"SELECT * FROM {table}"))]
    return "\n".join(parts)


def _tokens_of(gw: Gateway) -> Any:
    return gw.upstreams.tokens


def _tk_up_secret(world: World) -> str:
    secrets = world.gw._secrets
    assert secrets is not None
    return str(asyncio.run(secrets.get_secret("idp", "tk-up")))


def _cached(gw: Gateway, upstream: str) -> str:
    """The token the gateway holds for ``upstream`` now (white-box: to revoke it, or to
    make an upstream echo it)."""
    found = [t.value for k, t in _tokens_of(gw)._cache.items() if k[1] == upstream]
    assert len(found) == 1, found
    return str(found[0])


def test_an_mcp_tool_of_an_oauth_upstream_runs_with_a_client_credentials_token(
        world: World) -> None:
    res = world.call("up_whoami")
    assert res.status is CallStatus.SUCCEEDED, res
    who = res.output if isinstance(res.output, dict) else res.mcp["structuredContent"]
    who = who.get("result", who)
    assert who["client_id"] == "tk-up" and who["sub"] == "tk-up"
    assert who["aud"] == world.up.resource and "upstream:call" in who["scope"]
    assert any(s["accepted"] for s in world.up.seen())
    # the token is stored as a credential, sealed for the (pseudo-)tenant, not readable
    # by the tenant's own ``${secret:…}`` references
    creds = world.gw.credentials
    assert creds is not None
    names = creds.names("oauth~")
    assert names and names[0][0] == "upstream-oauth"
    assert creds.names("default") == []


def test_a_stored_token_serves_a_restarted_process_and_is_sealed(world: World) -> None:
    from toolkeeper.identity.upstream import UpstreamTokens

    assert world.call("up_whoami").status is CallStatus.SUCCEEDED
    held = _cached(world.gw, "up")
    secrets = world.gw._secrets
    assert secrets is not None
    oauth = world.gw.upstreams.config("up").oauth
    restarted = UpstreamTokens(credentials=world.gw.credentials, platform=secrets.get_secret)

    async def get(tenant: str) -> str:
        return await restarted.bearer(oauth, tenant_id=tenant, upstream="up").current()

    assert anyio.run(get, "") == held and restarted.fetches == 0  # read from its row
    assert anyio.run(get, "other") != held and restarted.fetches == 1  # never another's
    rows = world.gw.store.credentials.rows()
    assert rows and not any(held.encode() in data for *_, data in rows)  # sealed


def test_an_http_tool_gets_the_bearer_token_and_the_result_never_shows_it(
        world: World) -> None:
    res = world.call("api_echo", hello="world")
    assert res.status is CallStatus.SUCCEEDED, (res.reason, res.message)
    assert res.output["echo"] == {"hello": "world"} and res.output["client_id"] == "tk-up"
    assert any(s["accepted"] for s in world.up.seen())


def test_an_http_tools_token_endpoint_is_reached_under_its_network_rules(
        world: World) -> None:
    res = world.call("api_guarded")
    assert (res.status, res.reason) != (CallStatus.SUCCEEDED, None)
    assert res.reason == Reason.ADDRESS_NOT_ALLOWED, (res.reason, res.message)


def test_a_token_the_upstream_echoes_is_masked_in_the_result(world: World) -> None:
    assert world.call("up_whoami").status is CallStatus.SUCCEEDED
    values = [_cached(world.gw, "up")]
    res = world.call("up_echo", text=" ".join(values))
    assert res.status is CallStatus.SUCCEEDED, res
    shown = repr(res.output) + repr(res.mcp)
    assert values and not any(v in shown for v in values), shown
    assert "***" in shown


def _held_expiry(gw: Gateway, upstream: str) -> float:
    found = [t.expires_at for k, t in _tokens_of(gw)._cache.items() if k[1] == upstream]
    assert len(found) == 1, found
    return float(found[0])


def test_a_token_is_renewed_before_it_expires(world: World) -> None:
    tokens = _tokens_of(world.gw)
    skew = 3.0  # the short upstream: ttl 5 s, refresh_skew_s 3 s — fresh for 2 s
    assert world.call("short_whoami").status is CallStatus.SUCCEEDED
    # the token held may be one fetched a while ago (listing tools): wait until it is
    # within the skew, so the next call renews it and the clock starts from a new token
    time.sleep(max(0.0, _held_expiry(world.gw, "short") - skew - time.time() + 0.2))
    before = tokens.fetches
    first = world.call("short_whoami")
    assert first.status is CallStatus.SUCCEEDED and tokens.fetches == before + 1, first
    renewed_at = _held_expiry(world.gw, "short") - 5.0
    again = world.call("short_whoami")  # still fresh: the cached token serves
    assert again.status is CallStatus.SUCCEEDED and tokens.fetches == before + 1
    time.sleep(max(0.0, renewed_at + 2.5 - time.time()))  # within the skew, not expired
    last = world.call("short_whoami")
    assert last.status is CallStatus.SUCCEEDED, last
    assert tokens.fetches == before + 2
    seen = world.short.seen()
    assert all(s["accepted"] for s in seen), seen  # renewed before any 401
    assert len({s["sha256"] for s in seen}) >= 2


def test_a_token_revoked_at_the_idp_is_renewed_once_and_the_call_succeeds(
        world: World) -> None:
    assert world.call("intro_whoami").status is CallStatus.SUCCEEDED
    refused_before = sum(not s["accepted"] for s in world.intro.seen())
    assert world.idp.revoke(_cached(world.gw, "intro")) == 1
    res = world.call("intro_whoami")
    assert res.status is CallStatus.SUCCEEDED, res
    seen = world.intro.seen()
    assert sum(not s["accepted"] for s in seen) == refused_before + 1  # one 401, one renewal
    assert seen[-1]["accepted"]


def test_a_disabled_client_stops_the_call_with_a_clear_reason_and_no_loop(
        world: World) -> None:
    assert world.call("dis_whoami").status is CallStatus.SUCCEEDED
    tokens = _tokens_of(world.gw)
    assert world.idp.revoke(_cached(world.gw, "dis")) == 1
    world.idp.disable_client("tk-dis")
    try:
        before, seen_before = tokens.fetches, len(world.disabled.seen())
        res = world.call("dis_whoami")
        assert (res.status, res.reason) == (CallStatus.FAILED, Reason.UPSTREAM_UNAUTHORIZED)
        assert "invalid_client" in (res.message or ""), res.message
        # one 401 upstream, one refused renewal, nothing more
        assert len(world.disabled.seen()) == seen_before + 1
        assert tokens.fetches == before + 1
    finally:
        world.idp.enable_client("tk-dis")


def test_an_http_upstream_refusing_the_renewed_token_stops_after_one_renewal(
        world: World) -> None:
    tokens = _tokens_of(world.gw)
    before, seen_before = tokens.fetches, len(world.intro.seen())
    res = world.call("api_wrong")
    assert (res.status, res.reason) == (CallStatus.FAILED, Reason.UPSTREAM_UNAUTHORIZED), res
    assert len(world.intro.seen()) == seen_before + 2  # the first token, the renewed one
    assert tokens.fetches <= before + 2  # (the first may have been cached: api_echo's)


def test_an_mcp_upstream_refusing_the_renewed_token_stops_after_one_renewal(
        world: World) -> None:
    from toolkeeper.upstream.errors import TokenRejected
    from toolkeeper.upstream.http_client import LeanHttpClient

    secret = _tk_up_secret(world)

    class WrongAudience:
        """Tokens for another upstream (``up``): ``intro`` refuses each of them."""

        renewals = 0

        async def current(self) -> str:
            return str(world.idp.client_credentials(
                "tk-up", secret, scope="upstream:call",
                resource=world.up.resource)["access_token"])

        async def renew(self, stale: str) -> str:
            self.renewals += 1
            return await self.current()

    source = WrongAudience()
    seen_before = len(world.intro.seen())

    async def connect() -> None:
        lean = LeanHttpClient(world.intro.mcp_url, headers={}, timeout_s=10,
                              connect_timeout_s=10, auth=source)
        try:
            await lean.start()
        finally:
            await lean.aclose()

    with pytest.raises(TokenRejected, match="renewed"):
        asyncio.run(connect())
    assert source.renewals == 1
    assert len(world.intro.seen()) == seen_before + 2


def test_token_exchange_acts_for_the_calling_agent_whose_token_never_goes_upstream(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    agent_token = world.agent_token()
    caplog.set_level(logging.DEBUG)
    world.gw.redact_logs()
    answer = httpx.post(f"{world.base}/tools/execute", timeout=30,
                        headers={"Authorization": f"Bearer {agent_token}"},
                        json={"tool": "xch_whoami", "arguments": {}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "succeeded", body
    out = body["output"]
    who = out.get("result", out) if isinstance(out, dict) else out
    assert who["sub"] == "bot" and who["act"] == {"sub": "tk-up"}, who
    assert sha256(agent_token) not in {s["sha256"] for s in world.up.seen()}
    everything = _everything(world.gw) + answer.text + caplog.text
    assert agent_token not in everything


async def _mcp_whoami(url: str, token: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    with anyio.fail_after(60):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                      timeout=20) as http, \
                Client(streamable_http_client(url, http_client=http)) as mcp_client:
            return await mcp_client.call_tool("xch_whoami", {})


def test_token_exchange_from_an_mcp_client_acts_for_it(world: World) -> None:
    agent_token = world.agent_token(world.base + "/mcp")
    result = anyio.run(_mcp_whoami, world.base + "/mcp", agent_token)
    assert not result.is_error, result
    who = result.structured_content
    who = who.get("result", who)
    assert who["sub"] == "bot" and who["act"] == {"sub": "tk-up"}, who
    assert sha256(agent_token) not in {s["sha256"] for s in world.up.seen()}
    # and statelessly (2026-07-28), the face's lean path
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    answer = httpx.post(world.base + "/mcp", timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "xch_whoami", "arguments": {}, "_meta": meta}}, headers={
        "Authorization": f"Bearer {agent_token}", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "xch_whoami",
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json"})
    assert answer.status_code == 200, answer.text
    stateless = answer.json()["result"]["structuredContent"]
    assert stateless.get("result", stateless)["act"] == {"sub": "tk-up"}, answer.text
    assert "tk-up" in answer.text and agent_token not in answer.text


def test_the_sdk_clients_auth_renews_once_on_401(world: World) -> None:
    import httpx2

    from toolkeeper.upstream.pool import _bearer_auth

    secret = _tk_up_secret(world)

    class Source:
        renewals = 0
        first: str | None = None

        async def current(self) -> str:
            if self.first is None:  # a token revoked at once: the upstream refuses it
                self.first = str(world.idp.client_credentials(
                    "tk-up", secret, scope="upstream:call",
                    resource=world.intro.resource)["access_token"])
                world.idp.revoke(self.first)
            return self.first

        async def renew(self, stale: str) -> str:
            self.renewals += 1
            return str(world.idp.client_credentials(
                "tk-up", secret, scope="upstream:call",
                resource=world.intro.resource)["access_token"])

    source = Source()

    async def post() -> Any:
        async with httpx2.AsyncClient(auth=_bearer_auth(httpx2, source), timeout=20) as http:
            return await http.post(world.intro.echo_url, json={"x": 1})

    answer = anyio.run(post)
    assert answer.status_code == 200 and answer.json()["echo"] == {"x": 1}
    assert source.renewals == 1


def test_an_http_tool_exchanges_the_agents_token_too(world: World) -> None:
    agent_token = world.agent_token()
    answer = httpx.post(f"{world.base}/tools/execute", timeout=30,
                        headers={"Authorization": f"Bearer {agent_token}"},
                        json={"tool": "api_xch", "arguments": {}})
    body = answer.json()
    assert body["status"] == "succeeded", body
    assert body["output"]["sub"] == "bot" and body["output"]["act"] == {"sub": "tk-up"}
    assert sha256(agent_token) not in {s["sha256"] for s in world.up.seen()}


def test_a_per_call_token_for_a_server_only_the_sdk_client_reaches_is_refused(
        world: World) -> None:
    pool = world.gw.upstreams.get()
    # as if the server had refused the lean client's handshake
    pool.fallbacks.reasons["xch"] = "initialize_refused"
    try:
        seen = len(world.up.seen())
        answer = httpx.post(f"{world.base}/tools/execute", timeout=30,
                            headers={"Authorization": f"Bearer {world.agent_token()}"},
                            json={"tool": "xch_whoami", "arguments": {}})
        body = answer.json()
        assert body["reason"] == Reason.UPSTREAM_UNAUTHORIZED, body
        assert "per-call token" in body["message"]
        assert len(world.up.seen()) == seen
    finally:
        pool.fallbacks.reasons.pop("xch", None)


@pytest.mark.parametrize("tool", ["xch_whoami", "api_xch"])
def test_token_exchange_with_a_toolkeeper_token_is_refused(world: World, tool: str) -> None:
    seen = len(world.up.seen())
    answer = httpx.post(f"{world.base}/tools/execute", timeout=30,
                        headers={"Authorization": f"Bearer {world.tk_token}"},
                        json={"tool": tool, "arguments": {}})
    body = answer.json()
    assert body["reason"] == Reason.UPSTREAM_UNAUTHORIZED, body
    assert len(world.up.seen()) == seen  # nothing was sent upstream


def test_no_upstream_token_in_results_audit_or_logs(world: World,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    world.gw.redact_logs()  # as `toolkeeper serve` does, now that caplog's handler is there
    for tool in ("up_whoami", "api_echo", "intro_whoami"):
        assert world.call(tool).status is CallStatus.SUCCEEDED
    tokens = _tokens_of(world.gw)
    values = [t.value for t in list(tokens._cache.values())]
    assert values
    logging.getLogger("toolkeeper").warning("a token: %s", values[0])
    text_all = _everything(world.gw) + caplog.text
    for value in values:
        assert value not in text_all
