"""Secrets from HashiCorp Vault or OpenBao (KV version 2), read through ``hvac``.

Mapping from ``(connector, key)`` to Vault: the secret at KV v2 path
``{path_prefix}/{connector}`` (``_`` for no connector) under the mount ``mount``, field
``key``. ``("github", "token")`` with the defaults is field ``token`` of
``secret/toolkeeper/github`` (``bao kv put -mount=secret toolkeeper/github token=…``);
``(None, "token")`` is field ``token`` of ``secret/toolkeeper/_``. Only string fields are
values; a missing path, a deleted version or a missing field is ``secret_not_found``.

Authentication: ``token`` (``TOOLKEEPER_VAULT_TOKEN``, else ``VAULT_TOKEN``; read again after
a 403, so a rotated token is picked up) or ``approle`` (role id and secret id from
``TOOLKEEPER_VAULT_ROLE_ID``/``TOOLKEEPER_VAULT_SECRET_ID``, else the configured files; the
login is repeated when its token nears the end of its lease or a request gets 403).

A path read is cached ``cache_ttl_s`` seconds (bounded to ``cache_max_entries`` paths), so a
value changed in Vault is seen after at most that long. A Vault that cannot be reached, times
out or refuses the gateway stops the call with ``secrets_unavailable``. ``hvac`` is
synchronous: each read runs in a worker thread, bounded by ``timeout_s``.

Redaction (:meth:`VaultSecretsStore.known_values`, read when the gateway opens and when it
refreshes its secrets): every value under ``{path_prefix}/`` (the gateway's token needs
``list`` on ``{mount}/metadata/{path_prefix}``; without it a value is known once fetched), and
every value fetched so far (bounded). A call's own resolved values are redacted from it
regardless. Neither a value nor the token is ever logged or put in a message.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from toolkeeper.errors import ConfigError, ToolError
from toolkeeper.secrets.base import SecretNotFound

log = logging.getLogger("toolkeeper")
T = TypeVar("T")
TOKEN_ENVS = ("TOOLKEEPER_VAULT_TOKEN", "VAULT_TOKEN")
ROLE_ID_ENV = "TOOLKEEPER_VAULT_ROLE_ID"
SECRET_ID_ENV = "TOOLKEEPER_VAULT_SECRET_ID"
ADDR_ENV = "VAULT_ADDR"
NO_CONNECTOR = "_"
_SEEN_MAX = 4096
_RELOGIN_AT = 0.8  # of the AppRole token's lease


class VaultConfig(BaseModel):
    """``secrets: {backend: vault, vault: {...}}``; never holds a token or secret id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str | None = Field(default=None, description=(
        "Vault's address (``https://vault:8200``); default ``VAULT_ADDR``."))
    mount: str = Field(default="secret", min_length=1, description="The KV version 2 mount.")
    path_prefix: str = Field(default="toolkeeper", description=(
        "Prefix of every path: ``{path_prefix}/{connector}``."))
    auth: Literal["token", "approle"] = Field(default="token", description=(
        "``token``: from ``TOOLKEEPER_VAULT_TOKEN``/``VAULT_TOKEN``; ``approle``: login."))
    approle_mount: str = Field(default="approle", min_length=1, description=(
        "Where the AppRole auth method is mounted."))
    role_id_file: str | None = Field(default=None, description=(
        "AppRole: file holding the role id (``TOOLKEEPER_VAULT_ROLE_ID`` wins)."))
    secret_id_file: str | None = Field(default=None, description=(
        "AppRole: file holding the secret id (``TOOLKEEPER_VAULT_SECRET_ID`` wins)."))
    namespace: str | None = Field(default=None, description="Vault Enterprise / OpenBao namespace.")
    cache_ttl_s: float = Field(default=30, ge=0, le=3600, description=(
        "How long a read path is reused (0: read at every use)."))
    cache_max_entries: int = Field(default=256, ge=1, le=100_000, description=(
        "Paths kept in the cache at most (oldest dropped first)."))
    timeout_s: float = Field(default=5, gt=0, le=120, description=(
        "Bound on one secret read (login and retry included)."))
    verify: bool | str = Field(default=True, description=(
        "TLS verification: ``true``, ``false`` or a CA bundle file."))

    def relative_to(self, base_dir: Path) -> VaultConfig:
        """This config with its files (and a CA bundle) relative to ``base_dir``."""
        update: dict[str, Any] = {}
        for name in ("role_id_file", "secret_id_file"):
            value = getattr(self, name)
            if value is not None:
                update[name] = str(base_dir / value)
        if isinstance(self.verify, str):
            update["verify"] = str(base_dir / self.verify)
        return self.model_copy(update=update)


