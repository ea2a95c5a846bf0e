"""The test IdP (tests/support/idp.py) does what the identity tests rely on: a real
oidc-provider whose tokens verify against its JWKS, rotate, exchange, and stop working when
the provider says so."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.idp import (
    DEFAULT_RESOURCE,
    TOKEN_EXCHANGE,
    TT_ACCESS,
    TT_ID,
    Idp,
    IdpRefused,
    client,
    pkce_pair,
)

OPAQUE = "http://127.0.0.1/opaque-resource"
ES = "http://127.0.0.1/es256-resource"


def verify(idp: Idp, token: str, audience: str) -> dict[str, Any]:
    """``token`` checked against the provider's JWKS as served now."""
    keys = jwt.PyJWKSet.from_dict(idp.jwks())
    kid = jwt.get_unverified_header(token)["kid"]
    key = next((k for k in keys.keys if k.key_id == kid), None)
    if key is None:
        raise jwt.InvalidKeyError(f"kid {kid} is not in the JWKS")
    return dict(jwt.decode(token, key=key, algorithms=["RS256", "ES256"], audience=audience,
                           issuer=idp.issuer))


@pytest.fixture(scope="module", autouse=True)
def _resources(idp: Idp) -> None:
    idp.add_resource(OPAQUE, scope="x", format="opaque")
    idp.add_resource(ES, scope="x", alg="ES256", ttl_s=7)


def test_discovery_names_the_endpoints_and_grants(idp: Idp) -> None:
    d = idp.discovery
    assert d["issuer"] == idp.issuer
    for name in ("token_endpoint", "jwks_uri", "introspection_endpoint", "revocation_endpoint",
                 "end_session_endpoint", "authorization_endpoint", "userinfo_endpoint"):
        assert d[name].startswith(idp.issuer + "/")
    assert {"client_credentials", "authorization_code", "refresh_token",
            TOKEN_EXCHANGE} <= set(d["grant_types_supported"])
    assert d["code_challenge_methods_supported"] == ["S256"]


def test_client_credentials_give_a_jwt_for_the_resource(idp: Idp) -> None:
    answer = idp.client_credentials("agent", resource=DEFAULT_RESOURCE, scope="tools:call")
    token = answer["access_token"]
    assert jwt.get_unverified_header(token)["typ"] == "at+jwt"
    claims = verify(idp, token, DEFAULT_RESOURCE)
    assert claims["sub"] == claims["client_id"] == "agent"
    assert claims["scope"] == "tools:call"
    assert (claims["tk_tenant"], claims["tk_agent"]) == ("acme", "bot")
    assert answer["expires_in"] == 300
    with pytest.raises(jwt.InvalidAudienceError):
        verify(idp, token, "http://127.0.0.1/another-resource")


def test_a_resource_can_have_es256_tokens_and_a_short_ttl(idp: Idp) -> None:
    answer = idp.client_credentials("agent", resource=ES, scope="x")
    assert jwt.get_unverified_header(answer["access_token"])["alg"] == "ES256"
    assert verify(idp, answer["access_token"], ES)["scope"] == "x"
    assert answer["expires_in"] == 7


def test_an_unknown_resource_is_refused(idp: Idp) -> None:
    with pytest.raises(IdpRefused) as refused:
        idp.client_credentials("agent", resource="http://127.0.0.1/nobody")
    assert refused.value.error == "invalid_target"


def test_rotation_changes_the_kid_and_drops_the_old_key(idp: Idp) -> None:
    before = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    old_kid = jwt.get_unverified_header(before)["kid"]
    new_kids = idp.rotate_keys()
    after = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    assert jwt.get_unverified_header(after)["kid"] in new_kids != [old_kid]
    assert old_kid not in {k["kid"] for k in idp.jwks()["keys"]}
    assert verify(idp, after, DEFAULT_RESOURCE)["sub"] == "agent"
    with pytest.raises(jwt.InvalidKeyError):
        verify(idp, before, DEFAULT_RESOURCE)


