"""The embedded secrets store: values encrypted at rest with AES-256-GCM (SPEC §8).

Each value is sealed under the master key with a fresh random 96-bit nonce and the
associated data ``"{connector}/{key}"``, so a ciphertext copied onto another secret's row
fails authentication instead of handing out the wrong credential. Blob layout:
``b"\\x01" + nonce(12) + ciphertext‖tag(16)``; the leading byte versions the format.

A tenant's credential (a row, :mod:`toolkeeper.secrets.credentials`) is sealed the same way
as format ``0x02``, whose associated data also names the tenant (:func:`credential_aad`): a
ciphertext moved to another tenant's row of the same name fails too. Format ``0x01`` in a
credential row is a value migrated from before credentials were rows (bound to its name
only); the gateway re-seals those as ``0x02`` when it opens.

The master key comes from ``TOOLKEEPER_SECRETS_KEY`` (base64 of 32 bytes) or from a key file
holding the same base64 text, which must not be readable by group or others.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from toolkeeper.errors import ConfigError, ToolError
from toolkeeper.secrets.base import BlobStore, SecretNotFound

KEY_ENV = "TOOLKEEPER_SECRETS_KEY"
KEY_FILE_ENV = "TOOLKEEPER_SECRETS_KEY_FILE"
KEY_BYTES = 32
_VERSION = b"\x01"
_TENANT_BOUND = b"\x02"
_NONCE_BYTES = 12


def credential_aad(tenant_id: str, connector: str, key: str) -> bytes:
    """The associated data of a tenant's credential: unambiguous for any three strings."""
    return json.dumps(["credential", tenant_id, connector, key], ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


def _blob_name(connector_id: str | None, key: str) -> str:
    if not key:
        raise ValueError("a secret key must not be empty")
    if connector_id and "/" in connector_id:
        raise ValueError(f"connector id {connector_id!r} must not contain '/'")
    return f"{connector_id or ''}/{key}"


class EmbeddedSecretsStore:
    """Secrets kept encrypted in a ``BlobStore`` (the gateway's own database)."""

    def __init__(self, blobs: BlobStore, key: bytes) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigError(f"the secrets master key must be {KEY_BYTES} bytes")
        self._blobs = blobs
        self._aead = AESGCM(key)
        self._known: frozenset[str] | None = None

    def set_secret(self, connector_id: str | None, key: str, value: str) -> None:
        """Encrypt and store ``value`` (replacing any previous one)."""
        name = _blob_name(connector_id, key)
        self._blobs.put_blob(name, self._seal(_VERSION, value, name.encode("utf-8")))
        self._known = None

    def seal_credential(self, tenant_id: str, connector: str, key: str, value: str) -> bytes:
        """``value`` sealed for the tenant's credential row ``connector/key`` (format 0x02)."""
        return self._seal(_TENANT_BOUND, value, credential_aad(tenant_id, connector, key))

    def open_credential(self, tenant_id: str, connector: str, key: str, blob: bytes) -> str:
        """The value of a tenant's credential row; ``ToolError`` if it does not authenticate
        as exactly this tenant's ``connector/key`` (or, format 0x01, as ``connector/key``)."""
        name = f"{connector}/{key}"
        if blob[:1] == _TENANT_BOUND:
            return self._unseal(name, blob, credential_aad(tenant_id, connector, key))
        return self._open(name, blob)

    @staticmethod
    def is_tenant_bound(blob: bytes) -> bool:
        """Whether a credential row is sealed with its tenant (else: migrated, re-seal it)."""
        return blob[:1] == _TENANT_BOUND

    def _seal(self, version: bytes, value: str, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE_BYTES)
        return version + nonce + self._aead.encrypt(nonce, value.encode("utf-8"), aad)

    def delete_secret(self, connector_id: str | None, key: str) -> None:
        """Forget the secret; deleting a missing one is not an error."""
        self._blobs.delete_blob(_blob_name(connector_id, key))
        self._known = None

    async def get_secret(self, connector_id: str | None, key: str) -> str:
        """Decrypt the value; ``SecretNotFound`` when absent, ``ToolError`` if tampered."""
        name = _blob_name(connector_id, key)
        blob = self._blobs.get_blob(name)
        if blob is None:
            raise SecretNotFound(connector_id, key)
        return self._open(name, blob)

    def known_values(self) -> frozenset[str]:
        """Every stored value, decrypted once and cached until the next set/delete.

        Another replica's writes are not seen until this one changes a secret; values a call
        resolves are redacted from that call regardless.
        """
        if self._known is None:
            blobs = self._blobs.list_blobs()
            self._known = frozenset(self._open(name, blob) for name, blob in blobs)
        return self._known

    def _open(self, name: str, blob: bytes) -> str:
        if blob[:1] != _VERSION:
            raise ToolError("secret_not_found", f"secret {name!r} has an unknown format")
        return self._unseal(name, blob, name.encode("utf-8"))

    def _unseal(self, name: str, blob: bytes, aad: bytes) -> str:
        if len(blob) < 1 + _NONCE_BYTES + 16:
            raise ToolError("secret_not_found", f"secret {name!r} has an unknown format")
        nonce, sealed = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
        try:
            plain = self._aead.decrypt(nonce, sealed, aad)
        except InvalidTag:
            # Wrong master key, or a ciphertext moved from another name or tenant.
            raise ToolError(
                "secret_not_found", f"secret {name!r} failed authentication"
            ) from None
        return plain.decode("utf-8")


def _decode_key(text: str, source: str) -> bytes:
    try:
        raw = text.strip().encode("ascii")
    except UnicodeEncodeError:
        raise ConfigError(f"{source} is not valid base64") from None
    for altchars in (None, b"-_"):  # standard or URL-safe alphabet
        try:
            key = base64.b64decode(raw, altchars=altchars, validate=True)
        except binascii.Error:
            continue
        if len(key) != KEY_BYTES:
            raise ConfigError(f"{source} must decode to {KEY_BYTES} bytes, got {len(key)}")
        return key
    raise ConfigError(f"{source} is not valid base64")


def load_master_key(
    environ: Mapping[str, str] | None = None, key_file: str | Path | None = None
) -> bytes:
    """The master key from ``TOOLKEEPER_SECRETS_KEY``, else from ``key_file``.

    A key file readable or writable by group or others is refused: the key protects every
    credential the gateway holds.
    """
    env = os.environ if environ is None else environ
    if env.get(KEY_ENV):
        return _decode_key(env[KEY_ENV], KEY_ENV)
    if key_file is None:
        raise ConfigError(f"no secrets key: set {KEY_ENV} or configure a key file")
    return read_key_file(key_file, "secrets key file")


def read_key_file(key_file: str | Path, what: str) -> bytes:
    """The base64 key in ``key_file``, refused when group or others can access the file
    (``what`` names the file in errors: ``"secrets key file"``, ``"audit key file"``)."""
    path = Path(key_file)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found", path=str(path)) from None
    if os.name == "posix" and info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        mode = stat.S_IMODE(info.st_mode)
        raise ConfigError(f"{what} is accessible by group/others (mode {mode:04o}); "
                          f"run: chmod 600 {path}", path=str(path))
    return _decode_key(path.read_text(encoding="ascii"), f"{what} {path}")


DEMO_KEY_FILE = Path("toolkeeper-secrets.key")
"""Where ``serve --demo`` keeps a generated master key (working directory)."""

_KEY_SOURCES = (KEY_ENV, KEY_FILE_ENV, "TOOLKEEPER_AUDIT_KEY",
                "TOOLKEEPER_AUDIT_KEY_FILE")


def demo_key_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The demo's key file in the working directory, when it exists and no key is
    configured otherwise — so the CLI next to a ``serve --demo`` store opens it as the
    server does (its audit chains are keyed with a key derived from this one)."""
    env = os.environ if environ is None else environ
    if any(env.get(name) for name in _KEY_SOURCES) or not DEMO_KEY_FILE.is_file():
        return None
    return DEMO_KEY_FILE.resolve()


def generate_key_file(path: str | Path) -> bytes:
    """Write a new random key (base64 text, mode 0600); refuses to overwrite a file."""
    key = os.urandom(KEY_BYTES)
    fd = os.open(Path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(base64.b64encode(key).decode("ascii") + "\n")
    return key
