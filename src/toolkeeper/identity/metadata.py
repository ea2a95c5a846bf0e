"""What a client is told about this protected resource: the RFC 9728 metadata document and
the RFC 6750 ``WWW-Authenticate`` challenges (MCP 2026-07-28 authorization: a 401 names the
metadata and the scopes to ask for; a 403 for missing scope says ``insufficient_scope``
with the scopes this request needs)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolkeeper.identity.tokens import Issuer

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def metadata_url(resource: str, path: str = "") -> str:
    """The metadata URL of ``resource`` (RFC 9728 §3.1: the well-known segment goes between
    the host and the path, e.g. ``…/.well-known/oauth-protected-resource/mcp``)."""
    return resource.rstrip("/") + WELL_KNOWN + path


def scopes_supported(issuers: Iterable[Issuer]) -> list[str]:
    """Every OAuth scope some issuer's mapping grants something for."""
    out: set[str] = set()
    for i in issuers:
        out |= set(i.mapping.scopes or {})
    return sorted(out)


def document(resource: str, path: str, issuers: list[Issuer],
             name: str = "toolkeeper") -> dict[str, Any]:
    """The protected-resource metadata of ``resource`` + ``path`` (``""`` or ``/mcp``)."""
    return {
        "resource": resource.rstrip("/") + path if path else resource,
        "authorization_servers": [i.issuer for i in issuers],
        "scopes_supported": scopes_supported(issuers),
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": sorted(
            {a for i in issuers for a in i.algorithms}),
        "resource_name": name,
    }


def _quoted(text: str) -> str:
    """An RFC 7230 quoted-string of printable ASCII: a message may carry a claim's value
    (any Unicode, even a line break), and a header value is bytes in Latin-1."""
    clean = "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text)
    return f'"{clean}"'


def challenge(resource: str | None, path: str = "", *, error: str | None = None,
              description: str | None = None, scopes: Iterable[str] = ()) -> str:
    """A ``WWW-Authenticate: Bearer …`` value. Without identity issuers (``resource``
    ``None``) just the realm, as before."""
    parts = ['realm="toolkeeper"']
    if resource is not None:
        parts.append(f"resource_metadata={_quoted(metadata_url(resource, path))}")
    wanted = " ".join(scopes)
    if wanted:
        parts.append(f"scope={_quoted(wanted)}")
    if error is not None:
        parts.append(f"error={_quoted(error)}")
        if description:
            parts.append(f"error_description={_quoted(description[:200])}")
    return "Bearer " + ", ".join(parts)