def test_rotation_can_keep_the_old_key_published(idp: Idp) -> None:
    before = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    new_kids = idp.rotate_keys(keep_old=True)
    after = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    assert jwt.get_unverified_header(after)["kid"] == new_kids[0]
    assert verify(idp, before, DEFAULT_RESOURCE)["sub"] == "agent"


def test_sign_in_gives_id_token_claims_and_refresh(idp: Idp) -> None:
    answer = idp.login_code_flow("console", "alice", scope="openid profile email tools:call",
                                 resource=DEFAULT_RESOURCE)
    id_claims = verify(idp, answer["id_token"], "console")
    assert id_claims["sub"] == "alice"
    assert id_claims["name"] == "Alice Approver"
    assert id_claims["email"] == "alice@acme.test"
    assert id_claims["groups"] == ["tk-approvers", "staff"]
    assert id_claims["tk_tenant"] == "acme"
    access = verify(idp, answer["access_token"], DEFAULT_RESOURCE)
    assert (access["sub"], access["scope"], access["tk_tenant"]) == ("alice", "tools:call", "acme")
    again = idp.refresh("console", answer["refresh_token"])
    assert verify(idp, again["access_token"], DEFAULT_RESOURCE)["sub"] == "alice"


def test_authorization_without_pkce_is_refused(idp: Idp) -> None:
    url = idp.authorize_url("console", "http://127.0.0.1/callback", code_challenge="x",
                            state="s1")
    url = url.replace("&code_challenge=x&code_challenge_method=S256", "")
    assert "code_challenge" not in url
    back = idp.http.get(url)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(back.headers["location"]).query))
    assert query["error"] == "invalid_request"
    assert "PKCE" in query["error_description"]


def test_an_unknown_user_cannot_sign_in(idp: Idp) -> None:
    _, challenge = pkce_pair()
    url = idp.authorize_url("console", "http://127.0.0.1/callback", code_challenge=challenge,
                            state="s2")
    with pytest.raises(IdpRefused) as refused:
        idp.sign_in(url, "nobody")
    assert refused.value.error == "login_failed"


def test_a_user_with_a_password_needs_it(idp: Idp) -> None:
    idp.add_user("carol", name="Carol", password="s3cret", groups=[], tk_tenant="acme")
    _, challenge = pkce_pair()
    url = idp.authorize_url("console", "http://127.0.0.1/callback", code_challenge=challenge,
                            state="s3")
    with pytest.raises(IdpRefused):
        idp.sign_in(url, "carol", password="wrong")
    back = idp.sign_in(url, "carol", password="s3cret")
    assert back.startswith("http://127.0.0.1/callback?code=")


def test_a_client_can_ask_for_consent(idp: Idp) -> None:
    idp.add_client(client("asks", grant_types=["authorization_code"], consent=True,
                          redirect_uris=["http://127.0.0.1/asks"]))
    answer = idp.login_code_flow("asks", "bob", scope="openid tools:read",
                                 resource=DEFAULT_RESOURCE)
    assert verify(idp, answer["access_token"], DEFAULT_RESOURCE)["scope"] == "tools:read"


def test_sign_out_ends_the_session_at_the_provider(idp: Idp) -> None:
    _, challenge = pkce_pair()
    url = idp.authorize_url("console", "http://127.0.0.1/callback", code_challenge=challenge,
                            state="s4")
    with httpx.Client(timeout=10) as browser:
        idp.sign_in(url, "alice", http=browser)
        again = browser.get(url)  # a session: straight back to the client
        assert again.headers["location"].startswith("http://127.0.0.1/callback?code=")
        after = idp.sign_out(browser, client_id="console",
                             post_logout_redirect_uri="http://127.0.0.1/", state="bye")
        assert after == "http://127.0.0.1/?state=bye"
        login = browser.get(url)
        assert login.headers["location"].startswith("/interaction/")


