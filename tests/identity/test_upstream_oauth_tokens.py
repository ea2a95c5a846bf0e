"""The upstream token manager on its own: an authorization server that is down, hangs or
answers garbage (a loopback server the test controls, for what the real IdP cannot be made
to do; and the real IdP suspended), one fetch for many concurrent calls (real IdP), the
``oauth`` block's refusals at config time, and the caller's token carrier that never shows
its value."""

from __future__ import annotations

import asyncio
import json
import pickle
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

from tests.support.idp import TOKEN_EXCHANGE, Idp, client
from tests.support.loopback import JsonHandler, serving
from tests.support.serve import free_port
from toolkeeper.identity.upstream import (
    MAX_ANSWER_BYTES,
    TokenUnavailable,
    Unauthorized,
    UpstreamTokens,
)
from toolkeeper.identity.upstream_subject import SubjectToken, carry, subject_for
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.providers.http import HttpEndpointConfig
from toolkeeper.upstream.servers import ServerConfig, UpstreamOAuth

SECRET = "s3cret-of-the-client"


class Bad(JsonHandler):
    """A token endpoint whose answer depends on the path."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        kind = self.path.strip("/")
        if kind == "slow":
            time.sleep(3)
            self.reply({"access_token": "late", "token_type": "Bearer", "expires_in": 60})
        elif kind == "html":
            body = b"<html>sign in</html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif kind == "huge":
            self.reply({"access_token": "x" * (MAX_ANSWER_BYTES + 10), "token_type": "Bearer"})
        elif kind == "notoken":
            self.reply({"token_type": "Bearer", "expires_in": 60})
        elif kind == "dpop":
            self.reply({"access_token": "abc.def", "token_type": "DPoP", "expires_in": 60})
        elif kind == "badexpiry":
            self.reply({"access_token": "abc.def", "token_type": "Bearer", "expires_in": "x"})
        elif kind == "refused":
            self.reply({"error": "invalid_client", "error_description": SECRET}, status=401)
        elif kind == "oops":
            self.reply({"message": "down for maintenance"}, status=503)
        else:
            self.reply({"access_token": "fine-token", "token_type": "bearer",
                        "expires_in": 60})


@pytest.fixture(scope="module")
def bad() -> Iterator[str]:
    with serving(Bad) as base:
        yield base


def _oauth(endpoint: str, **extra: Any) -> UpstreamOAuth:
    return UpstreamOAuth.model_validate({"token_endpoint": endpoint, "client_id": "c",
                                         "client_secret": "${secret:idp/c}", **extra})


async def _secret(connector: str | None, key: str) -> str:
    return SECRET


def _get(oauth: UpstreamOAuth, tokens: UpstreamTokens | None = None) -> str:
    tokens = tokens or UpstreamTokens()
    return asyncio.run(tokens.token(oauth, tenant_id="t", upstream="u", secret=_secret))


@pytest.mark.parametrize(("path", "error", "words"), [
    ("slow", TokenUnavailable, "did not answer within"),
    ("html", TokenUnavailable, "without a token"),
    ("huge", TokenUnavailable, "without a token"),
    ("notoken", TokenUnavailable, "no usable access_token"),
    ("dpop", TokenUnavailable, "is not Bearer"),
    ("badexpiry", TokenUnavailable, "expires_in"),
    ("oops", TokenUnavailable, "HTTP 503"),
    ("refused", Unauthorized, "invalid_client"),
])
def test_a_bad_authorization_server_gets_a_clear_bounded_reason(
        bad: str, path: str, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as caught:
        _get(_oauth(f"{bad}/{path}", timeout_s=0.5))
    assert words in str(caught.value)
    assert SECRET not in str(caught.value)  # the server's text is never repeated
    reason = (Reason.UPSTREAM_UNAUTHORIZED if error is Unauthorized
              else Reason.UPSTREAM_TOKEN_UNAVAILABLE)
    assert caught.value.reason == reason  # type: ignore[attr-defined]


def test_a_good_answer_gives_the_token(bad: str) -> None:
    assert _get(_oauth(f"{bad}/fine")) == "fine-token"


def test_an_authorization_server_that_is_down(bad: str) -> None:
    with pytest.raises(TokenUnavailable, match="cannot reach"):
        _get(_oauth(f"http://127.0.0.1:{free_port()}/token", timeout_s=1))


def test_discovery_that_finds_nothing_is_bounded(bad: str) -> None:
    with pytest.raises(TokenUnavailable, match="no token endpoint discovered"):
        _get(UpstreamOAuth(issuer=bad, client_id="c", client_secret="${secret:idp/c}",
                           timeout_s=1))


def test_the_real_idp_suspended_gives_a_bounded_clear_reason(idp: Idp) -> None:
    secret = idp.add_client(client("tk-hang"))["client_secret"]

    async def given(connector: str | None, key: str) -> str:
        return str(secret)

    oauth = UpstreamOAuth(issuer=idp.issuer, client_id="tk-hang",
                          client_secret="${secret:idp/tk-hang}", timeout_s=1)
    tokens = UpstreamTokens()
    asyncio.run(tokens.token(oauth, tenant_id="t", upstream="u", secret=given))  # discovered
    idp.suspend()
    try:
        tokens.forget()
        with pytest.raises(TokenUnavailable, match="did not answer within"):
            asyncio.run(tokens.token(oauth, tenant_id="t", upstream="u", secret=given))
    finally:
        idp.resume()


def test_concurrent_calls_share_one_fetch_and_a_refused_token_is_renewed_once(
        idp: Idp) -> None:
    secret = idp.add_client(client("tk-many", grant_types=["client_credentials",
                                                           TOKEN_EXCHANGE]))["client_secret"]

    async def given(connector: str | None, key: str) -> str:
        return str(secret)

    oauth = UpstreamOAuth(token_endpoint=idp.endpoint("token_endpoint"), client_id="tk-many",
                          client_secret="${secret:idp/tk-many}")
    tokens = UpstreamTokens()

    async def many() -> list[str]:
        return await asyncio.gather(*[tokens.token(oauth, tenant_id="t", upstream="u",
                                                   secret=given) for _ in range(20)])

    got = asyncio.run(many())
    assert len(set(got)) == 1 and tokens.fetches == 1

    async def stale_many() -> list[str]:
        return await asyncio.gather(*[tokens.token(oauth, tenant_id="t", upstream="u",
                                                   secret=given, stale=got[0])
                                      for _ in range(5)])

    renewed = asyncio.run(stale_many())
    assert len(set(renewed)) == 1 and renewed[0] != got[0] and tokens.fetches == 2
    # another tenant never gets this tenant's token
    other = asyncio.run(tokens.token(oauth, tenant_id="t2", upstream="u", secret=given))
    assert other != renewed[0] and tokens.fetches == 3


def test_token_exchange_without_the_agents_own_token_is_refused(bad: str) -> None:
    oauth = _oauth(f"{bad}/fine", grant="token_exchange", subject="agent")
    with pytest.raises(Unauthorized, match="OAuth access token in this request"):
        _get(oauth)


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(("block", "words"), [
    ({"client_secret": "hunter2-literal"}, "never the secret itself"),
    ({"client_secret": "Bearer ${secret:idp/c}"}, "never the secret itself"),
    ({"grant": "token_exchange"}, "needs `subject: agent`"),
    ({"subject": "agent"}, "token_exchange only"),
    ({"issuer": "http://idp.example"}, "exactly one of"),
    ({"token_endpoint": "file:///etc/passwd"}, "http(s) URL"),
])
def test_bad_oauth_blocks_are_refused_at_config_time(block: dict[str, Any],
                                                     words: str) -> None:
    raw = {"token_endpoint": "https://idp.example/token", "client_id": "c",
           "client_secret": "${secret:idp/c}", **block}
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        UpstreamOAuth.model_validate(raw)


def test_oauth_goes_with_an_http_server_and_not_with_a_second_authorization() -> None:
    oauth = {"token_endpoint": "https://idp.example/token", "client_id": "c"}
    with pytest.raises(ValidationError, match="`url` servers only"):
        ServerConfig(name="s", command=("x",), oauth=oauth)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="not both"):
        HttpEndpointConfig.model_validate({"url": "https://api.example", "oauth": oauth,
                                           "headers": {"Authorization": "${secret:a/b}"}})


# -- the caller's token -------------------------------------------------------------------


def test_the_callers_token_is_never_shown_and_only_serves_its_own_agent() -> None:
    raw = "eyJ.the-agents-own.token"
    bot = Principal(name="bot", tenant_id="acme", roles=frozenset({Role.AGENT}), agent="bot",
                    subject="bot", issuer="https://idp.example")

    def inside() -> None:
        carry(bot, raw)
        found = subject_for("acme", "bot")
        assert found is not None and found.reveal() == raw
        assert raw not in repr(found) and raw not in str(found) and raw not in f"{found!r}"
        with pytest.raises(TypeError):
            pickle.dumps(found)
        assert subject_for("acme", "other") is None and subject_for("globex", "bot") is None

    import contextvars

    contextvars.copy_context().run(inside)
    assert subject_for("acme", "bot") is None  # the request's context only
    tk = Principal(name="bot", tenant_id="acme", roles=frozenset({Role.AGENT}), agent="bot")
    contextvars.copy_context().run(lambda: (carry(tk, "tk_x"), _none()))


def _none() -> None:
    assert subject_for("acme", "bot") is None  # a tk_ token is never exchanged


def test_subject_token_digest_is_not_the_token() -> None:
    token = SubjectToken("abc" * 20, tenant_id="t", agent="a", issuer="i")
    assert "abc" * 20 not in token.digest
    assert json.dumps({"d": token.digest})

