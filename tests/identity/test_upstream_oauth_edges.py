"""The upstream token manager at its edges (a review of :mod:`toolkeeper.identity.upstream`):
answers a JSON parser cannot take (nested past the recursion limit) and discovery documents
with a non-string ``issuer`` are garbage with a clear reason, not a crash; two tenants whose
ids share a long prefix never share a stored token; a cached token stays known to the log
redactor however many other tokens were made since. Loopback servers the test controls (the
real IdP cannot be made to answer garbage)."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.idp import Idp, client
from tests.support.loopback import JsonHandler, serving
from tests.support.oauth_upstream import start_oauth_upstream
from toolkeeper import Gateway
from toolkeeper.errors import ToolError
from toolkeeper.identity.upstream import TokenUnavailable, UpstreamTokens
from toolkeeper.model.enums import Autonomy, CallStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.providers.base import ToolContext, ToolPolicy
from toolkeeper.providers.mcp import call_upstream
from toolkeeper.secrets.credentials import TenantCredentials
from toolkeeper.secrets.embedded import EmbeddedSecretsStore, generate_key_file
from toolkeeper.secrets.redact import LIVE_SECRETS
from toolkeeper.store import Store
from toolkeeper.upstream.lazy import LazyPool
from toolkeeper.upstream.pool import UpstreamPool
from toolkeeper.upstream.servers import ServerConfig, UpstreamOAuth

NESTED = b"[" * 20_000  # within MAX_ANSWER_BYTES, past the JSON parser's recursion limit


class Odd(JsonHandler):
    """A token endpoint / metadata server answering what the path asks for; the token it
    issues names the client secret it was asked with (one token per tenant's secret)."""

    def _raw(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/nested/"):
            self._raw(NESTED)
        elif self.path.startswith("/numissuer/"):
            self.reply({"issuer": 5, "token_endpoint": "http://127.0.0.1:1/token"})
        else:
            self.reply({"error": "not_found"}, status=404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/nested":
            self._raw(NESTED)
            return
        basic = self.headers.get("Authorization", "").removeprefix("Basic ")
        secret = base64.b64decode(basic).decode().partition(":")[2]
        self.reply({"access_token": f"token-for-{secret}", "token_type": "Bearer",
                    "expires_in": 600})


@pytest.fixture(scope="module")
def odd() -> Iterator[str]:
    with serving(Odd) as base:
        yield base


def _get(tokens: UpstreamTokens, oauth: UpstreamOAuth, tenant: str = "t",
         secret: str = "s") -> str:
    async def given(connector: str | None, key: str) -> str:
        return secret

    return asyncio.run(tokens.token(oauth, tenant_id=tenant, upstream="u", secret=given))


def _oauth(**where: str) -> UpstreamOAuth:
    return UpstreamOAuth.model_validate({"client_id": "c", "client_secret": "${secret:idp/c}",
                                         "timeout_s": 2, **where})


def test_a_token_answer_nested_past_the_parsers_limit_is_garbage(odd: str) -> None:
    with pytest.raises(TokenUnavailable, match="without a token") as caught:
        _get(UpstreamTokens(), _oauth(token_endpoint=f"{odd}/nested"))
    assert caught.value.reason == Reason.UPSTREAM_TOKEN_UNAVAILABLE


@pytest.mark.parametrize("kind", ["nested", "numissuer"])
def test_a_garbled_discovery_document_is_no_endpoint(odd: str, kind: str) -> None:
    with pytest.raises(TokenUnavailable, match="no token endpoint discovered"):
        _get(UpstreamTokens(), _oauth(issuer=f"{odd}/{kind}"))


@pytest.fixture()
def credentials(tmp_path: Path) -> Iterator[TenantCredentials]:
    store = Store.open(f"sqlite:///{tmp_path}/tk.db")
    try:
        key = generate_key_file(tmp_path / "secrets.key")
        yield TenantCredentials(store.credentials, EmbeddedSecretsStore(store.blobs, key))
    finally:
        store.close()


def test_tenants_with_a_long_common_prefix_never_share_a_stored_token(
        odd: str, credentials: TenantCredentials) -> None:
    """Tenant ids may be 64 characters: the stored row of one must not be the other's."""
    prefix = "t" * 60
    oauth = _oauth(token_endpoint=f"{odd}/token")
    first = _get(UpstreamTokens(credentials=credentials), oauth, prefix + "-one", "one")
    assert first == "token-for-one"
    # another process (empty memory), the other tenant, its own client secret
    second = _get(UpstreamTokens(credentials=credentials), oauth, prefix + "-two", "two")
    assert second == "token-for-two"
    # and the stored token is still found by its own tenant in a third process
    again = UpstreamTokens(credentials=credentials)
    assert _get(again, oauth, prefix + "-one", "one") == "token-for-one"
    assert again.fetches == 0


def test_a_cached_token_in_use_stays_known_to_the_log_redactor(odd: str) -> None:
    tokens = UpstreamTokens()
    oauth = _oauth(token_endpoint=f"{odd}/token")
    value = _get(tokens, oauth, "t", "kept-in-use")
    assert value in LIVE_SECRETS.values()
    for i in range(1000):  # many other tokens made since (other upstreams, tenants)
        LIVE_SECRETS.add(f"another-upstream-token-{i:04d}")
    assert _get(tokens, oauth, "t", "kept-in-use") == value and tokens.fetches == 1
    assert value in LIVE_SECRETS.values()  # still used: still redacted from logs


# -- a token renewed during a call is that call's secret ---------------------------------


def _ctx(pool: Any) -> ToolContext:
    return ToolContext(call_id="c1", tenant_id="default", agent="bot", tool="intro_whoami",
                       action="run", tool_version="1", autonomy=Autonomy.GUARDED,
                       granted_scopes=frozenset(), policy=ToolPolicy(), upstreams=pool,
                       timeout_s=10)


def test_a_token_renewed_after_a_401_is_redacted_from_that_calls_output(
        idp: Idp, tmp_path: Path) -> None:
    """An MCP server with client credentials: the upstream refuses the cached token (revoked
    at the IdP), the connection renews it and sends the call again. The renewed token must
    be among the call's secrets (what the output, audit and logs are redacted of), like the
    one the call started with."""
    secret = idp.add_client(client("tk-edge"))["client_secret"]

    async def platform(connector: str | None, key: str) -> str:
        return str(secret)

    with start_oauth_upstream(idp, tmp_path, mode="introspect") as up:
        cfg = ServerConfig(name="intro", url=up.mcp_url, oauth=UpstreamOAuth(
            token_endpoint=idp.endpoint("token_endpoint"), client_id="tk-edge",
            client_secret="${secret:idp/tk-edge}", scope="upstream:call",
            resource=up.resource))
        tokens = UpstreamTokens(platform=platform)
        pool = UpstreamPool(lambda: {"intro": cfg}, bearer_for=lambda c: tokens.server_bearer(
            c.name, c.oauth, c.tenant))
        lazy = LazyPool(lambda: pool, tokens=tokens)

        async def run() -> tuple[ToolContext, ToolContext]:
            first, second = _ctx(lazy), _ctx(lazy)
            await call_upstream(first, "intro", "whoami", {})
            old = next(iter(tokens._cache.values())).value
            assert idp.revoke(old) == 1
            await call_upstream(second, "intro", "whoami", {})
            return first, second

        try:
            first, second = asyncio.run(run())
        finally:
            pool.close()
        renewed = next(iter(tokens._cache.values())).value
        assert tokens.fetches == 2 and renewed not in first._resolved_secrets
        # a 401, then one renewal (the connection's background requests — its change stream,
        # its listing — may meet the revoked token too; they share that one renewal)
        assert sum(not s["accepted"] for s in up.seen()) >= 1
        assert renewed in second._resolved_secrets


# -- one fetch shared by concurrent calls, one of which gives up -------------------------


class Slow(JsonHandler):
    """A token endpoint that takes a while (so calls pile up on one fetch)."""

    asked = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/refuse":  # an upstream that refuses every token
            self.reply({"error": "invalid_token"}, status=401)
            return
        if self.path == "/fast-then-slow":
            Slow.asked += 1
        time.sleep(3 if self.path == "/slower" or Slow.asked > 1 else 0.8)
        self.reply({"access_token": "shared-token", "token_type": "Bearer", "expires_in": 600})


def test_a_waiting_call_that_is_cancelled_leaves_the_shared_fetch_to_the_others() -> None:
    """Calls waiting on another call's token request: one of them gives up (its deadline,
    its client gone). The request goes on for everyone else: the caller who made it and the
    other waiters get the token, nobody gets a cancellation they did not ask for."""
    with serving(Slow) as base:
        tokens = UpstreamTokens()
        oauth = _oauth(token_endpoint=f"{base}/token")

        async def given(connector: str | None, key: str) -> str:
            return "s"

        async def one() -> str:
            return await tokens.token(oauth, tenant_id="t", upstream="u", secret=given)

        async def run() -> tuple[Any, ...]:
            owner = asyncio.create_task(one())
            await asyncio.sleep(0.1)  # the owner's request is under way
            quitter, waiter = asyncio.create_task(one()), asyncio.create_task(one())
            await asyncio.sleep(0.1)
            quitter.cancel()
            return await asyncio.gather(owner, waiter, quitter, return_exceptions=True)

        owner, waiter, quitter = asyncio.run(asyncio.wait_for(run(), 10))
    assert owner == "shared-token" and waiter == "shared-token", (owner, waiter)
    assert isinstance(quitter, asyncio.CancelledError) and tokens.fetches == 1


# -- a token that comes too late: the call failed, it did not run -------------------------


def test_a_write_call_whose_token_comes_too_late_failed_and_is_not_unknown(
        tmp_path: Path) -> None:
    """The authorization server answers after the tool's deadline: nothing was sent
    upstream, so the call ``failed`` (``upstream_token_unavailable``), not ``unknown``
    ("may have acted"), which would leave a write for a human to resolve."""
    res = _write_call(tmp_path, "/slower", call_s=1, request_s=30)
    assert (res.status, res.reason) == (CallStatus.FAILED,
                                        Reason.UPSTREAM_TOKEN_UNAVAILABLE), res


def test_a_write_call_whose_renewal_outlasts_the_request_deadline_failed(
        tmp_path: Path) -> None:
    """The upstream answers 401 (it ran nothing); renewing the token takes longer than the
    tool's request deadline: the call failed (``timeout``), it is not ``unknown``."""
    Slow.asked = 0
    res = _write_call(tmp_path, "/fast-then-slow", call_s=20, request_s=2)
    assert (res.status, res.reason) == (CallStatus.FAILED, Reason.TIMEOUT), res
    assert Slow.asked == 2


def _write_call(tmp_path: Path, token_path: str, *, call_s: float, request_s: float) -> Any:
    """One call of an irreversible http tool whose upstream refuses every token."""
    with serving(Slow) as base:
        doc = {"version": 1, "tools": [{
            "name": "api_write", "implementation_type": "http", "side_effect": "irreversible",
            "risk_default": "low", "execution": {"timeout_s": call_s, "max_retries": 0},
            "implementation": {"url": f"{base}/refuse", "method": "POST",
                               "allowed_networks": ["127.0.0.0/8"], "timeout_s": request_s,
                               "oauth": {"token_endpoint": base + token_path,
                                         "client_id": "c", "timeout_s": 5}}}],
            "profiles": [{"name": "p", "autonomy": 3,
                          "activations": [{"tool": "api_write"}]}],
            "agents": [{"name": "bot", "profile": "p"}]}
        path = tmp_path / "toolkeeper.yaml"
        path.write_text(yaml.safe_dump(doc))
        with Gateway.open(f"sqlite:///{tmp_path}/tk.db", config=path) as gw:
            return gw.call_sync("api_write", "run", {}, agent="bot")


# -- client_secret_basic encodes the client's id and secret (RFC 6749 §2.3.1) -------------


def test_a_client_secret_with_reserved_characters_is_sent_form_encoded(idp: Idp) -> None:
    """``client_secret_basic`` form-encodes the id and secret before Basic (RFC 6749 §2.3.1):
    a secret with ``+``, ``%``, ``:`` or ``/`` (as generated secrets may have) must reach the
    real IdP unchanged."""
    secret = "a+b%2Fc:d/e f=="
    idp.add_client(client("tk-odd:id", secret=secret))

    async def given(connector: str | None, key: str) -> str:
        return secret

    oauth = UpstreamOAuth(token_endpoint=idp.endpoint("token_endpoint"),
                          client_id="tk-odd:id", client_secret="${secret:idp/odd}")
    got = asyncio.run(UpstreamTokens().token(oauth, tenant_id="t", upstream="u",
                                             secret=given))
    assert got and idp.introspect(got)["client_id"] == "tk-odd:id"


# -- the SDK client's connection (servers the lean client cannot speak to) ---------------


def test_through_the_sdk_client_a_refused_renewal_is_upstream_unauthorized(
        idp: Idp, tmp_path: Path) -> None:
    """A server only the MCP SDK's client reaches: the cached token revoked and the client
    disabled at the IdP. The call stops with ``upstream_unauthorized`` and is not reported
    as one that may have run (the upstream refused it before doing anything)."""
    secret = idp.add_client(client("tk-sdk"))["client_secret"]

    async def platform(connector: str | None, key: str) -> str:
        return str(secret)

    with start_oauth_upstream(idp, tmp_path, mode="introspect") as up:
        cfg = ServerConfig(name="sdk", url=up.mcp_url, oauth=UpstreamOAuth(
            token_endpoint=idp.endpoint("token_endpoint"), client_id="tk-sdk",
            client_secret="${secret:idp/tk-sdk}", scope="upstream:call",
            resource=up.resource))
        tokens = UpstreamTokens(platform=platform)
        pool = UpstreamPool(lambda: {"sdk": cfg}, bearer_for=lambda c: tokens.server_bearer(
            c.name, c.oauth, c.tenant))
        # as if it had refused the lean client's handshake
        pool.fallbacks.reasons["sdk"] = "initialize_refused"
        lazy = LazyPool(lambda: pool, tokens=tokens)

        async def run() -> BaseException | None:
            await call_upstream(_ctx(lazy), "sdk", "whoami", {})
            assert idp.revoke(next(iter(tokens._cache.values())).value) == 1
            idp.disable_client("tk-sdk")
            try:
                await call_upstream(_ctx(lazy), "sdk", "whoami", {})
            except BaseException as exc:  # the test inspects it
                return exc
            return None

        try:
            got = asyncio.run(asyncio.wait_for(run(), 60))
        finally:
            idp.enable_client("tk-sdk")
            pool.close()
    assert isinstance(got, ToolError), repr(got)
    assert got.reason == Reason.UPSTREAM_UNAUTHORIZED and not got.may_have_executed, got
