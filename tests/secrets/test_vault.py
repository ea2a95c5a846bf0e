"""The Vault secrets backend against a real OpenBao dev server (``bao server -dev``): the
path mapping, the cache and its expiry, token and AppRole auth, and Vault being down.

The contract every backend keeps (read at use, ``secret_not_found``, redaction, the planted
secret that never leaks) runs on Vault too: tests/secrets/test_backends.py and
tests/pipeline/test_secrets_and_audit.py take the ``secrets_backend`` fixture.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.secrets.backends import admin, vault_put
from tests.support.openbao import OpenBaoServer, bao_binary, free_port
from toolkeeper import Gateway
from toolkeeper.errors import ConfigError, ToolError
from toolkeeper.secrets import SecretNotFound, VaultConfig, VaultSecretsStore

# a real OpenBao dev server process: CI and `make test-all` run it, `make test` leaves it out
pytestmark = pytest.mark.slow


def _prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def _store(server: OpenBaoServer, prefix: str, **config: Any) -> VaultSecretsStore:
    return VaultSecretsStore(VaultConfig(url=server.url, path_prefix=prefix, **config),
                             environ={"VAULT_TOKEN": server.root_token})


class Clock:
    """A monotonic clock the test moves (the cache's expiry without waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_documented_mapping_is_what_bao_kv_put_writes(openbao: OpenBaoServer) -> None:
    binary = bao_binary()
    assert binary is not None
    env = {"BAO_ADDR": openbao.url, "BAO_TOKEN": openbao.root_token, "PATH": ""}
    for path, field in (("toolkeeper/github", "token=ghp-from-bao-cli"),
                        ("toolkeeper/_", "token=no-connector-from-cli")):
        subprocess.run([binary, "kv", "put", "-mount=secret", path, field], env=env,
                       check=True, capture_output=True, timeout=30)
    store = VaultSecretsStore(VaultConfig(url=openbao.url),  # mount secret, prefix toolkeeper
                              environ={"VAULT_TOKEN": openbao.root_token})
    assert await store.get_secret("github", "token") == "ghp-from-bao-cli"
    assert await store.get_secret(None, "token") == "no-connector-from-cli"
    with pytest.raises(SecretNotFound):
        await store.get_secret("../github", "token")  # a connector is one path segment


async def test_a_changed_value_is_seen_after_the_ttl_not_before(openbao: OpenBaoServer) -> None:
    prefix, clock = _prefix(), Clock()
    put = vault_put(openbao, prefix)
    put("crm", "api_key", "crm-value-one")
    store = VaultSecretsStore(VaultConfig(url=openbao.url, path_prefix=prefix, cache_ttl_s=30),
                              environ={"VAULT_TOKEN": openbao.root_token}, clock=clock)
    assert await store.get_secret("crm", "api_key") == "crm-value-one"
    put("crm", "api_key", "crm-value-two")
    clock.now += 29
    assert await store.get_secret("crm", "api_key") == "crm-value-one"  # cached
    clock.now += 1
    assert await store.get_secret("crm", "api_key") == "crm-value-two"  # expired: read again
    assert {"crm-value-one", "crm-value-two"} <= store.known_values()


async def test_the_cache_is_bounded_and_ttl_zero_reads_every_time(
        openbao: OpenBaoServer) -> None:
    prefix = _prefix()
    put = vault_put(openbao, prefix)
    put("a", "k", "a-value-one")
    put("b", "k", "b-value-one")
    bounded = _store(openbao, prefix, cache_max_entries=1)
    uncached = _store(openbao, prefix, cache_ttl_s=0)
    for store in (bounded, uncached):
        assert await store.get_secret("a", "k") == "a-value-one"
    assert await bounded.get_secret("b", "k") == "b-value-one"  # drops a from the cache
    put("a", "k", "a-value-two")
    assert await bounded.get_secret("a", "k") == "a-value-two"
    assert await uncached.get_secret("a", "k") == "a-value-two"


async def test_vault_down_is_a_retryable_secrets_unavailable(caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    token = f"root-{uuid.uuid4().hex}"
    store = VaultSecretsStore(VaultConfig(url=f"http://127.0.0.1:{free_port()}", timeout_s=5),
                              environ={"VAULT_TOKEN": token})
    with pytest.raises(ToolError) as info:
        await store.get_secret("github", "token")
    assert info.value.reason == "secrets_unavailable" and info.value.retryable
    assert "cannot be reached" in info.value.message
    assert store.known_values() == frozenset()  # listing fails too: logged, not raised
    assert "not listed for redaction" in caplog.text
    assert token not in caplog.text and token not in info.value.message


async def test_a_vault_that_never_answers_is_a_retryable_secrets_unavailable() -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        store = VaultSecretsStore(VaultConfig(url=url, timeout_s=0.5),
                                  environ={"VAULT_TOKEN": "some-token-value"})
        with pytest.raises(ToolError) as info:
            await store.get_secret("github", "token")
    assert info.value.reason == "secrets_unavailable" and info.value.retryable


async def test_the_token_comes_from_the_environment_and_is_read_again_after_a_403(
        openbao: OpenBaoServer, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    prefix = _prefix()
    vault_put(openbao, prefix)("github", "token", "ghp-by-token-auth")
    config = VaultConfig(url=openbao.url, path_prefix=prefix, cache_ttl_s=0)
    wins = VaultSecretsStore(config, environ={"TOOLKEEPER_VAULT_TOKEN": openbao.root_token,
                                              "VAULT_TOKEN": "not-a-valid-token"})
    assert await wins.get_secret("github", "token") == "ghp-by-token-auth"
    environ = {"VAULT_TOKEN": "revoked-token-value"}
    rotated = VaultSecretsStore(config, environ=environ)
    with pytest.raises(ToolError) as info:
        await rotated.get_secret("github", "token")
    assert info.value.reason == "secrets_unavailable" and not info.value.retryable
    environ["VAULT_TOKEN"] = openbao.root_token  # the operator rotates the token
    assert await rotated.get_secret("github", "token") == "ghp-by-token-auth"
    assert openbao.root_token not in caplog.text and "revoked-token-value" not in caplog.text


@pytest.mark.parametrize("missing", [
    {"environ": {}},
    {"config": {"url": None}, "environ": {"VAULT_TOKEN": "t"}},
    {"config": {"auth": "approle"}, "environ": {"TOOLKEEPER_VAULT_ROLE_ID": "r"}},
])
def test_missing_address_or_credentials_fail_at_open(missing: dict[str, Any]) -> None:
    config = {"url": "http://127.0.0.1:1", **missing.get("config", {})}
    with pytest.raises(ConfigError):
        VaultSecretsStore(VaultConfig(**config), environ=missing["environ"])


def _approle(server: OpenBaoServer, prefix: str) -> tuple[str, str]:
    """An AppRole that may read (and list) ``secret/{prefix}``: its role id and a secret id."""
    client = admin(server)
    if "approle/" not in client.sys.list_auth_methods()["data"]:
        client.sys.enable_auth_method("approle")
    policy = (f'path "secret/data/{prefix}/*" {{ capabilities = ["read"] }}\n'
              f'path "secret/metadata/{prefix}" {{ capabilities = ["list"] }}\n'
              f'path "secret/metadata/{prefix}/" {{ capabilities = ["list"] }}\n')
    client.sys.create_or_update_policy(name=prefix, policy=policy)
    client.auth.approle.create_or_update_approle(prefix, token_policies=[prefix],
                                                 token_ttl="1h")
    role_id = client.auth.approle.read_role_id(prefix)["data"]["role_id"]
    secret_id = client.auth.approle.generate_secret_id(prefix)["data"]["secret_id"]
    return role_id, secret_id


async def test_approle_logs_in_and_again_when_its_token_is_revoked(
        openbao: OpenBaoServer) -> None:
    prefix = _prefix()
    vault_put(openbao, prefix)("crm", "api_key", "crm-by-approle")
    role_id, secret_id = _approle(openbao, prefix)
    store = VaultSecretsStore(
        VaultConfig(url=openbao.url, path_prefix=prefix, auth="approle", cache_ttl_s=0),
        environ={"TOOLKEEPER_VAULT_ROLE_ID": role_id, "TOOLKEEPER_VAULT_SECRET_ID": secret_id})
    assert await store.get_secret("crm", "api_key") == "crm-by-approle"
    admin(openbao).sys.revoke_prefix("auth/approle/login")  # every AppRole token dies
    assert await store.get_secret("crm", "api_key") == "crm-by-approle"  # logged in again
    assert "crm-by-approle" in store.known_values()  # the role may list its prefix
    with pytest.raises(SecretNotFound):
        await store.get_secret("crm", "other")


async def test_approle_logs_in_again_before_its_token_expires(openbao: OpenBaoServer) -> None:
    """At 80 % of the token's lease the store logs in anew, reading the secret id again: a
    used-up secret id shows that it tried; a fresh one lets it in."""
    prefix, clock = _prefix(), Clock()
    vault_put(openbao, prefix)("crm", "api_key", "crm-before-expiry")
    role_id, _ = _approle(openbao, prefix)
    approle = admin(openbao).auth.approle
    approle.create_or_update_approle(prefix, token_policies=[prefix], token_ttl="1h",
                                     secret_id_num_uses=1)
    once = approle.generate_secret_id(prefix)["data"]
    environ = {"TOOLKEEPER_VAULT_ROLE_ID": role_id, "TOOLKEEPER_VAULT_SECRET_ID": once["secret_id"]}
    store = VaultSecretsStore(
        VaultConfig(url=openbao.url, path_prefix=prefix, auth="approle", cache_ttl_s=0),
        environ=environ, clock=clock)
    assert await store.get_secret("crm", "api_key") == "crm-before-expiry"
    clock.now += 3600 * 0.5
    assert await store.get_secret("crm", "api_key") == "crm-before-expiry"  # same token
    clock.now += 3600 * 0.3
    with pytest.raises(ToolError) as info:
        await store.get_secret("crm", "api_key")
    assert info.value.reason == "secrets_unavailable" and not info.value.retryable
    assert once["secret_id"] not in info.value.message
    fresh = approle.generate_secret_id(prefix)["data"]["secret_id"]
    environ["TOOLKEEPER_VAULT_SECRET_ID"] = fresh
    assert await store.get_secret("crm", "api_key") == "crm-before-expiry"


CONFIG = """\
version: 1
database: {db}
secrets:
  backend: vault
  vault: {{url: "{url}", path_prefix: {prefix}, auth: approle, role_id_file: role-id,
          secret_id_file: secret-id, cache_ttl_s: 5, timeout_s: 5}}
tools:
  - native: tests.pipeline.test_secrets_and_audit:leaky
profiles:
  - {{name: p, autonomy: 3, activations: [{{tool: leaky}}]}}
agents:
  - {{name: bot, profile: p}}
"""
TOKEN_CONFIG = CONFIG.replace("auth: approle, role_id_file: role-id,\n          "
                              "secret_id_file: secret-id, ", "")
"""The same, authenticating with a token from the environment."""


def test_a_configured_vault_resolves_a_tools_secret(openbao: OpenBaoServer, db_url: str,
                                                    tmp_path: Path) -> None:
    prefix = _prefix()
    vault_put(openbao, prefix)("vault", "token", "leaky-token-from-vault")
    role_id, secret_id = _approle(openbao, prefix)
    (tmp_path / "role-id").write_text(role_id)
    (tmp_path / "secret-id").write_text(secret_id)
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(CONFIG.format(db=db_url, url=openbao.url, prefix=prefix))
    with Gateway.open(config=path) as gw:
        res = gw.call_sync("leaky", arguments={"mode": "ok", "note": "n"}, agent="bot")
        assert res.ok and res.output["echo"] == "***", res.reason
        assert "leaky-token-from-vault" not in repr(res.to_dict())


def test_a_call_while_vault_is_down_stops_with_secrets_unavailable(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VAULT_TOKEN", f"root-{uuid.uuid4().hex}")
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(TOKEN_CONFIG.format(db=db_url, url=f"http://127.0.0.1:{free_port()}",
                                prefix=_prefix()))
    with Gateway.open(config=path) as gw:
        res = gw.call_sync("leaky", arguments={"mode": "ok", "note": "n"}, agent="bot")
        assert not res.ok and res.reason == "secrets_unavailable"
        gw.flush()
        types = [e.type for e in gw.store.audit.list("default", call_id=res.call_id)]
        assert types[-1] == "call.failed"


@pytest.mark.parametrize("body", [
    "{backend: env, vault: {url: 'http://x'}}",
    "{backend: vault, vault: {url: 'http://x', token: abc}}",
    "{backend: vault, vault: {cache_ttl_s: -1}}",
])
def test_bad_vault_config_is_refused(tmp_path: Path, body: str) -> None:
    from toolkeeper.config import load_text

    with pytest.raises(ConfigError):
        load_text(f"version: 1\nsecrets: {body}\n")


def test_the_readme_vault_example_is_valid_config(tmp_path: Path) -> None:

    import yaml

    from tests.support.docs import block
    from toolkeeper.config.apply import secrets_store
    from toolkeeper.config.model import ConfigFile

    example = block("docs/guides/vault.md: Vault and OpenBao #0")
    config = ConfigFile.model_validate({"version": 1, **yaml.safe_load(example)})
    assert config.secrets is not None and config.secrets.vault is not None
    (tmp_path / "vault-role-id").write_text("role")
    (tmp_path / "vault-secret-id").write_text("secret")
    store = secrets_store(config, tmp_path)  # the files are found next to the config
    assert isinstance(store, VaultSecretsStore)


def test_the_backend_named_by_the_caller_reads_vault_from_the_environment(
        openbao: OpenBaoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve --secrets-backend vault`` / ``TOOLKEEPER_SECRETS_BACKEND=vault`` without a
    ``secrets.vault`` section: the defaults, the address from ``VAULT_ADDR``."""
    monkeypatch.setenv("VAULT_ADDR", openbao.url)
    monkeypatch.setenv("VAULT_TOKEN", openbao.root_token)
    with Gateway.open(f"sqlite:///{tmp_path}/named.db", secrets="vault") as gw:
        assert isinstance(gw._secrets, VaultSecretsStore)


async def test_a_named_vault_backend_takes_the_files_vault_settings(
        openbao: OpenBaoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend named by the caller (``--secrets-backend vault``) still takes the file's
    ``secrets.vault`` (here: its address and prefix; ``VAULT_ADDR`` is unset)."""
    prefix = _prefix()
    vault_put(openbao, prefix)("vault", "token", "from-the-files-prefix")
    monkeypatch.setenv("VAULT_TOKEN", openbao.root_token)
    monkeypatch.delenv("VAULT_ADDR", raising=False)
    path = tmp_path / "toolkeeper.yaml"
    path.write_text(TOKEN_CONFIG.format(db=f"sqlite:///{tmp_path}/file.db", url=openbao.url,
                                prefix=prefix))
    with Gateway.open(config=path, secrets="vault") as gw:
        store = gw._secrets
        assert isinstance(store, VaultSecretsStore)
        assert await store.get_secret("vault", "token") == "from-the-files-prefix"


def test_serve_accepts_vault_as_its_secrets_backend() -> None:
    from toolkeeper.server import ServerSettings

    settings = ServerSettings.load(environ={"TOOLKEEPER_SECRETS_BACKEND": "vault"})
    assert settings.secrets_backend == "vault"


def test_without_hvac_the_vault_backend_is_a_config_error_at_open() -> None:
    import sys

    from tests.support.processes import child_env

    script = ("import sys; sys.modules['hvac'] = None  # as if the extra were not installed\n"
              "from toolkeeper.errors import ConfigError\n"
              "from toolkeeper.secrets import VaultConfig, VaultSecretsStore\n"
              "try:\n"
              "    VaultSecretsStore(VaultConfig(url='http://127.0.0.1:1'),"
              " environ={'VAULT_TOKEN': 't'})\n"
              "except ConfigError as exc:\n"
              "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], env=child_env(), capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "toolkeeper[vault]" in out
