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
   (``TOOLKEEPER_SECRETS_KEY``, the secrets key file, else ``TOOLKEEPER_SECRETS_KEY_FILE``);
4. the default key file (:func:`default_key_path`: ``<sqlite file>.audit-key``, else
   ``$XDG_STATE_HOME/toolkeeper/audit.key``, by default ``~/.local/state/…``), which a
   gateway opening a store whose chains are not keyed yet makes when none of the above is
   configured (:func:`make_key_file`, mode 0600, as ``serve --demo`` makes the secrets key).

A store remembers a check value of its key (:meth:`AuditKey.check`, an HMAC of a constant:
it reveals nothing of the key), so a gateway given another key refuses to open the store
instead of writing chains nobody can verify.

The key object keeps the HMAC state of the key precomputed: each MAC copies it, so an event
costs one HMAC (two SHA-256 finalisations), not a key schedule.
"""

from __future__ import annotations

import base64
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
DEFAULT_KEY_NAME = "audit.key"
"""The key made on first start for a store that is not a SQLite file (state directory)."""
CHECK_SETTING = "audit_key_check"
"""The registry setting holding the check value of the key the store is keyed with."""
SOURCE_SETTING = "audit_key_source"
"""Where the key that first keyed the store came from (:meth:`AuditKey.described`)."""
PLAIN = "sha256:"
KEYED = "hmac-sha256:"
_HKDF_INFO = b"toolkeeper audit chain v1"


class AuditKey:
    """Computes the chain's MACs; never stored, never printed. ``source`` says where it came
    from and ``hint`` the setting that selects it (``TOOLKEEPER_…=path``), for messages."""

    __slots__ = ("_base", "hint", "source")

    def __init__(self, key: bytes, source: str = "a key given in code",
                 hint: str | None = None) -> None:
        if len(key) != KEY_BYTES:
            raise ConfigError(f"the audit key must be {KEY_BYTES} bytes")
        self._base = hmac.new(key, digestmod=hashlib.sha256)
        self.source, self.hint = source, hint

    def fingerprint(self) -> str:
        """A short name of the key (a prefix of its check value: reveals nothing of it)."""
        return fingerprint(self.check())

    def keyed_note(self) -> str:
        """What to say when a store's audit chains are keyed with this key for the first
        time: which key, and what every process opening the store must configure."""
        return (f"this store's audit chains are now keyed with {self.source}"
                + (f"; every process opening it needs that key ({self.hint})"
                   if self.hint else ""))

    def described(self) -> dict[str, str | None]:
        """What a store records of the key that first keyed it (never the key)."""
        return {"source": self.source, "hint": self.hint, "fingerprint": self.fingerprint()}

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

    def check(self) -> str:
        """The key's check value, kept in the store to recognise the key it was keyed with."""
        return self._mac(b"k|toolkeeper audit key check")

    @staticmethod
    def matches(expected: str, found: str | None) -> bool:
        return found is not None and hmac.compare_digest(expected, found)


def fingerprint(check: str) -> str:
    """The short name of a key, from its check value (:meth:`AuditKey.check`)."""
    return check.removeprefix(KEYED)[:12]


def derive(master_key: bytes) -> bytes:
    """The audit key of a secrets master key (HKDF-SHA256; the master key stays secret)."""
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None,
                info=_HKDF_INFO).derive(master_key)


def load_audit_key(*, key: bytes | None = None, key_file: str | Path | None = None,
                   secrets_key_file: str | Path | None = None,
                   default_file: Path | None = None,
                   environ: Mapping[str, str] | None = None) -> AuditKey | None:
    """The audit key from ``key``, else the sources in the module docstring (the default
    key file ``default_file`` when it exists); ``None`` when there is none."""
    env = os.environ if environ is None else environ
    if key is not None:
        return AuditKey(key)
    if env.get(KEY_ENV):
        return AuditKey(_decode_key(env[KEY_ENV], KEY_ENV), KEY_ENV,
                        f"{KEY_ENV} (to that key)")
    key_file = key_file or env.get(KEY_FILE_ENV) or None
    if key_file is not None:
        path = os.path.abspath(key_file)
        return AuditKey(read_key_file(key_file, "audit key file"), f"the audit key file {path}",
                        f"{KEY_FILE_ENV}={path}")
    secrets_key_file = secrets_key_file or env.get(SECRETS_KEY_FILE_ENV) or None
    if env.get(SECRETS_KEY_ENV):
        return AuditKey(derive(load_master_key(env, secrets_key_file)),
                        f"a key derived from {SECRETS_KEY_ENV}", f"{SECRETS_KEY_ENV} (to that key)")
    if secrets_key_file is not None:
        path = os.path.abspath(secrets_key_file)
        return AuditKey(derive(load_master_key(env, secrets_key_file)),
                        f"a key derived from the secrets key file {path}",
                        f"{SECRETS_KEY_FILE_ENV}={path}")
    if default_file is not None and default_file.exists():
        return AuditKey(read_key_file(default_file, "audit key file"),
                        f"the default key file {default_file}", f"{KEY_FILE_ENV}={default_file}")
    return None


def default_key_path(url: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Where the key made on first start lives: ``<sqlite file>.audit-key`` for a SQLite
    file; for any other store, ``toolkeeper/audit.key`` in the user's state directory
    (``$XDG_STATE_HOME``, else ``~/.local/state``) on the gateway's host, never in the
    database, and whatever the working directory; ``None`` for an in-memory database."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if not parsed.drivername.startswith("sqlite"):
        env = os.environ if environ is None else environ
        state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                           "state")
        return Path(os.path.abspath(state)) / "toolkeeper" / DEFAULT_KEY_NAME
    if parsed.database in (None, "", ":memory:"):
        return None
    return Path(os.path.abspath(parsed.database + ".audit-key"))


def make_key_file(path: Path) -> bytes:
    """A new random key written to ``path`` (base64, mode 0600), or the key already there
    when another process made it first: the file appears whole or not at all (written
    aside, then linked), so a racing reader never sees it half-written."""
    key = os.urandom(KEY_BYTES)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(base64.b64encode(key).decode("ascii") + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(aside, path)
        except FileExistsError:
            return read_key_file(path, "audit key file")
    finally:
        aside.unlink(missing_ok=True)
    return key


def where_looked(url: str) -> str:
    """The key's sources for an error message, the default file's path included."""
    default = default_key_path(url)
    return (f"{KEY_ENV}, {KEY_FILE_ENV} (or --audit-key-file), the secrets master key it is "
            f"derived from ({SECRETS_KEY_ENV}, {SECRETS_KEY_FILE_ENV})"
            + (f", or the default key file {default}" if default is not None else ""))
