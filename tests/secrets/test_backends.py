"""The contract every secrets backend keeps (env, embedded, Vault): a value is read at use,
an unknown one is ``secret_not_found``, and a value handed out is known for redaction."""

from __future__ import annotations

import pytest

from tests.secrets.backends import Backend
from toolkeeper.secrets import SecretNotFound, SecretsStore


async def test_a_value_is_read_at_use_per_connector(secrets_backend: Backend) -> None:
    store = secrets_backend.store
    assert isinstance(store, SecretsStore)
    secrets_backend.put("github", "token", "ghp-first-value")  # after the store opened
    secrets_backend.put("crm", "token", "crm-other-value")
    secrets_backend.put(None, "token", "no-connector-value")
    assert await store.get_secret("github", "token") == "ghp-first-value"
    assert await store.get_secret("crm", "token") == "crm-other-value"
    assert await store.get_secret(None, "token") == "no-connector-value"


@pytest.mark.parametrize(("connector", "key"), [
    ("github", "missing"), ("nobody", "token"), (None, "token")])
async def test_an_unknown_secret_is_secret_not_found(secrets_backend: Backend,
                                                     connector: str | None, key: str) -> None:
    secrets_backend.put("github", "token", "ghp-present-value")
    with pytest.raises(SecretNotFound) as info:
        await secrets_backend.store.get_secret(connector, key)
    assert info.value.reason == "secret_not_found" and not info.value.retryable
    assert "ghp-present-value" not in info.value.message


async def test_a_value_handed_out_is_known_for_redaction(secrets_backend: Backend) -> None:
    secrets_backend.put("github", "token", "ghp-known-value")
    assert await secrets_backend.store.get_secret("github", "token") == "ghp-known-value"
    assert "ghp-known-value" in secrets_backend.store.known_values()