def test_token_exchange_keeps_the_subject_and_names_the_actor(idp: Idp) -> None:
    person = idp.login_code_flow("console", "bob", resource=DEFAULT_RESOURCE,
                                 scope="openid tools:call")
    answer = idp.token_exchange("toolkeeper", person["access_token"], resource=ES, scope="x")
    assert answer["issued_token_type"] == "urn:ietf:params:oauth:token-type:access_token"
    claims = verify(idp, answer["access_token"], ES)
    assert (claims["sub"], claims["client_id"], claims["act"]) == (
        "bob", "toolkeeper", {"sub": "toolkeeper"})
    from_id_token = idp.token_exchange("toolkeeper", person["id_token"], resource=ES,
                                       subject_token_type=TT_ID)
    assert verify(idp, from_id_token["access_token"], ES)["sub"] == "bob"


def test_token_exchange_refuses_a_token_it_did_not_sign(idp: Idp) -> None:
    genuine = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    claims = jwt.decode(genuine, options={"verify_signature": False})
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    header = jwt.get_unverified_header(genuine)
    forged = jwt.encode({**claims, "sub": "alice"}, stranger, algorithm="RS256",
                        headers={"kid": header["kid"], "typ": "at+jwt"})
    with pytest.raises(IdpRefused) as refused:
        idp.token_exchange("toolkeeper", forged, resource=ES)
    assert refused.value.error == "invalid_grant"
    assert idp.token_exchange("toolkeeper", genuine, resource=ES)["access_token"]


def test_token_exchange_honours_the_clients_subject_audiences(idp: Idp) -> None:
    idp.add_client(client("narrow", grant_types=[TOKEN_EXCHANGE], subject_audiences=[ES]))
    other = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    with pytest.raises(IdpRefused) as refused:
        idp.token_exchange("narrow", other, resource=ES)
    assert refused.value.error == "invalid_grant"
    mine = idp.client_credentials("agent", resource=ES)["access_token"]
    assert idp.token_exchange("narrow", mine, resource=ES)["access_token"]


def test_token_exchange_refuses_scopes_the_resource_lacks(idp: Idp) -> None:
    subject = idp.client_credentials("agent", resource=DEFAULT_RESOURCE)["access_token"]
    with pytest.raises(IdpRefused) as refused:
        idp.token_exchange("toolkeeper", subject, resource=ES, scope="x tools:call")
    assert refused.value.error == "invalid_scope"
    with pytest.raises(IdpRefused) as refused:
        idp.token("toolkeeper", {
            "grant_type": TOKEN_EXCHANGE, "subject_token": subject, "resource": ES,
            "subject_token_type": TT_ACCESS,
            "requested_token_type": "urn:ietf:params:oauth:token-type:refresh_token"})
    assert refused.value.error == "invalid_request"


def test_token_exchange_checks_the_subject_token_type(idp: Idp) -> None:
    person = idp.login_code_flow("console", "bob", resource=DEFAULT_RESOURCE,
                                 scope="openid tools:call")
    for token, wrong_type in ((person["id_token"], TT_ACCESS),
                              (person["access_token"], TT_ID)):
        with pytest.raises(IdpRefused) as refused:
            idp.token_exchange("toolkeeper", token, resource=ES, subject_token_type=wrong_type)
        assert refused.value.error == "invalid_grant"
    with pytest.raises(IdpRefused) as refused:
        idp.token_exchange("toolkeeper", person["access_token"], resource=ES,
                           subject_token_type="urn:example:made-up")
    assert refused.value.error == "invalid_request"


def test_token_exchange_refuses_an_opaque_subject_revoked_with_its_grant(idp: Idp) -> None:
    person = idp.login_code_flow("console", "olga", resource=OPAQUE, scope="openid x")
    assert idp.token_exchange("toolkeeper", person["access_token"], resource=ES)
    idp.revoke_grants(client_id="console", sub="olga")
    with pytest.raises(IdpRefused) as refused:
        idp.token_exchange("toolkeeper", person["access_token"], resource=ES)
    assert refused.value.error == "invalid_grant"


