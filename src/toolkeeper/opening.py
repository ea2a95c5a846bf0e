"""Opening a gateway: the store, the config file's settings and secrets backend, then the
file synced and stale outcomes recovered (``Gateway.open``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toolkeeper.errors import ConfigError
from toolkeeper.model.enums import Mode
from toolkeeper.pipeline.runtime import Settings
from toolkeeper.providers.artifacts import ArtifactLibrary
from toolkeeper.providers.factory import ProviderFactory
from toolkeeper.secrets.base import SecretsStore
from toolkeeper.secrets.embedded import KEY_BYTES
from toolkeeper.store import Store
from toolkeeper.store.audit_chain import KEY_NEEDED
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_key import (
    CHECK_SETTING,
    KEY_FILE_ENV,
    SOURCE_SETTING,
    AuditKey,
    default_key_path,
    fingerprint,
    load_audit_key,
    make_key_file,
    where_looked,
)

AUTO = "auto"
CHECKPOINTS_ENV = "TOOLKEEPER_AUDIT_CHECKPOINTS"


if TYPE_CHECKING:  # for the type only: the config package loads when a file is given
    from toolkeeper.config.apply import ConfigTarget
    from toolkeeper.services.calls import CallService

    class Opened(ConfigTarget, Protocol):
        """What opening needs of the gateway it builds (``gateway.py`` sits above)."""

        @property
        def calls(self) -> CallService: ...
        def close(self) -> None: ...
        identity_config: Any
        audit_export_config: Any

    G = TypeVar("G", bound=Opened)


def open_gateway(cls: Callable[..., G], url: str | None, *, config: str | Path | None,
                 mode: Mode | str | None, secrets: SecretsStore | str | None,
                 secrets_key_file: str | Path | None, natives: Mapping[str, Any] | None,
                 functions: Mapping[str, Callable[..., Any]] | None, recover: bool,
                 settings: dict[str, Any]) -> G:
    """See :meth:`Gateway.open`."""
    from toolkeeper.builtins import BUILTINS
    from toolkeeper.store.db import DEFAULT_URL

    cfg, base_dir = None, Path.cwd()
    if config is not None:
        base_dir = Path(config).resolve().parent
        from toolkeeper.config import load_file
        from toolkeeper.config.apply import config_settings

        cfg = load_file(config)
        settings = {**config_settings(cfg), **settings}
        if cfg.artifacts is not None:
            settings.setdefault("artifacts_dir", str(base_dir / cfg.artifacts.dir))
    url = url or os.environ.get("TOOLKEEPER_DATABASE_URL") or (
        cfg.database if cfg is not None else None) or DEFAULT_URL
    if mode is not None:
        settings["mode"] = Mode(mode)
    redis_url = settings.pop("redis_url", None) or os.environ.get("TOOLKEEPER_REDIS_URL")
    master_key_file = secrets_key_file
    if master_key_file is None and cfg is not None and cfg.secrets is not None \
            and cfg.secrets.key_file is not None:
        master_key_file = base_dir / cfg.secrets.key_file
    store = _open_store(url, settings, master_key_file)
    # replicas on one PostgreSQL must agree on rate limits: count in the database unless
    # Redis does it; on SQLite in process unless asked (``serve --workers N`` asks)
    shared_limits = settings.pop("shared_rate_limits", not store.is_local)
    try:
        store.audit.seal()
        if isinstance(secrets, str):
            from toolkeeper.secrets import open_backend

            vault = cfg.secrets.vault if cfg is not None and cfg.secrets is not None else None
            secrets = open_backend(secrets, store.blobs, key_file=secrets_key_file,
                                   vault=None if vault is None else vault.relative_to(base_dir))
        elif cfg is not None and secrets is None:
            from toolkeeper.config.apply import secrets_store

            secrets = secrets_store(cfg, base_dir, store.blobs)
        gw_settings = Settings(**settings)
        factory = ProviderFactory(natives=natives, functions=functions, builtins=BUILTINS,
                                  artifacts=ArtifactLibrary(gw_settings.artifacts_dir))
        gw = cls(store, settings=gw_settings, secrets=secrets, factory=factory,
                 redis_url=redis_url, shared_rate_limits=shared_limits)
    except BaseException:
        store.close()
        raise
    gw.identity_config = cfg.identity if cfg is not None else None
    gw.audit_export_config = cfg.audit_export if cfg is not None else None
    try:
        if cfg is not None:
            from toolkeeper.config.apply import apply_config

            apply_config(gw, cfg, base_dir=base_dir)
        gw.registry.check_artifacts()  # changed while the gateway was down
        if recover:
            gw.calls.recover()
        # the heads as opened, and the file made now: `audit verify` run while this gateway
        # serves checks against it instead of warning that no checkpoint file exists
        gw.store.audit.checkpoint(force=True)
    except BaseException:
        gw.close()
        raise
    return gw


def _open_store(url: str, settings: dict[str, Any],
                master_key_file: str | Path | None) -> Store:
    """The store, keyed and checkpointed by the ``audit_*`` options taken from
    ``settings`` (they belong to the store, not to the gateway's settings)."""
    configured = load_audit_key(
        key=settings.pop("audit_key", None), key_file=settings.pop("audit_key_file", None),
        secrets_key_file=master_key_file, default_file=default_key_path(url))
    checkpoint_path = settings.pop("audit_checkpoint_path", None)
    every_s = settings.pop("audit_checkpoint_every_s", 10.0)
    store = Store.open(url)
    try:
        key = _store_key(store, url, configured)
        store.audit.key = key
        store.audit.checkpoints = _checkpoints(url, key, checkpoint_path, every_s)
    except BaseException:
        store.close()
        raise
    return store


def _store_key(store: Store, url: str, configured: AuditKey | None) -> AuditKey:
    """The key this store's chains are (or from now on will be) keyed with.

    None configured: a store already keyed is refused (its key is elsewhere); otherwise this
    is its first start keyed, and a key is made (in memory for an in-memory database). The
    store keeps the key's check value, the first writer's winning a race, so another key is
    refused rather than used to write chains that no longer verify; and where that key came
    from, so the refusal can say which key to configure."""
    check = store.registry.get_setting(CHECK_SETTING)
    key = configured
    if key is None:
        if check is not None or store.audit.keyed():
            keyed, use = _keyed_with(store, check)
            raise ConfigError((f"this store's audit chains are keyed with {keyed} and no "
                               f"audit key is configured here{use}" if keyed else KEY_NEEDED)
                              + f" (looked in {where_looked(url)})")
        path = default_key_path(url)
        try:
            key = AuditKey(os.urandom(KEY_BYTES), "a key in memory") if path is None else \
                AuditKey(make_key_file(path), f"the key file {path} (made for this store)",
                         f"{KEY_FILE_ENV}={path}")
        except OSError as exc:
            raise ConfigError(f"cannot make the audit key file {path} on this store's first "
                              f"start ({exc.strerror}): configure a key ({where_looked(url)})"
                              ) from None
    fresh = check is None and not store.audit.keyed()
    fits = store.audit.fits(key) if check is None else check == key.check()
    if fits and check is None:
        fits = store.registry.first_setting(CHECK_SETTING, key.check()) == key.check()
        if fits and fresh:
            store.registry.first_setting(SOURCE_SETTING, key.described())
            store.audit.keyed_now = key
    if not fits:
        keyed, use = _keyed_with(store, check)
        raise ConfigError("this store's audit chains are keyed with another audit key than "
                          f"the one in use here ({key.source}, fingerprint "
                          f"{key.fingerprint()})" + (f": with {keyed}{use}" if keyed else "")
                          + f" (looked in {where_looked(url)})")
    return key


def _keyed_with(store: Store, check: str | None) -> tuple[str, str]:
    """The key the store was keyed with, as far as it knows (``""``: nothing known), and
    ``": set …"``, the setting that selects it, when known."""
    record = store.registry.get_setting(SOURCE_SETTING)
    known = f"fingerprint {fingerprint(check)}" if check else ""
    if not isinstance(record, dict) or not record.get("source"):
        return (f"a key it does not name ({known})" if known else ""), ""
    return (f"{record['source']}" + (f" ({known})" if known else ""),
            f": set {record['hint']}" if record.get("hint") else "")


def audit_options(url: str, *, key: bytes | None = None, key_file: str | Path | None = None,
                  secrets_key_file: str | Path | None = None,
                  checkpoint_path: str | Path | None = None, every_s: float = 10.0,
                  ) -> tuple[AuditKey | None, Checkpoints | None]:
    """The audit key (``store/audit_key.py`` lists its sources, the default key file
    included; none is made here) and checkpoint file, for reading a store.

    ``checkpoint_path``: a path, else ``TOOLKEEPER_AUDIT_CHECKPOINTS``; ``"auto"`` (what
    ``toolkeeper serve`` and ``audit verify`` pass) is ``<sqlite file>.audit-checkpoints``
    when there is a key, else none. Checkpoints need the key that signs them.
    """
    audit_key = load_audit_key(key=key, key_file=key_file, secrets_key_file=secrets_key_file,
                               default_file=default_key_path(url))
    return audit_key, _checkpoints(url, audit_key, checkpoint_path, every_s)


def _checkpoints(url: str, audit_key: AuditKey | None, checkpoint_path: str | Path | None,
                 every_s: float) -> Checkpoints | None:
    path: str | Path | None = checkpoint_path
    if path in (None, AUTO):
        path = os.environ.get(CHECKPOINTS_ENV) or path
    if path == AUTO:
        path = default_checkpoint_path(url) if audit_key is not None else None
    if path is None:
        return None
    if audit_key is None:
        raise ConfigError("audit checkpoints are signed with the audit key: configure one "
                          "(TOOLKEEPER_AUDIT_KEY, an audit key file, or a secrets master key)")
    return Checkpoints(path, audit_key, every_s)


def default_checkpoint_path(url: str) -> Path | None:
    """``<database file>.audit-checkpoints`` for a SQLite file; none for other stores."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(os.path.abspath(parsed.database + ".audit-checkpoints"))
