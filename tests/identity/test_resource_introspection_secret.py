"""The resource server's introspection client authenticates like the upstream one: its id
and secret form-encoded before Basic (RFC 6749 §2.3.1), against the real IdP."""

from __future__ import annotations

import asyncio

from tests.support.idp import Idp, client
from toolkeeper.config.issuers import IssuerConfig, compiled
from toolkeeper.identity.tokens import AccessTokens

ODD_SECRET = "a+b%2Fc:d/e f=="


def test_an_introspection_secret_with_reserved_characters_reaches_the_idp(
        idp: Idp) -> None:
    resource = "http://127.0.0.1:9/odd-opaque"
    idp.add_resource(resource, scope="tools", format="opaque")
    idp.add_client(client("tk-odd", secret=ODD_SECRET))
    token = idp.client_credentials("tk-odd", resource=resource, scope="tools")["access_token"]

    async def secret(connector: str | None, key: str) -> str:
        assert (connector, key) == ("idp", "odd")
        return ODD_SECRET

    cfg = IssuerConfig.model_validate({
        "issuer": idp.issuer, "timeout_s": 5,
        "introspection": {"endpoint": idp.endpoint("introspection_endpoint"),
                          "client_id": "tk-odd", "client_secret": "${secret:idp/odd}"},
        "claims": {"tenant": "acme", "agent_claim": "client_id"}})
    tokens = AccessTokens([compiled(cfg, resource)],
                          lambda tenant, agent: (tenant, agent) == ("acme", "tk-odd"),
                          secrets=secret)
    who = asyncio.run(tokens.verify(token))
    assert (who.tenant_id, who.agent) == ("acme", "tk-odd")
