"""``identity.sso`` as the operator writes it: what the config refuses, ``Secure`` +
``__Host-`` cookies over TLS, and a provider whose discovery is garbage, names another issuer
or does not answer (bounded: 502 ``sso_failed``, no redirect, no cookie)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.identity.sso_world import sso_world
from tests.support.idp import Idp
from tests.support.loopback import JsonHandler, serving
from toolkeeper.config.sso import SsoConfig, compiled

GOOD: dict[str, Any] = {
    "issuer": "https://idp.example", "client_id": "console",
    "client_secret": "${secret:sso/console}", "public_url": "https://tools.example.com",
    "claims": {"tenant": "acme", "roles": [{"claim": "groups", "value": "x",
                                            "role": "approver"}]}}


def test_a_good_section_compiles_with_tls_cookies_and_the_callback_uri() -> None:
    s = compiled(SsoConfig.model_validate(GOOD))
    assert s.secure and s.redirect_uri == "https://tools.example.com/auth/callback"
    assert s.scopes == ("openid", "profile", "email") and s.mapping.agent_claim is None
    plain = compiled(SsoConfig.model_validate({**GOOD, "public_url": "http://127.0.0.1:8080"}))
    assert not plain.secure


@pytest.mark.parametrize(("change", "says"), [
    ({"client_secret": "hunter2"}, "secret_literal_refused"),
    ({"public_url": "https://tools.example.com/console"}, "public_url"),
    ({"public_url": "javascript:alert(1)"}, "public_url"),
    ({"scopes": ["profile"]}, "openid"),
    ({"algorithms": ["HS256"]}, "not allowed"),
    ({"algorithms": ["none"]}, "not allowed"),
    ({"claims": {"tenant": "acme", "roles": []}}, "claims.roles"),
    ({"session_idle_s": 0}, "session_idle_s"),
])
def test_a_bad_section_is_refused_saying_why(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        SsoConfig.model_validate({**GOOD, **change})
    assert says in str(refused.value)


def test_over_tls_the_cookies_are_secure_and_host_prefixed(
        idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> None:
    with sso_world(idp, tmp_path_factory.mktemp("sso-tls"), secure_cookies=True) as w, \
            w.browser() as http:
        login = http.get(w.url("/auth/login"))
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert cookie.startswith("__Host-tk_sso_login=")
        assert "Secure" in cookie and "Path=/" in cookie and "HttpOnly" in cookie
        assert "Domain" not in cookie


class _OtherIssuer(JsonHandler):
    def do_GET(self) -> None:
        self.reply({"issuer": "https://someone.else", "authorization_endpoint": "x",
                    "token_endpoint": "y", "jwks_uri": "z"})


class _Garbage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>not json" * 50_000  # beyond the 256 KiB bound too
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_a: Any) -> None:
        pass


class _Silent(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(5)

    def log_message(self, *_a: Any) -> None:
        pass


@pytest.fixture(params=[_OtherIssuer, _Garbage, _Silent], ids=["other", "garbage", "silent"])
def bad_provider(request: pytest.FixtureRequest) -> Iterator[str]:
    with serving(request.param) as url:
        yield url


def test_a_provider_that_cannot_be_used_starts_no_sign_in(
        idp: Idp, bad_provider: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    with sso_world(idp, tmp_path_factory.mktemp("sso-bad"), issuer=bad_provider,
                   timeout_s=0.5) as w, w.browser() as http:
        got = http.get(w.url("/auth/login"))
        assert got.status_code == 502, got.text
        assert got.json()["error"]["reason"] == "sso_failed"
        assert "set-cookie" not in got.headers
        assert httpx.get(w.url("/auth/session"), timeout=10).json()["signed_in"] is False


def test_an_id_token_signed_with_an_algorithm_not_allowed_opens_no_session(
        idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The provider signs ID tokens with RS256; this console allows only ES256."""
    with sso_world(idp, tmp_path_factory.mktemp("sso-alg"), algorithms=["ES256"]) as w, \
            w.browser() as http:
        login = http.get(w.url("/auth/login"))
        done = http.get(w.idp.sign_in(login.headers["location"], "dana"))
        assert done.status_code == 400, done.text
        assert done.json()["error"]["reason"] == "sso_failed"
        assert "algorithm" in done.json()["error"]["message"]
        assert "tk_session" not in http.cookies


def test_without_single_sign_on_the_routes_say_so_and_a_cookie_is_ignored(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from fastapi.testclient import TestClient

    from toolkeeper import Gateway
    from toolkeeper.api import ApiSettings, create_app

    tmp = tmp_path_factory.mktemp("no-sso")
    with Gateway.open(f"sqlite:///{tmp}/tk.db") as gw, \
            TestClient(create_app(gw, ApiSettings())) as api:
        assert api.get("/auth/session").json() == {"sso": False, "signed_in": False}
        assert api.get("/auth/login", follow_redirects=False).status_code == 404
        api.cookies.set("tk_session", "anything")
        got = api.get("/approvals")
        assert got.status_code == 401 and got.json()["error"]["reason"] == "unauthenticated"
        assert "/auth/login" not in api.get("/openapi.json").text
