"""Every secrets backend behind one fixture, so the secret-boundary tests run on each.

A plugin of ``tests/conftest.py``: any test may take ``secrets_backend``, a
:class:`Backend` whose ``store`` is a ``SecretsStore`` and whose ``put`` writes a value the
way an operator would (an environment variable, the embedded store, ``bao kv put``). The
Vault one talks to a real OpenBao dev server started once per module (skipped loudly when
``bao`` is missing, failing in CI).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.openbao import OpenBaoServer, OpenBaoUnavailable
from toolkeeper.secrets import (
    EmbeddedSecretsStore,
    EnvSecretsStore,
    MemoryBlobStore,
    SecretsStore,
    VaultConfig,
    VaultSecretsStore,
    env_var_name,
    vault_path,
)

BACKENDS = ("env", "embedded", "vault")


@dataclass
class Backend:
    name: str
    store: SecretsStore
    put: Callable[[str | None, str, str], None]
    """``put(connector, key, value)``: store a value where the backend reads it."""


def admin(server: OpenBaoServer) -> Any:
    """An hvac client with the dev server's root token."""
    import hvac

    return hvac.Client(url=server.url, token=server.root_token, timeout=10)


def vault_put(server: OpenBaoServer, prefix: str) -> Callable[[str | None, str, str], None]:
    """``put(connector, key, value)`` into the KV v2 path the store maps ``connector`` to,
    keeping the path's other fields (as ``bao kv patch`` would)."""
    from hvac.exceptions import InvalidPath

    def put(connector: str | None, key: str, value: str) -> None:
        kv = admin(server).secrets.kv.v2
        path = vault_path(prefix, connector)
        try:
            fields = dict(kv.read_secret_version(path=path, raise_on_deleted_version=True)
                          ["data"]["data"])
        except InvalidPath:
            fields = {}
        kv.create_or_update_secret(path=path, secret={**fields, key: value})

    return put


@pytest.fixture(scope="module")
def openbao() -> Iterator[OpenBaoServer]:
    """A real OpenBao dev server on a free loopback port, stopped after the module."""
    server = OpenBaoServer()
    try:
        server.start()
    except OpenBaoUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"OPENBAO NOT AVAILABLE in CI: {exc}", pytrace=False)
        pytest.skip(f"OPENBAO NOT AVAILABLE, Vault tests NOT RUN: {exc}")
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def secrets_backend(request: pytest.FixtureRequest) -> Backend:
    """Each backend in turn, empty (the Vault one under a path prefix of its own)."""
    if request.param == "env":
        environ: dict[str, str] = {}
        return Backend("env", EnvSecretsStore(environ),
                       lambda c, k, v: environ.__setitem__(env_var_name(c, k), v))
    if request.param == "embedded":
        store = EmbeddedSecretsStore(MemoryBlobStore(), os.urandom(32))
        return Backend("embedded", store, store.set_secret)
    server: OpenBaoServer = request.getfixturevalue("openbao")
    prefix = f"t-{uuid.uuid4().hex[:12]}"
    vault = VaultSecretsStore(VaultConfig(url=server.url, path_prefix=prefix),
                              environ={"VAULT_TOKEN": server.root_token})
    return Backend("vault", vault, vault_put(server, prefix))
