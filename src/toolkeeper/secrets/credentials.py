"""Tenants' own credentials, and the one rule for which secret a call of a tenant gets.

A credential is a row per (tenant, connector, key): names are per tenant, so two tenants may
both have ``crm/api_key`` and neither learns of the other's. Values are sealed by the
embedded secrets store with the tenant in the associated data.

Resolution (:func:`tenant_getter`): a reference resolves in the scope of whoever WROTE it,
that is of the record holding it (a tool definition, an agent endpoint, a webhook…), never
of the tool that happens to carry it. A reference in a record of tenant T asking for
``connector/key`` gets T's own credential; if T has none, the operator's platform secret
(the configured ``SecretsStore``) only when the operator wrote the record (origin ``code``
or ``config``, :func:`platform_allowed`); else ``secret_not_found``. Another tenant's row is
never consulted. The row is read when a secret is resolved, not per call:
calls that use no secret pay nothing, and a write is seen by every process at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Protocol

from toolkeeper.errors import ToolError
from toolkeeper.secrets.base import SecretNotFound, SecretsStore
from toolkeeper.secrets.embedded import EmbeddedSecretsStore

log = logging.getLogger("toolkeeper")
Getter = Callable[[str | None, str], Awaitable[str]]
"""``(connector, key) -> value`` (the providers' ``SecretGetter``)."""


class CredentialRows(Protocol):
    """Where the sealed rows live (``toolkeeper.store.credentials.CredentialRepo``)."""

    def put(self, tenant_id: str, connector: str, key: str, data: bytes) -> None: ...
    def replace(self, tenant_id: str, connector: str, key: str, old: bytes,
                new: bytes) -> bool: ...
    def get(self, tenant_id: str, connector: str, key: str) -> bytes | None: ...
    def delete(self, tenant_id: str, connector: str, key: str) -> bool: ...
    def names(self, tenant_id: str) -> list[tuple[str, str]]: ...
    def rows(self) -> list[tuple[str, str, str, bytes]]: ...
    def version(self) -> int: ...


class TenantCredentials:
    """Every tenant's credentials: write, list and delete one tenant's, resolve at use."""

    def __init__(self, rows: CredentialRows, sealer: EmbeddedSecretsStore) -> None:
        self._rows = rows
        self._sealer = sealer
        self._lock = threading.Lock()
        self._known: tuple[int, frozenset[str]] | None = None

    @classmethod
    def over(cls, rows: CredentialRows,
             secrets: SecretsStore | None) -> TenantCredentials | None:
        """Credentials sealed by ``secrets`` when it is the embedded store (else ``None``:
        nothing could seal them); rows migrated in the old format are re-sealed now."""
        if not isinstance(secrets, EmbeddedSecretsStore):
            return None
        creds = cls(rows, secrets)
        creds.reseal_migrated()
        return creds

    def put(self, tenant_id: str, connector: str, key: str, value: str) -> None:
        """Create or replace the tenant's credential ``connector/key``."""
        sealed = self._sealer.seal_credential(tenant_id, connector, key, value)
        self._rows.put(tenant_id, connector, key, sealed)

    def delete(self, tenant_id: str, connector: str, key: str) -> bool:
        """Remove it; ``False`` when this tenant has none by that name."""
        return self._rows.delete(tenant_id, connector, key)

    def names(self, tenant_id: str) -> list[tuple[str, str]]:
        """The tenant's ``(connector, key)`` names (never values, never other tenants')."""
        return self._rows.names(tenant_id)

    def get(self, tenant_id: str, connector: str | None, key: str) -> str | None:
        """The tenant's value, ``None`` if it has none; ``ToolError`` if it was tampered."""
        blob = self._rows.get(tenant_id, connector or "", key)
        if blob is None:
            return None
        return self._sealer.open_credential(tenant_id, connector or "", key, blob)

    def changed(self) -> bool:
        """Whether any process wrote a credential since :meth:`known_values` last read."""
        known = self._known
        return known is None or known[0] != self._rows.version()

    def known_values(self) -> frozenset[str]:
        """Every tenant's values, for redaction (decrypted again only after a write)."""
        with self._lock:
            version = self._rows.version()  # before the rows: a later write re-reads them
            if self._known is None or self._known[0] != version:
                self._known = (version, frozenset(self._values()))
            return self._known[1]

    def _values(self) -> list[str]:
        values = []
        for tenant, connector, key, blob in self._rows.rows():
            try:
                values.append(self._sealer.open_credential(tenant, connector, key, blob))
            except ToolError:  # tampered: never handed out, so nothing to redact
                log.warning("credential %s/%s of tenant %s does not authenticate",
                            connector, key, tenant)
        return values

    def reseal_migrated(self) -> int:
        """Re-seal rows still in the pre-tenant format with their tenant bound; returns how
        many. A row written meanwhile is left alone (compare-and-swap on the old bytes)."""
        done = 0
        for tenant, connector, key, blob in self._rows.rows():
            if self._sealer.is_tenant_bound(blob):
                continue
            try:
                value = self._sealer.open_credential(tenant, connector, key, blob)
            except ToolError:
                continue
            new = self._sealer.seal_credential(tenant, connector, key, value)
            done += self._rows.replace(tenant, connector, key, blob, new)
        return done


OPERATOR_ORIGINS = frozenset({"code", "config"})
"""The ``origin`` of records the operator wrote (library code, a config file, the CLI)."""


def platform_allowed(written_by: str) -> bool:
    """The scope rule: may a reference written in a record of this ``origin`` reach the
    operator's platform secrets? Only the operator's own records; ``api`` (a tenant admin
    over REST) or anything unknown reaches the tenant's own credentials only."""
    return written_by in OPERATOR_ORIGINS


def tenant_getter(platform: SecretsStore | None, credentials: TenantCredentials | None,
                  tenant_id: str, *, written_by: str) -> Getter | None:
    """Secret look-ups for references in a record of ``tenant_id`` (the rule in the module
    docstring); ``None`` when there is nowhere to look. ``written_by``: the ``origin`` of the
    record holding the reference (``code``, ``config`` or ``api``)."""
    allowed = platform_allowed(written_by)
    fallback = platform.get_secret if platform is not None and allowed else None
    if credentials is None and fallback is None:
        return None

    async def resolve(connector: str | None, key: str) -> str:
        if credentials is not None:
            value = credentials.get(tenant_id, connector, key)
            if value is not None:
                return value
        if fallback is None:
            raise SecretNotFound(connector, key)
        return await fallback(connector, key)

    return resolve


def own_credentials(credentials: TenantCredentials | None,
                    tenant_id: str) -> Callable[[str, str], Awaitable[str | None]] | None:
    """Look-ups of ``tenant_id``'s own credentials only (``None`` when absent), for a tool
    that chooses among several names itself (``web_search``); never a platform secret."""
    if credentials is None:
        return None

    async def lookup(connector: str, key: str) -> str | None:
        return credentials.get(tenant_id, connector, key)

    return lookup


def redactable(platform: SecretsStore | None,
               credentials: TenantCredentials | None) -> frozenset[str]:
    """Every value the gateway can hand out: platform secrets and every tenant's."""
    values = platform.known_values() if platform is not None else frozenset()
    return (values | credentials.known_values()) if credentials is not None else values
