"""Secrets: stores that hand out values at the moment of use, and their redaction."""

from toolkeeper.secrets.base import (
    SECRET_REF_RE,
    BlobStore,
    MemoryBlobStore,
    SecretNotFound,
    SecretsStore,
    has_ref,
    parse_ref,
)
from toolkeeper.secrets.embedded import EmbeddedSecretsStore, generate_key_file, load_master_key
from toolkeeper.secrets.env import EnvSecretsStore, env_var_name
from toolkeeper.secrets.redact import MASK, Redactor

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
    "env_var_name",
    "generate_key_file",
    "has_ref",
    "load_master_key",
    "parse_ref",
]
