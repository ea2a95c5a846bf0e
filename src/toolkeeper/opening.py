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
from toolkeeper.store import Store
from toolkeeper.store.audit import KEY_NEEDED
from toolkeeper.store.audit_checkpoints import Checkpoints
from toolkeeper.store.audit_key import AuditKey, load_audit_key

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
    audit_key, store = _open_store(url, settings, master_key_file)
    # replicas on one PostgreSQL must agree on rate limits: count in the database
    # unless Redis does it (SQLite is one machine's embedded store: count in process)
    shared_limits = settings.pop("shared_rate_limits", not store.is_local)
    try:
        if audit_key is None and store.audit.keyed():
            raise ConfigError(KEY_NEEDED)
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
    try:
        if cfg is not None:
            from toolkeeper.config.apply import apply_config

            apply_config(gw, cfg, base_dir=base_dir)
        gw.registry.check_artifacts()  # changed while the gateway was down
        if recover:
            gw.calls.recover()
    except BaseException:
        gw.close()
        raise
    return gw


def _open_store(url: str, settings: dict[str, Any],
                master_key_file: str | Path | None) -> tuple[AuditKey | None, Store]:
    """The store, keyed and checkpointed by the ``audit_*`` options taken from
    ``settings`` (they belong to the store, not to the gateway's settings)."""
    audit_key, checkpoints = audit_options(
        url, key=settings.pop("audit_key", None), key_file=settings.pop("audit_key_file", None),
        secrets_key_file=master_key_file,
        checkpoint_path=settings.pop("audit_checkpoint_path", None),
        every_s=settings.pop("audit_checkpoint_every_s", 10.0))
    return audit_key, Store.open(url, audit_key=audit_key, checkpoints=checkpoints)


def audit_options(url: str, *, key: bytes | None = None, key_file: str | Path | None = None,
                  secrets_key_file: str | Path | None = None,
                  checkpoint_path: str | Path | None = None, every_s: float = 10.0,
                  ) -> tuple[AuditKey | None, Checkpoints | None]:
    """The audit key (``store/audit_key.py`` lists its sources) and checkpoint file.

    ``checkpoint_path``: a path, else ``TOOLKEEPER_AUDIT_CHECKPOINTS``; ``"auto"`` (what
    ``toolkeeper serve`` and ``audit verify`` pass) is ``<sqlite file>.audit-checkpoints``
    when a key is configured, else none. Checkpoints need the key that signs them.
    """
    audit_key = load_audit_key(key=key, key_file=key_file, secrets_key_file=secrets_key_file)
    path: str | Path | None = checkpoint_path
    if path in (None, AUTO):
        path = os.environ.get(CHECKPOINTS_ENV) or path
    if path == AUTO:
        path = default_checkpoint_path(url) if audit_key is not None else None
    if path is None:
        return audit_key, None
    if audit_key is None:
        raise ConfigError("audit checkpoints are signed with the audit key: configure one "
                          "(TOOLKEEPER_AUDIT_KEY, an audit key file, or a secrets master key)")
    return audit_key, Checkpoints(path, audit_key, every_s)


def default_checkpoint_path(url: str) -> Path | None:
    """``<database file>.audit-checkpoints`` for a SQLite file; none for other stores."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite") or parsed.database in (None, "", ":memory:"):
        return None
    return Path(os.path.abspath(parsed.database + ".audit-checkpoints"))
