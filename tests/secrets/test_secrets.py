"""Secrets stores (SPEC §2 step 10, §8): values at the moment of use, encrypted at rest."""

from __future__ import annotations

import base64
import inspect
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

import toolkeeper.secrets as secrets_pkg
from toolkeeper.errors import ConfigError, ToolError
from toolkeeper.secrets import (
    BlobStore,
    EmbeddedSecretsStore,
    EnvSecretsStore,
    MemoryBlobStore,
    SecretNotFound,
    SecretsStore,
    env_var_name,
    generate_key_file,
    load_master_key,
    parse_ref,
)

KEY = bytes(range(32))


# --- references ---------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("${secret:github/token}", ("github", "token")),
    ("  ${secret:token}  ", (None, "token")),
    ("${secret:crm/api.key-2}", ("crm", "api.key-2")),
    ("Bearer ${secret:github/token}", None),
    ("${secret:}", None),
    ("plain", None),
])
def test_parse_ref(text: str, expected: tuple[str | None, str] | None) -> None:
    assert parse_ref(text) == expected


# --- environment store --------------------------------------------------------------------

@pytest.mark.parametrize(("connector", "key", "name"), [
    ("github", "token", "TOOLKEEPER_SECRET_GITHUB__TOKEN"),
    ("my-crm", "api.key", "TOOLKEEPER_SECRET_MY_CRM__API_KEY"),
    (None, "token", "TOOLKEEPER_SECRET_TOKEN"),
])
def test_env_variable_mapping(connector: str | None, key: str, name: str) -> None:
    assert env_var_name(connector, key) == name


async def test_env_store_reads_at_use_and_reports_missing_values() -> None:
    environ = {"TOOLKEEPER_SECRET_GITHUB__TOKEN": "ghp_abc", "TOOLKEEPER_SECRET_EMPTY": "",
               "OTHER": "not-a-secret"}
    store = EnvSecretsStore(environ)
    assert isinstance(store, SecretsStore)
    assert await store.get_secret("github", "token") == "ghp_abc"
    environ["TOOLKEEPER_SECRET_GITHUB__TOKEN"] = "ghp_rotated"
    assert await store.get_secret("github", "token") == "ghp_rotated"
    for connector, key in (("github", "missing"), (None, "empty")):
        with pytest.raises(SecretNotFound) as info:
            await store.get_secret(connector, key)
        assert info.value.reason == "secret_not_found" and not info.value.retryable
    assert store.known_values() == frozenset({"ghp_rotated"})


async def test_env_store_honours_a_custom_prefix() -> None:
    store = EnvSecretsStore({"APP_SECRET_DB__PASSWORD": "pw-1234"}, prefix="APP_SECRET_")
    assert await store.get_secret("db", "password") == "pw-1234"


# --- embedded (encrypted) store -----------------------------------------------------------

async def test_embedded_round_trip_without_plaintext_at_rest() -> None:
    blobs = MemoryBlobStore()
    store = EmbeddedSecretsStore(blobs, KEY)
    assert isinstance(store, SecretsStore) and isinstance(blobs, BlobStore)
    store.set_secret("github", "token", "ghp_supersecret")
    store.set_secret(None, "global", "g-value-1")
    assert await store.get_secret("github", "token") == "ghp_supersecret"
    assert await store.get_secret(None, "global") == "g-value-1"
    for _, data in blobs.list_blobs():
        assert b"supersecret" not in data and b"g-value" not in data


def test_each_encryption_uses_a_fresh_nonce() -> None:
    blobs = MemoryBlobStore()
    store = EmbeddedSecretsStore(blobs, KEY)
    store.set_secret("c", "k", "same-value")
    first = blobs.get_blob("c/k")
    store.set_secret("c", "k", "same-value")
    assert first is not None and first != blobs.get_blob("c/k")


async def test_wrong_master_key_never_yields_a_value() -> None:
    blobs = MemoryBlobStore()
    EmbeddedSecretsStore(blobs, KEY).set_secret("c", "k", "value-1234")
    other = EmbeddedSecretsStore(blobs, bytes(32))
    with pytest.raises(ToolError) as info:
        await other.get_secret("c", "k")
    assert "failed authentication" in info.value.message
    assert "value-1234" not in info.value.message