def test_a_disabled_client_gets_no_tokens(idp: Idp) -> None:
    idp.add_client(client("doomed", grant_types=["client_credentials"]))
    assert idp.client_credentials("doomed", resource=DEFAULT_RESOURCE)["access_token"]
    idp.disable_client("doomed")
    with pytest.raises(IdpRefused) as refused:
        idp.client_credentials("doomed", resource=DEFAULT_RESOURCE)
    assert refused.value.error == "invalid_client"
    idp.enable_client("doomed")
    assert idp.client_credentials("doomed", resource=DEFAULT_RESOURCE)["access_token"]


def test_a_revoked_opaque_token_introspects_inactive(idp: Idp) -> None:
    token = idp.client_credentials("agent", resource=OPAQUE, scope="x")["access_token"]
    assert token.count(".") == 0
    seen = idp.introspect(token)
    assert (seen["active"], seen["aud"], seen["client_id"]) == (True, OPAQUE, "agent")
    assert idp.revoke(token) == 1
    assert idp.introspect(token) == {"active": False}


def test_revoking_the_grants_ends_refresh_and_exchanged_tokens(idp: Idp) -> None:
    idp.add_client(client("holder", grant_types=["authorization_code", "refresh_token",
                                                  TOKEN_EXCHANGE],
                          redirect_uris=["http://127.0.0.1/holder"]))
    person = idp.login_code_flow("holder", "alice", resource=OPAQUE, scope="openid x")
    assert idp.introspect(person["access_token"])["active"] is True
    exchanged = idp.token_exchange("holder", person["access_token"], resource=OPAQUE)
    assert idp.introspect(exchanged["access_token"])["sub"] == "alice"
    assert idp.revoke_grants(client_id="holder", sub="alice") == 2
    assert idp.introspect(person["access_token"]) == {"active": False}
    assert idp.introspect(exchanged["access_token"]) == {"active": False}
    with pytest.raises(IdpRefused) as refused:
        idp.refresh("holder", person["refresh_token"])
    assert refused.value.error == "invalid_grant"


def test_tokens_expire_on_the_configured_ttl(idp: Idp) -> None:
    idp.add_resource("http://127.0.0.1/short", scope="x", format="opaque", ttl_s=1)
    token = idp.client_credentials("agent", resource="http://127.0.0.1/short")
    assert token["expires_in"] == 1
    deadline = time.monotonic() + 10
    while idp.introspect(token["access_token"])["active"]:
        assert time.monotonic() < deadline, "the 1 s token stayed active for 10 s"
        time.sleep(0.2)


def test_sign_uses_the_providers_current_key(idp: Idp) -> None:
    now = int(time.time())
    token = idp.sign({"iss": idp.issuer, "aud": ES, "sub": "x", "iat": now - 600,
                      "exp": now - 300}, alg="ES256")
    assert jwt.get_unverified_header(token)["kid"] in idp.kids
    with pytest.raises(jwt.ExpiredSignatureError):
        verify(idp, token, ES)


def test_a_suspended_provider_hangs_and_a_restarted_one_keeps_its_keys(idp: Idp) -> None:
    kids = {k["kid"] for k in idp.jwks()["keys"]}
    idp.suspend()
    try:
        with pytest.raises(httpx.TimeoutException):
            httpx.get(idp.endpoint("jwks_uri"), timeout=0.5)
    finally:
        idp.resume()
    assert {k["kid"] for k in idp.jwks()["keys"]} == kids
    refused: list[type[Exception]] = []

    def down() -> None:
        try:
            httpx.get(idp.endpoint("jwks_uri"), timeout=2)
        except httpx.ConnectError as exc:
            refused.append(type(exc))

    issuer = idp.issuer
    idp.restart(down=down)
    assert refused == [httpx.ConnectError]
    assert idp.issuer == issuer
    assert {k["kid"] for k in idp.jwks()["keys"]} == kids
    assert verify(idp, idp.client_credentials("agent", resource=ES)["access_token"], ES)