def vault_path(prefix: str, connector_id: str | None) -> str:
    """The KV v2 path of ``connector_id``'s secrets (see the module docstring)."""
    name = connector_id or NO_CONNECTOR
    prefix = prefix.strip("/")
    return f"{prefix}/{name}" if prefix else name


class VaultSecretsStore:
    """Secrets read from Vault KV v2 at use, through a short, bounded cache."""

    def __init__(self, config: VaultConfig, environ: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._env: Mapping[str, str] = os.environ if environ is None else environ
        self._clock = clock
        self._url = config.url or self._env.get(ADDR_ENV) or ""
        if not self._url:
            raise ConfigError(f"the vault secrets backend needs vault.url or {ADDR_ENV}")
        try:
            import hvac  # noqa: F401  (the optional extra: fail at open, not at a call)
        except ImportError:
            raise ConfigError("the vault secrets backend needs hvac: pip install "
                              "'toolkeeper[vault]'") from None
        self._credentials()  # fail at open, not at the first call
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[float, dict[str, str]]] = OrderedDict()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._client: Any = None
        self._relogin_at = float("inf")

    async def get_secret(self, connector_id: str | None, key: str) -> str:
        """Field ``key`` of the connector's path; ``SecretNotFound`` when absent,
        ``ToolError("secrets_unavailable")`` when Vault cannot answer."""
        if connector_id is not None and ("/" in connector_id or connector_id in (".", "..")):
            raise SecretNotFound(connector_id, key)
        path = vault_path(self._config.path_prefix, connector_id)
        data = self._cached(path)
        if data is None:
            data = await self._fetch(path)
        value = data.get(key)
        if not value:
            raise SecretNotFound(connector_id, key)
        return value

    def known_values(self) -> frozenset[str]:
        """Every value under the prefix (listed and read now, through the cache) and every
        value fetched so far; only the latter when Vault cannot be listed or read."""
        try:
            for path in self._call(self._list_paths):
                if self._cached(path) is None:
                    self._remember(path, self._read(path))
        except ToolError as exc:
            log.warning("vault secrets under %r not listed for redaction: %s",
                        self._config.path_prefix, exc.message)
        with self._lock:
            return frozenset(self._seen)

    async def _fetch(self, path: str) -> dict[str, str]:
        try:
            data = await asyncio.wait_for(asyncio.to_thread(self._read, path),
                                          timeout=self._config.timeout_s)
        except TimeoutError:
            raise _unavailable(f"no answer from Vault within {self._config.timeout_s:g} s",
                               retryable=True) from None
        self._remember(path, data)
        return data

    def _cached(self, path: str) -> dict[str, str] | None:
        with self._lock:
            entry = self._cache.get(path)
            if entry is None:
                return None
            if self._clock() >= entry[0]:
                del self._cache[path]
                return None
            return entry[1]

    def _remember(self, path: str, data: dict[str, str]) -> None:
        with self._lock:
            for value in data.values():
                self._seen[value] = None
                self._seen.move_to_end(value)
            while len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
            if self._config.cache_ttl_s <= 0 or not data:
                return
            self._cache[path] = (self._clock() + self._config.cache_ttl_s, data)
            self._cache.move_to_end(path)
            while len(self._cache) > self._config.cache_max_entries:
                self._cache.popitem(last=False)

    # --- in the worker thread ------------------------------------------------------------

    def _read(self, path: str) -> dict[str, str]:
        """The string fields at ``path`` (empty when there is no such secret)."""
        return self._call(lambda client: self._read_once(client, path))

    def _call(self, request: Callable[[Any], T]) -> T:
        """``request(client)``, logged in again once on 403; Vault's errors as reasons."""
        from hvac.exceptions import Forbidden, InvalidRequest, Unauthorized, VaultError

        try:
            try:
                return request(self._ready())
            except (Forbidden, Unauthorized):  # expired or rotated: log in / re-read once
                return request(self._ready(fresh=True))
        except ConfigError as exc:  # a token or secret id gone since the gateway opened
            raise _unavailable(exc.problems[0], retryable=False) from None
        except (Forbidden, Unauthorized, InvalidRequest) as exc:  # 400: a bad AppRole login
            raise _unavailable(f"Vault refused the gateway ({type(exc).__name__}): check "
                               "its token or AppRole and policy", retryable=False) from None
        except (VaultError, OSError) as exc:  # requests' errors are OSErrors
            raise _unavailable(f"Vault at {self._url} cannot be reached "
                               f"({type(exc).__name__})", retryable=True) from None

    def _list_paths(self, client: Any) -> list[str]:
        """The secret paths directly under the prefix (at most ``cache_max_entries``)."""
        from hvac.exceptions import InvalidPath

        prefix = self._config.path_prefix.strip("/")
        try:
            answer = client.secrets.kv.v2.list_secrets(path=prefix,
                                                       mount_point=self._config.mount)
        except InvalidPath:
            return []
        keys = ((answer or {}).get("data") or {}).get("keys") or []
        names = [k for k in keys if isinstance(k, str) and not k.endswith("/")]
        return [vault_path(prefix, name) for name in names[:self._config.cache_max_entries]]

    def _read_once(self, client: Any, path: str) -> dict[str, str]:
        from hvac.exceptions import InvalidPath

        try:
            answer = client.secrets.kv.v2.read_secret_version(
                path=path, mount_point=self._config.mount, raise_on_deleted_version=True)
        except InvalidPath:
            return {}
        fields = ((answer or {}).get("data") or {}).get("data") or {}
        return {str(k): v for k, v in fields.items() if isinstance(v, str) and v}

    def _ready(self, fresh: bool = False) -> Any:
        """The logged-in client (a new login or token when ``fresh`` or near expiry)."""
        with self._lock:
            if self._client is not None and not fresh and self._clock() < self._relogin_at:
                return self._client
        import hvac

        client = hvac.Client(url=self._url, token="", namespace=self._config.namespace,
                             verify=self._config.verify, timeout=self._config.timeout_s)
        relogin_at = float("inf")
        token, role_id, secret_id = self._credentials()
        if self._config.auth == "token":
            client.token = token
        else:
            answer = client.auth.approle.login(role_id=role_id, secret_id=secret_id,
                                               mount_point=self._config.approle_mount)
            lease = float(((answer or {}).get("auth") or {}).get("lease_duration") or 0)
            if lease > 0:
                relogin_at = self._clock() + lease * _RELOGIN_AT
        with self._lock:
            self._client, self._relogin_at = client, relogin_at
        return client

    def _credentials(self) -> tuple[str, str, str]:
        """``(token, role_id, secret_id)`` for the configured auth (unused ones empty)."""
        if self._config.auth == "token":
            token = next((self._env[n] for n in TOKEN_ENVS if self._env.get(n)), "")
            if not token:
                raise ConfigError("vault token auth needs TOOLKEEPER_VAULT_TOKEN or "
                                  "VAULT_TOKEN")
            return token.strip(), "", ""
        role_id = self._from(ROLE_ID_ENV, self._config.role_id_file, "role id")
        return "", role_id, self._from(SECRET_ID_ENV, self._config.secret_id_file, "secret id")

    def _from(self, env: str, file: str | None, what: str) -> str:
        if self._env.get(env):
            return self._env[env].strip()
        if file is None:
            raise ConfigError(f"vault approle auth needs its {what}: set {env} or the "
                              f"{what.replace(' ', '_')}_file")
        try:
            return Path(file).read_text(encoding="utf-8").strip()
        except OSError:
            raise ConfigError(f"vault approle {what} file cannot be read", path=file) from None


def _unavailable(message: str, *, retryable: bool) -> ToolError:
    return ToolError("secrets_unavailable", message, retryable=retryable)