async def test_ciphertext_moved_to_another_name_fails_authentication() -> None:
    blobs = MemoryBlobStore()
    store = EmbeddedSecretsStore(blobs, KEY)
    store.set_secret("prod", "token", "prod-token-value")
    store.set_secret("dev", "token", "dev-token-value")
    prod = blobs.get_blob("prod/token")
    assert prod is not None
    blobs.put_blob("dev/token", prod)  # an attacker with database access swaps rows
    with pytest.raises(ToolError):
        await store.get_secret("dev", "token")


async def test_tampered_or_unknown_format_blob_is_refused() -> None:
    blobs = MemoryBlobStore()
    store = EmbeddedSecretsStore(blobs, KEY)
    store.set_secret("c", "k", "value-1234")
    blob = bytearray(blobs.get_blob("c/k") or b"")
    blob[-1] ^= 1
    blobs.put_blob("c/k", bytes(blob))
    with pytest.raises(ToolError):
        await store.get_secret("c", "k")
    blobs.put_blob("c/k", b"\x02" + bytes(blob[1:]))
    with pytest.raises(ToolError):
        await store.get_secret("c", "k")


async def test_delete_and_known_values_cache_invalidation() -> None:
    store = EmbeddedSecretsStore(MemoryBlobStore(), KEY)
    store.set_secret("a", "one", "value-one")
    assert store.known_values() == frozenset({"value-one"})
    store.set_secret("a", "two", "value-two")
    assert store.known_values() == frozenset({"value-one", "value-two"})
    store.delete_secret("a", "one")
    store.delete_secret("a", "never-set")
    assert store.known_values() == frozenset({"value-two"})
    with pytest.raises(SecretNotFound):
        await store.get_secret("a", "one")


def test_master_key_must_be_32_bytes_and_names_must_be_well_formed() -> None:
    with pytest.raises(ConfigError):
        EmbeddedSecretsStore(MemoryBlobStore(), b"short")
    store = EmbeddedSecretsStore(MemoryBlobStore(), KEY)
    with pytest.raises(ValueError):
        store.set_secret("a/b", "k", "v")
    with pytest.raises(ValueError):
        store.set_secret("a", "", "v")


# --- master key ---------------------------------------------------------------------------

@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode])
def test_master_key_from_the_environment(encode: Callable[[bytes], bytes]) -> None:
    key = bytes(range(200, 232))
    text = encode(key).decode()
    assert load_master_key({"TOOLKEEPER_SECRETS_KEY": text}) == key


@pytest.mark.parametrize("value", ["not base64!", base64.b64encode(b"too short").decode(), "é"])
def test_bad_master_key_in_the_environment_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError):
        load_master_key({"TOOLKEEPER_SECRETS_KEY": value})


def test_missing_master_key_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="TOOLKEEPER_SECRETS_KEY"):
        load_master_key({})
    with pytest.raises(ConfigError, match="not found"):
        load_master_key({}, tmp_path / "absent.key")


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_generated_key_file_is_private_and_loads(tmp_path: Path) -> None:
    path = tmp_path / "secrets.key"
    key = generate_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_master_key({}, path) == key
    with pytest.raises(FileExistsError):
        generate_key_file(path)  # never overwrite the key that protects existing secrets


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_key_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "secrets.key"
    generate_key_file(path)
    path.chmod(mode)
    with pytest.raises(ConfigError, match="chmod 600") as info:
        load_master_key({}, path)
    assert f"{mode:04o}" in str(info.value)


def test_package_exports_are_complete() -> None:
    exported = set(secrets_pkg.__all__)
    for module in ("base", "env", "embedded", "redact"):
        mod = getattr(secrets_pkg, module)
        public = {name for name, obj in vars(mod).items()
                  if not name.startswith("_") and getattr(obj, "__module__", None) == mod.__name__
                  and (inspect.isclass(obj) or inspect.isfunction(obj))}
        assert public <= exported, public - exported
    assert all(hasattr(secrets_pkg, name) for name in exported)
