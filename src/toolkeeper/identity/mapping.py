"""An access token's verified claims → a toolkeeper :class:`Principal`, by the operator's
rules (``identity.issuers[].claims``; docs/identity.md "Claim mapping").

The tenant comes from a fixed value or a claim; role rules (a claim value → a role, per
tenant) make the token a person's; otherwise its agent claim must name an agent that exists
in that tenant, as a ``tk_…`` agent token names one. Anything else is refused with 403: the
token is valid, it maps to nobody here. Scopes only ever narrow the profile's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolkeeper.identity.refused import TokenRefused
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

MAX_CLAIM_CHARS = 200
"""A tenant, agent or name taken from a claim is at most this long."""
MAX_SCOPES = 200
"""Scope values read from one token (the rest are ignored)."""
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class RoleRule:
    """``claim`` equals or contains ``value`` → ``role`` (only in ``tenant`` when set)."""

    claim: str
    value: str
    role: Role
    tenant: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Mapping:
    """One issuer's claim mapping (see :mod:`toolkeeper.config.issuers` for each field)."""

    tenant: str | None
    tenant_claim: str | None
    agent_claim: str | None
    agents: dict[str, str] | None
    person_name_claims: tuple[str, ...]
    roles: tuple[RoleRule, ...]
    scopes: dict[str, frozenset[str]] | None

    def oauth_scopes_for(self, wanted: frozenset[str]) -> list[str]:
        """The OAuth scopes that grant any of toolkeeper scopes ``wanted`` (a challenge's
        ``scope``), in a stable order."""
        if self.scopes is None:
            return []
        return sorted(k for k, v in self.scopes.items() if WILDCARD in v or v & wanted)


AgentExists = Callable[[str, str], bool]
"""``(tenant, agent)`` → whether such an agent is configured."""


def _text(claims: dict[str, Any], name: str | None) -> str | None:
    value = claims.get(name) if name else None
    if isinstance(value, str) and 0 < len(value) <= MAX_CLAIM_CHARS:
        return value
    return None


def _values(value: Any) -> list[str]:
    """A claim as a list of strings: a list's strings, or a space-separated string."""
    if isinstance(value, str):
        return value.split()[:MAX_SCOPES]
    if isinstance(value, list):
        return [v for v in value[:MAX_SCOPES] if isinstance(v, str)]
    return []


def token_scopes(claims: dict[str, Any]) -> list[str]:
    """The token's OAuth scopes: ``scope`` (RFC 9068, space-separated) or ``scp`` (Okta's
    list, Entra's string)."""
    return _values(claims["scope"] if "scope" in claims else claims.get("scp"))


def mapped_scopes(m: Mapping, claims: dict[str, Any]) -> frozenset[str] | None:
    """Toolkeeper scopes the token grants (``None``: narrows nothing)."""
    if m.scopes is None:
        return None
    out: set[str] = set()
    for s in token_scopes(claims):
        out |= m.scopes.get(s, frozenset())
    return None if WILDCARD in out else frozenset(out)


def principal_of(m: Mapping, claims: dict[str, Any], issuer: str,
                 agent_exists: AgentExists) -> Principal:
    """The principal ``claims`` map to; :class:`TokenRefused` (403) when they map to none."""
    tenant = m.tenant if m.tenant is not None else _text(claims, m.tenant_claim)
    if tenant is None:
        raise TokenRefused(f"the token names no tenant (claim {m.tenant_claim!r})",
                           status=403, reason=Reason.FORBIDDEN)
    subject = _text(claims, "sub")
    scopes = mapped_scopes(m, claims)
    roles = frozenset(r.role for r in m.roles
                      if (r.tenant is None or r.tenant == tenant)
                      and r.value in _values(claims.get(r.claim)))
    if roles:
        name = next((v for c in m.person_name_claims if (v := _text(claims, c))), subject)
        return Principal(name=name or "unnamed", tenant_id=tenant, roles=roles,
                         subject=subject, issuer=issuer, scopes=scopes)
    raw = _text(claims, m.agent_claim)
    agent = raw if m.agents is None or raw is None else m.agents.get(raw)
    if agent is None or not agent_exists(tenant, agent):
        raise TokenRefused(f"the token maps to no agent of tenant {tenant!r} and to no role "
                           f"(claim {m.agent_claim!r})", status=403, reason=Reason.FORBIDDEN)
    return Principal(name=agent, tenant_id=tenant, roles=frozenset({Role.AGENT}), agent=agent,
                     subject=subject, issuer=issuer, scopes=scopes)
