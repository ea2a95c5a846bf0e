"""Access tokens at toolkeeper as a protected resource (issue 27 item 1 and its bad input):
each refusal has a clear message and reason ``unauthenticated``; the keys a provider
published keep working while it is down, slow or answering garbage, and a key rotated at
the provider is picked up."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from tests.identity.provider import Provider, provider
from toolkeeper.config.issuers import IssuerConfig, compiled
from toolkeeper.identity.metadata import challenge
from toolkeeper.identity.refused import TokenRefused
from toolkeeper.identity.tokens import AccessTokens
from toolkeeper.model.enums import Role

RESOURCE = "https://tk.example"


@pytest.fixture
def idp() -> Iterator[Provider]:
    with provider() as p:
        yield p


def verifier(p: Provider, **over: Any) -> AccessTokens:
    cfg = IssuerConfig.model_validate({
        "issuer": p.url, "timeout_s": 0.5, "jwks_refetch_interval_s": 0,
        "claims": {"tenant": "acme", "agent_claim": "client_id",
                   "roles": [{"claim": "groups", "value": "tk-approvers",
                              "role": "approver", "tenant": "acme"}],
                   "scopes": {"tools:read": ["read"], "tools:all": ["*"]}},
        **over})
    return AccessTokens([compiled(cfg, RESOURCE)], lambda t, a: (t, a) == ("acme", "bot"))


async def refused(v: AccessTokens, token: str) -> TokenRefused:
    with pytest.raises(TokenRefused) as caught:
        await v.verify(token)
    assert caught.value.reason == "unauthenticated" or caught.value.status == 403
    assert token not in caught.value.message
    return caught.value


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


async def test_a_valid_token_names_its_agent_and_is_then_answered_from_memory(
        idp: Provider) -> None:
    kid = idp.new_key()
    v = verifier(idp)
    token = idp.sign(kid, scope="tools:read other")
    who = await v.verify(token)
    assert (who.tenant_id, who.agent, who.roles) == ("acme", "bot", frozenset({Role.AGENT}))
    assert (who.subject, who.issuer, who.scopes) == ("svc-1", idp.url, frozenset({"read"}))
    idp.mode = "down"
    assert v.cached(token) is who


async def test_a_group_rule_makes_a_person_an_approver_of_its_tenant(idp: Provider) -> None:
    kid = idp.new_key()
    who = await verifier(idp).verify(idp.sign(kid, client_id="console", groups=["tk-approvers"],
                                               email="ann@acme.example", scope="tools:all"))
    assert (who.name, who.agent, who.roles) == ("ann@acme.example", None,
                                                frozenset({Role.APPROVER}))
    assert who.scopes is None  # "*" narrows nothing


async def test_a_token_that_maps_to_no_agent_nor_role_is_forbidden(idp: Provider) -> None:
    kid = idp.new_key()
    err = await refused(verifier(idp), idp.sign(kid, client_id="stranger"))
    assert err.status == 403 and err.reason == "forbidden" and err.error is None


@pytest.mark.parametrize(("claims", "why"), [
    ({"aud": "https://other.example"}, "another audience"),
    ({"exp": int(time.time()) - 3600}, "expired"),
    ({"nbf": int(time.time()) + 3600}, "not valid yet"),
    ({"iat": int(time.time()) + 3600}, "not valid yet"),
    ({"iss": "https://evil.example"}, "issuer is not trusted"),
])
async def test_wrong_audience_expired_early_and_wrong_issuer_are_refused(
        idp: Provider, claims: dict[str, Any], why: str) -> None:
    kid = idp.new_key()
    err = await refused(verifier(idp), idp.sign(kid, **claims))
    assert err.status == 401 and err.error == "invalid_token" and why in err.message


async def test_skew_within_the_leeway_is_accepted(idp: Provider) -> None:
    kid = idp.new_key()
    await verifier(idp).verify(idp.sign(kid, exp=int(time.time()) - 30))
    await refused(verifier(idp, leeway_s=0), idp.sign(kid, exp=int(time.time()) - 30))


async def test_alg_none_is_refused(idp: Provider) -> None:
    kid = idp.new_key()
    good = idp.sign(kid)
    payload = good.split(".")[1]
    unsigned = f"{_b64({'alg': 'none', 'kid': kid, 'typ': 'JWT'})}.{payload}."
    assert "algorithm 'none' is not allowed" in (await refused(verifier(idp), unsigned)).message


async def test_hs256_signed_with_the_public_key_is_refused(idp: Provider) -> None:
    # algorithm confusion: the public key (public data) used as an HMAC secret
    kid = idp.new_key()
    pem = idp.keys[kid].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    now = int(time.time())
    header = _b64({"alg": "HS256", "kid": kid, "typ": "JWT"})
    body = _b64({"iss": idp.url, "aud": RESOURCE, "client_id": "bot", "sub": "x",
                 "iat": now, "exp": now + 60})
    sig = base64.urlsafe_b64encode(hmac.new(pem, f"{header}.{body}".encode(),
                                            hashlib.sha256).digest()).rstrip(b"=").decode()
    err = await refused(verifier(idp), f"{header}.{body}.{sig}")
    assert "HS256" in err.message and "not allowed" in err.message


@pytest.mark.parametrize("token", ["a.b.c", "not-a-jwt", "x" * 9000, "a" * 20 + ".." + "b",
                                   _b64({"alg": "RS256"}) + "." + "!!!" + ".sig"])
async def test_malformed_and_oversized_tokens_are_refused(idp: Provider, token: str) -> None:
    idp.new_key()
    err = await refused(verifier(idp), token)
    assert err.status == 401


async def test_an_unknown_kid_is_refused_after_one_refetch(idp: Provider) -> None:
    kid = idp.new_key()
    v = verifier(idp)
    await v.verify(idp.sign(kid))
    stranger = Provider(url=idp.url)
    other = stranger.new_key()
    err = await refused(v, stranger.sign(other))
    assert "key the issuer does not publish" in err.message


async def test_a_key_rotated_at_the_provider_is_picked_up(idp: Provider) -> None:
    old = idp.new_key()
    v = verifier(idp)
    await v.verify(idp.sign(old))
    del idp.keys[old]
    new = idp.new_key()
    who = await v.verify(idp.sign(new))
    assert who.agent == "bot"


@pytest.mark.parametrize("mode", ["down", "slow", "garbage"])
async def test_cached_keys_keep_working_and_new_kids_are_refused_when_the_jwks_fails(
        idp: Provider, mode: str) -> None:
    kid = idp.new_key()
    v = verifier(idp)
    await v.verify(idp.sign(kid))
    idp.mode = mode
    assert (await v.verify(idp.sign(kid, jti="another"))).agent == "bot"  # known kid: no fetch
    new = idp.new_key()
    started = time.monotonic()
    err = await refused(v, idp.sign(new))
    assert err.reason == "unauthenticated" and "does not publish" in err.message
    assert time.monotonic() - started < 2.5  # bounded by timeout_s, not the provider
    assert (await v.verify(idp.sign(kid, jti="later"))).agent == "bot"  # still held


@pytest.mark.parametrize("mode", ["down", "slow", "garbage"])
async def test_no_keys_ever_fetched_refuses_with_a_clear_reason(idp: Provider,
                                                               mode: str) -> None:
    kid = idp.new_key()
    idp.mode = mode
    err = await refused(verifier(idp), idp.sign(kid))
    assert "signing keys cannot be had" in err.message


async def test_refetches_on_unknown_kids_are_rate_limited(idp: Provider) -> None:
    kid = idp.new_key()
    v = verifier(idp, jwks_refetch_interval_s=3600)
    await v.verify(idp.sign(kid))
    before = idp.fetches
    stranger = Provider(url=idp.url)
    other = stranger.new_key()
    for n in range(5):
        await refused(v, stranger.sign(other, jti=str(n)))
    assert idp.fetches == before


async def test_a_required_typ_refuses_id_tokens(idp: Provider) -> None:
    kid = idp.new_key()
    v = verifier(idp, required_typ="at+jwt")
    await v.verify(idp.sign(kid))
    plain = jwt.encode({"iss": idp.url, "aud": RESOURCE, "client_id": "bot",
                        "exp": int(time.time()) + 60}, idp.keys[kid], algorithm="RS256",
                       headers={"kid": kid, "typ": "JWT"})
    assert "typ" in (await refused(v, plain)).message


def test_hs_and_none_cannot_be_allowed_in_config() -> None:
    for alg in ("HS256", "none"):
        with pytest.raises(ValueError, match="not allowed"):
            IssuerConfig.model_validate({"issuer": "https://x", "algorithms": [alg],
                                         "claims": {"tenant": "t"}})


def test_an_introspection_secret_must_be_a_reference() -> None:
    with pytest.raises(ValueError, match="secret_literal_refused"):
        IssuerConfig.model_validate({"issuer": "https://x", "claims": {"tenant": "t"},
                                     "introspection": {"endpoint": "https://x/i",
                                                       "client_id": "c",
                                                       "client_secret": "hunter2"}})


def test_a_challenge_carries_only_printable_ascii_whatever_the_claims_said() -> None:
    # a refusal message may quote a claim (a tenant name): a header is Latin-1 bytes, and
    # a line break in it would split the response
    value = challenge("https://tk.example", "/mcp", error="invalid_token",
                      description="tenant 'caf\u00e9\r\nSet-Cookie: x' \u2026 \"quoted\"")
    value.encode("ascii")
    assert "\r" not in value and "\n" not in value and '\\"' not in value
    assert value.startswith('Bearer realm="toolkeeper", resource_metadata='
                            '"https://tk.example/.well-known/oauth-protected-resource/mcp"')
