"""Tenant credentials as rows, on SQLite and PostgreSQL: names per tenant, values sealed with
the tenant bound, and credentials written before the rows existed surviving the upgrade."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from tests.support.waiting import wait_until
from toolkeeper import Gateway
from toolkeeper.errors import ToolError
from toolkeeper.secrets.embedded import EmbeddedSecretsStore
from toolkeeper.store import Store
from toolkeeper.store.blobs import BlobRepo
from toolkeeper.store.db import Database
from toolkeeper.store.migrate import current, head, upgrade

KEY = os.urandom(32)


@pytest.fixture
def gw(db_url: str) -> Iterator[Gateway]:
    store = Store.open(db_url)
    with Gateway(store, secrets=EmbeddedSecretsStore(store.blobs, KEY)) as g:
        yield g


def _creds(gw: Gateway):  # type: ignore[no-untyped-def]
    assert gw.credentials is not None
    return gw.credentials


def test_each_tenant_has_its_own_credential_of_the_same_name(gw: Gateway) -> None:
    creds = _creds(gw)
    creds.put("acme", "crm", "api_key", "acme-value-1")
    creds.put("globex", "crm", "api_key", "globex-value-1")
    creds.put("acme", "crm", "api_key", "acme-value-2")  # replaces acme's only
    assert creds.get("acme", "crm", "api_key") == "acme-value-2"
    assert creds.get("globex", "crm", "api_key") == "globex-value-1"
    assert creds.names("acme") == [("crm", "api_key")]
    assert creds.get("initech", "crm", "api_key") is None
    assert creds.delete("initech", "crm", "api_key") is False  # another tenant's name: no
    assert creds.delete("acme", "crm", "api_key") is True
    assert creds.get("acme", "crm", "api_key") is None
    assert creds.get("globex", "crm", "api_key") == "globex-value-1"


def test_a_ciphertext_moved_to_another_tenants_row_fails_authentication(gw: Gateway) -> None:
    creds = _creds(gw)
    creds.put("acme", "crm", "api_key", "acme-value-1")
    creds.put("globex", "crm", "api_key", "globex-value-1")
    stolen = gw.store.credentials.get("acme", "crm", "api_key")
    assert stolen is not None and b"acme-value-1" not in stolen  # sealed at rest
    gw.store.credentials.put("globex", "crm", "api_key", stolen)
    with pytest.raises(ToolError) as err:
        creds.get("globex", "crm", "api_key")
    assert err.value.reason == "secret_not_found"
    gw.store.credentials.put("acme", "crm", "other", stolen)  # another name: fails too
    with pytest.raises(ToolError):
        creds.get("acme", "crm", "other")
    assert creds.get("acme", "crm", "api_key") == "acme-value-1"


def test_every_tenants_values_are_redacted(gw: Gateway) -> None:
    _creds(gw).put("acme", "crm", "api_key", "acme-secret-value")
    _creds(gw).put("globex", "crm", "api_key", "globex-secret-value")
    gw.refresh_secrets()
    text = gw.runtime.redactor.redact_text("acme-secret-value globex-secret-value")
    assert text == "*** ***"


def _old_state(url: str) -> None:
    """A store as the previous schema left it: owned blobs named ``connector/key`` and the
    owners setting, a webhook HMAC blob, and an operator's unowned platform secret."""
    upgrade(url, "0002")
    db = Database(url)
    try:
        old = EmbeddedSecretsStore(BlobRepo(db), KEY)
        old.set_secret("crm", "api_key", "acme-crm-value")
        old.set_secret("webhooks", "acme/hmac", "acme-webhook-hmac-value")
        old.set_secret("platform", "key", "operator-platform-value")
        settings = sa.table("settings", sa.column("key", sa.String),
                            sa.column("value", sa.JSON),
                            sa.column("updated_at", sa.DateTime(timezone=True)))
        with db.engine.begin() as conn:
            conn.execute(settings.insert().values(
                key="credentials:owners", value={"crm/api_key": "acme"},
                updated_at=datetime.now(UTC)))
    finally:
        db.dispose()


@pytest.mark.empty_database
def test_the_upgrade_turns_owned_credentials_into_rows_that_still_open(db_url: str) -> None:
    _old_state(db_url)
    store = Store.open(db_url)
    assert current(db_url) == head()
    migrated = store.credentials.get("acme", "crm", "api_key")
    assert migrated is not None and not EmbeddedSecretsStore.is_tenant_bound(migrated)
    assert store.registry.get_setting("credentials:owners") is None
    assert store.blobs.get_blob("crm/api_key") is None  # moved, not copied
    with Gateway(store, secrets=EmbeddedSecretsStore(store.blobs, KEY)) as gw:
        creds = _creds(gw)
        assert creds.get("acme", "crm", "api_key") == "acme-crm-value"
        assert creds.get("globex", "crm", "api_key") is None
        assert creds.get("acme", "webhooks", "acme/hmac") == "acme-webhook-hmac-value"
        platform = gw.runtime.secrets
        assert platform is not None
        assert gw.run_sync(platform.get_secret("platform", "key")) == "operator-platform-value"
        resealed = store.credentials.get("acme", "crm", "api_key")
        assert resealed is not None and EmbeddedSecretsStore.is_tenant_bound(resealed)
        assert "acme-crm-value" in gw.runtime.redactor.values


def test_a_credential_written_by_another_gateway_is_redacted_here(db_url: str) -> None:
    stores = [Store.open(db_url), Store.open(db_url)]
    a, b = (Gateway(s, secrets=EmbeddedSecretsStore(s.blobs, KEY)) for s in stores)
    try:
        _creds(a).put("acme", "crm", "api_key", "written-by-replica-a")
        wait_until(lambda: "written-by-replica-a" in b.runtime.redactor.values,
                   what="replica b learns the value")
        assert b.runtime.redactor.redact_text("x written-by-replica-a") == "x ***"
    finally:
        a.close()
        b.close()
