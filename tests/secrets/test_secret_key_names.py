"""Which config keys name a credential (a literal under one is refused, SPEC §6): an
authorization server's address is not one, a URL under a credential's name still is."""

from __future__ import annotations

import pytest

from toolkeeper.secrets.base import literal_secrets, sensitive


@pytest.mark.parametrize("key", ["token_endpoint", "tokenUrl", "jwks_uri",
                                 "introspection_endpoint", "authorization_endpoint",
                                 "access_token_url", "revocation_endpoint"])
def test_an_authorization_servers_address_is_not_a_credential(key: str) -> None:
    assert not sensitive(key)


@pytest.mark.parametrize("key", ["secret_url", "api_key_url", "webhookSecretUri",
                                 "password_endpoint", "client_secret", "access_token",
                                 "Authorization"])
def test_a_credential_named_key_stays_one_whatever_it_ends_with(key: str) -> None:
    assert sensitive(key)


def test_a_literal_under_secret_url_is_refused() -> None:
    config = {"oauth": {"token_endpoint": "https://idp.example/token",
                        "secret_url": "https://hooks.example/T0/B0/abcdef"}}
    assert list(literal_secrets(config)) == [("oauth", "secret_url")]
