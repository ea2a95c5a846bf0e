"""The secrets contract: where values come from, how config refers to them (SPEC §2 step 10).

Tool config never holds a secret, only a reference ``${secret:connector/key}`` (or
``${secret:key}`` for the call's own connector). Values are fetched from a ``SecretsStore``
at the moment of use and redacted from everything the call returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Protocol, runtime_checkable

from toolkeeper.errors import ToolError

SECRET_REF_RE = re.compile(r"\$\{secret:(?:([^/}\s]+)/)?([^}\s]+)\}")
"""One ``${secret:connector/key}`` or ``${secret:key}`` reference inside a string."""


class SecretNotFound(ToolError):
    """No value for the requested connector/key (reason ``secret_not_found``)."""

    def __init__(self, connector_id: str | None, key: str) -> None:
        where = f"{connector_id}/{key}" if connector_id else key
        super().__init__("secret_not_found", f"secret {where!r} not found", retryable=False)


@runtime_checkable
class SecretsStore(Protocol):
    """A source of secret values, consulted only when a tool executes."""

    async def get_secret(self, connector_id: str | None, key: str) -> str:
        """The value of ``key`` for ``connector_id``; raises ``SecretNotFound``."""
        ...

    def known_values(self) -> frozenset[str]:
        """Every value this store can hand out, for redaction (empty if it cannot enumerate)."""
        ...


@runtime_checkable
class BlobStore(Protocol):
    """Opaque named blobs; the embedded secrets store keeps its ciphertexts here."""

    def get_blob(self, name: str) -> bytes | None:
        """The blob called ``name``, or ``None``."""
        ...

    def put_blob(self, name: str, data: bytes) -> None:
        """Create or replace the blob ``name``."""
        ...

    def delete_blob(self, name: str) -> None:
        """Remove ``name``; removing a missing blob is not an error."""
        ...

    def list_blobs(self) -> list[tuple[str, bytes]]:
        """Every ``(name, data)`` pair, in name order."""
        ...


class MemoryBlobStore:
    """A dict-backed ``BlobStore`` for tests and ephemeral gateways."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def get_blob(self, name: str) -> bytes | None:
        """The blob called ``name``, or ``None``."""
        return self._blobs.get(name)

    def put_blob(self, name: str, data: bytes) -> None:
        """Create or replace the blob ``name``."""
        self._blobs[name] = bytes(data)

    def delete_blob(self, name: str) -> None:
        """Remove ``name`` if present."""
        self._blobs.pop(name, None)

    def list_blobs(self) -> list[tuple[str, bytes]]:
        """Every ``(name, data)`` pair, in name order."""
        return sorted(self._blobs.items())


def parse_ref(text: str) -> tuple[str | None, str] | None:
    """``(connector, key)`` when ``text`` is exactly one secret reference, else ``None``.

    ``${secret:github/token}`` → ``("github", "token")``; ``${secret:token}`` →
    ``(None, "token")`` (the call's connector applies).
    """
    match = SECRET_REF_RE.fullmatch(text.strip())
    if match is None:
        return None
    return match.group(1), match.group(2)


_SENSITIVE_WORDS = frozenset({"token", "secret", "secrets", "password", "passwd",
                              "authorization", "apikey", "credential", "credentials", "cookie"})
_WHERE_WORDS = frozenset({"endpoint", "url", "uri"})
_OAUTH_PLACES = frozenset({"token", "access", "oauth", "auth", "authorization",
                           "introspection", "revocation", "jwks", "device"})
"""``token_endpoint``, ``jwks_uri``…: an authorization server's address, not a credential
(``secret_url`` or ``api_key_url`` still are: a URL may carry a credential)."""
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


LITERAL_SECRET_ADVICE = ("store the value with PUT /credentials/{connector}/{key} and write "
                         "${secret:connector/key} in its place")
"""What to do instead of writing a credential into config (REST and config say the same)."""


def sensitive(key: str) -> bool:
    """Does this config key name a credential? (``api_key``, ``X-Api-Key``, ``apiKey``,
    ``accessToken``, ``Authorization``, ``client_secret``, ``db_password``…; in snake,
    kebab or camel case, any letter case)."""
    words = re.split(r"[^a-z0-9]+", _CAMEL.sub(r"\1_\2", key).lower())
    if len(words) > 1 and words[-1] in _WHERE_WORDS and _OAUTH_PLACES.issuperset(words[:-1]):
        return False  # ``token_endpoint``: where a credential is asked for
    joined = "".join(words)
    return bool(_SENSITIVE_WORDS.intersection(words)) or "apikey" in joined \
        or "privatekey" in joined


def literal_secrets(value: Any, path: tuple[str | int, ...] = ()
                    ) -> Iterator[tuple[str | int, ...]]:
    """Paths of non-empty strings under credential-named keys that hold no secret reference:
    a credential written into config, where only ``${secret:…}`` references belong (SPEC §6).
    One rule for config files (``toolkeeper check``/``apply``) and the REST registry."""
    if isinstance(value, dict):
        for key, item in value.items():
            child = (*path, str(key))
            if isinstance(item, str) and item.strip() and sensitive(str(key)) \
                    and not only_references(item):
                yield child
            else:
                yield from literal_secrets(item, child)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from literal_secrets(item, (*path, i))


def only_references(value: str) -> bool:
    """``value`` is nothing but secret references, optionally after an auth scheme
    (``${secret:crm/key}``, ``Bearer ${secret:crm/token}``): it names where a credential
    lives, never the credential."""
    rest = SECRET_REF_RE.sub("", value).strip().lower()
    return SECRET_REF_RE.search(value) is not None and rest in ("", "bearer", "basic", "token")


def has_ref(text: str) -> bool:
    """Whether ``text`` contains at least one secret reference."""
    return SECRET_REF_RE.search(text) is not None
