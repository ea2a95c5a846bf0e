"""Secrets: stores that hand out values at the moment of use, and their redaction."""

from pathlib import Path

from toolkeeper.secrets.base import (
    SECRET_REF_RE,
    BlobStore,
    MemoryBlobStore,
    SecretNotFound,
    SecretsStore,
    has_ref,
    literal_secrets,
    only_references,
    parse_ref,
    sensitive,
)
from toolkeeper.secrets.credentials import TenantCredentials, tenant_getter
from toolkeeper.secrets.embedded import (
    EmbeddedSecretsStore,
    credential_aad,
    demo_key_file,
    generate_key_file,
    load_master_key,
    read_key_file,
)
from toolkeeper.secrets.env import EnvSecretsStore, env_var_name
from toolkeeper.secrets.redact import MASK, Redactor
from toolkeeper.secrets.vault import VaultConfig, VaultSecretsStore, vault_path


def open_backend(backend: str, blobs: BlobStore | None, *, key_file: str | Path | None = None,
                 source: str | None = None, vault: VaultConfig | None = None) -> SecretsStore:
    """The ``env``, ``embedded`` or ``vault`` backend; ``embedded`` keeps ciphertexts in
    ``blobs`` and needs a master key (``TOOLKEEPER_SECRETS_KEY``, else ``key_file``);
    ``vault`` reads ``vault`` (default: every setting's default, the address from
    ``VAULT_ADDR``)."""
    from toolkeeper.errors import ConfigError

    if backend == "env":
        return EnvSecretsStore()
    if backend == "vault":
        return VaultSecretsStore(vault or VaultConfig())
    if backend != "embedded":
        raise ConfigError(f"unknown secrets backend {backend!r} (env, embedded or vault)",
                          path=source)
    if blobs is None:
        raise ConfigError("the embedded secrets backend needs a blob store", path=source)
    return EmbeddedSecretsStore(blobs, load_master_key(key_file=key_file))

__all__ = [
    "MASK",
    "SECRET_REF_RE",
    "BlobStore",
    "EmbeddedSecretsStore",
    "EnvSecretsStore",
    "MemoryBlobStore",
    "Redactor",
    "SecretNotFound",
    "SecretsStore",
    "TenantCredentials",
    "VaultConfig",
    "VaultSecretsStore",
    "credential_aad",
    "demo_key_file",
    "env_var_name",
    "generate_key_file",
    "has_ref",
    "literal_secrets",
    "load_master_key",
    "only_references",
    "open_backend",
    "parse_ref",
    "read_key_file",
    "sensitive",
    "tenant_getter",
    "vault_path",
]
