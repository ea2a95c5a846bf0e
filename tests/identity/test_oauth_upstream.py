"""The OAuth-protected upstream (tests/peers/oauth_upstream.py) refuses what it should and
serves a good token from the test IdP, over MCP and over plain HTTP."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.idp import DEFAULT_RESOURCE, Idp, client
from tests.support.oauth_upstream import OAuthUpstream, sha256, start_oauth_upstream


@pytest.fixture(scope="module")
def jwt_upstream(idp: Idp, tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthUpstream]:
    with start_oauth_upstream(idp, tmp_path_factory.mktemp("up"), mode="jwt") as upstream:
        yield upstream


@pytest.fixture(scope="module")
def opaque_upstream(idp: Idp,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthUpstream]:
    with start_oauth_upstream(idp, tmp_path_factory.mktemp("up"), mode="introspect") as upstream:
        yield upstream


def token_for(idp: Idp, resource: str, scope: str = "upstream:call") -> str:
    return str(idp.client_credentials("toolkeeper", resource=resource,
                                      scope=scope)["access_token"])


def echo(upstream: OAuthUpstream, token: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.post(upstream.echo_url, json={"n": 1}, headers=headers, timeout=10)


async def _whoami(url: str, token: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from mcp import Client

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"whoami", "echo"}
        return (await client.call_tool("whoami", {})).structured_content


def whoami(upstream: OAuthUpstream, token: str) -> dict[str, Any]:
    return dict(anyio.run(_whoami, upstream.mcp_url, token))


def assert_invalid_token(answer: httpx.Response, upstream: OAuthUpstream) -> None:
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{upstream.metadata_url}"' in challenge


def test_metadata_names_the_idp(jwt_upstream: OAuthUpstream, idp: Idp) -> None:
    doc = httpx.get(jwt_upstream.metadata_url, timeout=10).json()
    assert doc["resource"] == jwt_upstream.resource
    assert doc["authorization_servers"] == [idp.issuer]
    assert doc["scopes_supported"] == ["upstream:call"]


def test_no_token_is_refused_with_a_challenge(jwt_upstream: OAuthUpstream) -> None:
    assert_invalid_token(echo(jwt_upstream, None), jwt_upstream)
    answer = httpx.post(jwt_upstream.mcp_url, json={}, timeout=10,
                        headers={"accept": "application/json, text/event-stream"})
    assert_invalid_token(answer, jwt_upstream)


def test_a_good_token_is_served_over_http_and_mcp(jwt_upstream: OAuthUpstream,
                                                    idp: Idp) -> None:
    token = token_for(idp, jwt_upstream.resource)
    answer = echo(jwt_upstream, token)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"echo": {"n": 1}, "sub": "toolkeeper", "client_id": "toolkeeper",
                             "act": None, "scope": "upstream:call"}
    me = whoami(jwt_upstream, token)
    assert (me["sub"], me["client_id"], me["aud"]) == (
        "toolkeeper", "toolkeeper", jwt_upstream.resource)
    assert {"sha256": sha256(token), "accepted": True} in jwt_upstream.seen()


def test_an_exchanged_token_shows_the_subject_and_the_actor(jwt_upstream: OAuthUpstream,
                                                             idp: Idp) -> None:
    person = idp.login_code_flow("console", "alice", resource=DEFAULT_RESOURCE,
                                 scope="openid tools:call")
    exchanged = idp.token_exchange("toolkeeper", person["access_token"],
                                   resource=jwt_upstream.resource, scope="upstream:call")
    me = whoami(jwt_upstream, exchanged["access_token"])
    assert (me["sub"], me["client_id"], me["act"]) == ("alice", "toolkeeper",
                                                       {"sub": "toolkeeper"})


def test_a_token_for_another_audience_is_refused(jwt_upstream: OAuthUpstream,
                                                 idp: Idp) -> None:
    token = token_for(idp, DEFAULT_RESOURCE, scope="tools:call")
    assert_invalid_token(echo(jwt_upstream, token), jwt_upstream)
    assert {"sha256": sha256(token), "accepted": False} in jwt_upstream.seen()


def test_a_token_signed_by_another_key_is_refused(jwt_upstream: OAuthUpstream,
                                                  idp: Idp) -> None:
    genuine = token_for(idp, jwt_upstream.resource)
    claims = jwt.decode(genuine, options={"verify_signature": False})
    forged = jwt.encode(claims, rsa.generate_private_key(public_exponent=65537, key_size=2048),
                        algorithm="RS256",
                        headers={"kid": jwt.get_unverified_header(genuine)["kid"],
                                 "typ": "at+jwt"})
    assert_invalid_token(echo(jwt_upstream, forged), jwt_upstream)


def test_a_token_without_the_scope_gets_403(jwt_upstream: OAuthUpstream, idp: Idp) -> None:
    token = token_for(idp, jwt_upstream.resource, scope="upstream:read")
    answer = echo(jwt_upstream, token)
    assert answer.status_code == 403
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]


def test_a_revoked_token_is_refused_at_once(opaque_upstream: OAuthUpstream, idp: Idp) -> None:
    token = token_for(idp, opaque_upstream.resource)
    assert token.count(".") == 0
    assert echo(opaque_upstream, token).status_code == 200
    assert whoami(opaque_upstream, token)["sub"] == "toolkeeper"
    idp.revoke(token)
    assert_invalid_token(echo(opaque_upstream, token), opaque_upstream)


def test_a_revoked_grant_ends_the_exchanged_token(opaque_upstream: OAuthUpstream,
                                                  idp: Idp) -> None:
    person = idp.login_code_flow("console", "bob", resource=DEFAULT_RESOURCE,
                                 scope="openid tools:call")
    exchanged = idp.token_exchange("toolkeeper", person["access_token"],
                                   resource=opaque_upstream.resource)["access_token"]
    assert echo(opaque_upstream, exchanged).json()["act"] == {"sub": "toolkeeper"}
    assert idp.revoke_grants(client_id="toolkeeper", sub="bob") >= 1
    assert_invalid_token(echo(opaque_upstream, exchanged), opaque_upstream)


def test_a_token_for_the_jwt_upstream_is_refused_by_the_other(
        opaque_upstream: OAuthUpstream, jwt_upstream: OAuthUpstream, idp: Idp) -> None:
    token = token_for(idp, jwt_upstream.resource)
    assert_invalid_token(echo(opaque_upstream, token), opaque_upstream)


def test_an_active_opaque_token_for_another_resource_is_refused(
        opaque_upstream: OAuthUpstream, idp: Idp) -> None:
    other = "http://127.0.0.1/other-opaque-resource"
    idp.add_resource(other, scope="upstream:call", format="opaque")
    token = token_for(idp, other)
    assert idp.introspect(token)["active"] is True
    assert_invalid_token(echo(opaque_upstream, token), opaque_upstream)


class _Memory:
    """The MCP client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def _discovering_client(upstream: OAuthUpstream, idp: Idp) -> tuple[Any, _Memory]:
    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from pydantic import AnyUrl

    from mcp import Client

    redirect = "http://127.0.0.1/mcp-client/callback"
    landed: list[str] = []

    async def redirect_handler(url: str) -> None:  # the "browser": alice signs in
        landed.append(await anyio.to_thread.run_sync(idp.sign_in, url, "alice"))

    async def callback_handler() -> AuthorizationCodeResult:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landed[-1]).query))
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"),
                                       iss=query.get("iss"))

    storage = _Memory()
    auth = OAuthClientProvider(
        upstream.mcp_url,
        OAuthClientMetadata(redirect_uris=[AnyUrl(redirect)], client_name="an MCP client",
                            grant_types=["authorization_code", "refresh_token"],
                            response_types=["code"], token_endpoint_auth_method="none"),
        storage, redirect_handler=redirect_handler, callback_handler=callback_handler)
    async with httpx2.AsyncClient(auth=auth) as http, \
            Client(streamable_http_client(upstream.mcp_url, http_client=http)) as client:
        return (await client.call_tool("whoami", {})).structured_content, storage


def test_an_mcp_client_discovers_the_idp_from_the_401(jwt_upstream: OAuthUpstream,
                                                       idp: Idp) -> None:
    me, storage = anyio.run(_discovering_client, jwt_upstream, idp)
    assert me["sub"] == "alice"
    assert me["aud"] == jwt_upstream.resource
    assert storage.client is not None  # registered itself (RFC 7591)
    assert me["client_id"] == storage.client.client_id


def test_an_id_token_with_the_upstream_as_audience_is_refused(jwt_upstream: OAuthUpstream,
                                                               idp: Idp) -> None:
    # A client whose id is the upstream's URL gets ID tokens with that audience: still not an
    # access token (typ), so still refused.
    idp.add_client(client(jwt_upstream.resource, grant_types=["authorization_code"],
                          redirect_uris=["http://127.0.0.1/confused"]))
    id_token = idp.login_code_flow(jwt_upstream.resource, "alice", scope="openid")["id_token"]
    assert jwt.decode(id_token, options={"verify_signature": False})["aud"] == \
        jwt_upstream.resource
    assert_invalid_token(echo(jwt_upstream, id_token), jwt_upstream)
