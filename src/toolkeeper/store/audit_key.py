"""The audit key: HMAC-SHA256 of the audit chain under a secret kept outside the database.

With the key, an event's ``hash`` is ``hmac-sha256:<hex>`` and each chain head carries a
MAC of ``(tenant, seq, hash)``: whoever can write the database but lacks the key can no
longer recompute the chain after an edit, nor move a head back (see docs/audit-integrity.md).
Events written without a key keep ``sha256:<hex>``; the prefix names the algorithm.

Where the key comes from, first match wins:

1. ``TOOLKEEPER_AUDIT_KEY``: base64 of 32 bytes;
2. an audit key file (``audit_key_file``, else ``TOOLKEEPER_AUDIT_KEY_FILE``): the same text,
   mode 0600 (``toolkeeper.secrets.generate_key_file`` writes one);
3. derived with HKDF-SHA256 from the secrets master key when one is configured
   (``TOOLKEEPER_SECRETS_KEY``, the secrets key file, else ``TOOLKEEPER_SECRETS_KEY_FILE``).

The key object keeps the HMAC state of the key precomputed: each MAC copies it, so an event
costs one HMAC (two SHA-256 finalisations), not a key schedule.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from pathlib import Path

import orjson
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from toolkeeper.errors import ConfigError
from toolkeeper.secrets.embedded import KEY_BYTES, _decode_key, load_master_key, read_key_file
from toolkeeper.secrets.embedded import KEY_ENV as SECRETS_KEY_ENV
from toolkeeper.secrets.embedded import KEY_FILE_ENV as SECRETS_KEY_FILE_ENV

KEY_ENV = "TOOLKEEPER_AUDIT_KEY"
KEY_FILE_ENV = "TOOLKEEPER_AUDIT_KEY_FILE"
PLAIN = "sha256:"
KEYED = "hmac-sha256:"
_HKDF_INFO = b"toolkeeper audit chain v1"


class AuditKey:
    """Computes the chain's MACs; never stored, never printed."""

    __slots__ = ("_base",)

    def __init__(self, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigError(f"the audit key must be {KEY_BYTES} bytes")
        self._base = hmac.new(key, digestmod=hashlib.sha256)

    def __repr__(self) -> str:
        return "AuditKey(<hidden>)"

    def _mac(self, *parts: bytes) -> str:
        h = self._base.copy()
        for part in parts:
            h.update(part)
        return KEYED + h.hexdigest()

    def event(self, seq: int, prev_hash: str, body: bytes) -> str:
        """An event's keyed chain hash (same input as the plain one, domain-tagged)."""
        return self._mac(b"e|", f"{seq}|{prev_hash}|".encode(), body)

    def head(self, tenant_key: str, seq: int, hash_: str, base_seq: int = 0,
             base_hash: str | None = None) -> str:
        """The MAC of a chain head: the tenant is in it, so heads cannot swap tenants. Once
        retention deleted a prefix, the base (where the kept chain starts) is in it too, so
        nobody without the key can delete more of the chain's start and call it retention."""
        parts: list[object] = [tenant_key, seq, hash_]
        if base_seq:
            parts += [base_seq, base_hash]
        return self._mac(b"h|", orjson.dumps(parts))

    def checkpoint(self, tenant_key: str, seq: int, hash_: str, ts: str) -> str:
        """The MAC of one checkpoint line."""
        return self._mac(b"c|", orjson.dumps([tenant_key, seq, hash_, ts]))

    @staticmethod
    def matches(expected: str, found: str | None) -> bool:
        return found is not None and hmac.compare_digest(expected, found)


def derive(master_key: bytes) -> bytes:
    """The audit key of a secrets master key (HKDF-SHA256; the master key stays secret)."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                info=_HKDF_INFO).derive(master_key)


def load_audit_key(*, key: bytes | None = None, key_file: str | Path | None = None,
                   secrets_key_file: str | Path | None = None,
                   environ: Mapping[str, str] | None = None) -> AuditKey | None:
    """The audit key from ``key``, else the sources in the module docstring; ``None``
    when none is configured (the chain is then plain SHA-256, and verify says so)."""
    env = os.environ if environ is None else environ
    if key is not None:
        return AuditKey(key)
    if env.get(KEY_ENV):
        return AuditKey(_decode_key(env[KEY_ENV], KEY_ENV))
    key_file = key_file or env.get(KEY_FILE_ENV) or None
    if key_file is not None:
        return AuditKey(read_key_file(key_file, "audit key file"))
    secrets_key_file = secrets_key_file or env.get(SECRETS_KEY_FILE_ENV) or None
    if env.get(SECRETS_KEY_ENV) or secrets_key_file is not None:
        return AuditKey(derive(load_master_key(env, secrets_key_file)))
    return None
