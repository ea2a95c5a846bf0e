"""``identity.issuers[]``: an authorization server whose access tokens are accepted, and how
their claims become a toolkeeper principal (docs/identity.md, "Claim mapping").

The models here are the operator's words; :func:`compiled` turns one into the plain value
the identity package checks tokens with (that package sits below config).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from toolkeeper.config._section import _Section
from toolkeeper.identity.mapping import AgentExists, Mapping, RoleRule
from toolkeeper.identity.tokens import (
    ALLOWED_ALGORITHMS,
    AccessTokens,
    Introspection,
    Issuer,
    SecretGetter,
)
from toolkeeper.model.enums import Role
from toolkeeper.secrets.base import parse_ref
from toolkeeper.token_cache import Bearers, TokenCache

_Name = Field(min_length=1, max_length=200)


class IntrospectionConfig(_Section):
    """RFC 7662: opaque (non-JWT) access tokens are asked about at the issuer."""

    endpoint: str = Field(min_length=1, max_length=2000)
    client_id: str = Field(min_length=1, max_length=500)
    client_secret: str = Field(min_length=1, max_length=500)
    """A ``${secret:connector/key}`` reference (resolved by the secrets backend at first
    use); a literal is refused."""
    timeout_s: float = Field(default=5.0, gt=0, le=30)

    @field_validator("client_secret")
    @classmethod
    def _reference_only(cls, value: str) -> str:
        if parse_ref(value) is None:
            raise ValueError("secret_literal_refused: client_secret must be a "
                             "${secret:connector/key} reference")
        return value


class RoleRuleConfig(_Section):
    """A claim value that grants a role: ``groups`` contains ``tk-approvers`` → approver."""

    claim: str = _Name
    value: str = Field(min_length=1, max_length=500)
    """Equal to a string claim, or contained in a list (or space-separated string) claim."""
    role: Literal["admin", "operator", "approver"]
    tenant: str | None = Field(default=None, min_length=1, max_length=200)
    """The rule applies only to principals of this tenant (``None``: any)."""


class ClaimsConfig(_Section):
    """Claims → tenant, agent or person, roles and scopes."""

    tenant: str | None = Field(default=None, min_length=1, max_length=200)
    """Every principal of this issuer is in this tenant…"""
    tenant_claim: str | None = Field(default=None, min_length=1, max_length=200)
    """…or the tenant is this claim's value (one of them is required)."""
    agent_claim: str | None = Field(default="client_id", max_length=200)
    """The claim naming the agent (``client_id``, ``azp``, ``sub``…); ``None``: no agents."""
    agents: dict[str, str] | None = None
    """Claim value → agent name (e.g. Entra's client GUIDs); ``None``: the value itself."""
    person_name_claims: list[str] = Field(default_factory=lambda: ["email", "name", "sub"],
                                          max_length=10)
    """A person's display name: the first of these claims present."""
    roles: list[RoleRuleConfig] = Field(default_factory=list, max_length=200)
    scopes: dict[str, list[str]] | None = None
    """OAuth scope → toolkeeper scopes (``["*"]``: narrows nothing). Unmapped OAuth scopes
    grant nothing. ``None``: the token narrows nothing (the profile decides alone)."""

    @model_validator(mode="after")
    def _one_tenant(self) -> ClaimsConfig:
        if (self.tenant is None) == (self.tenant_claim is None):
            raise ValueError("claims: give exactly one of tenant and tenant_claim")
        return self


class IssuerConfig(_Section):
    """One trusted issuer: whose tokens, for which audience, signed how, mapped how."""

    issuer: str = Field(min_length=1, max_length=2000)
    """The exact ``iss`` (e.g. ``https://acme.okta.com/oauth2/default``)."""
    jwks_uri: str | None = Field(default=None, min_length=1, max_length=2000)
    """Otherwise discovered from the issuer's ``/.well-known/openid-configuration`` (or
    ``oauth-authorization-server``) metadata."""
    audiences: list[str] | None = Field(default=None, min_length=1, max_length=20)
    """Accepted ``aud`` values; default ``identity.resource`` (and its ``/mcp``)."""
    algorithms: list[str] = Field(default_factory=lambda: sorted(ALLOWED_ALGORITHMS),
                                  min_length=1, max_length=10)
    leeway_s: int = Field(default=60, ge=0, le=300)
    """Clock skew allowed on ``exp``, ``nbf`` and ``iat``."""
    required_typ: str | None = Field(default=None, max_length=100)
    """A JWT header ``typ`` tokens must carry (e.g. ``at+jwt``, RFC 9068); ``None``: any
    but ``JWT``-looking ID tokens are still accepted."""
    timeout_s: float = Field(default=5.0, gt=0, le=30)
    """Bound on each request to the issuer (discovery, JWKS)."""
    jwks_refetch_interval_s: float = Field(default=30.0, ge=0, le=3600)
    """An unknown ``kid`` refetches the JWKS at most once per this interval."""
    introspection: IntrospectionConfig | None = None
    claims: ClaimsConfig

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        bad = sorted(set(value) - ALLOWED_ALGORITHMS)
        if bad:
            raise ValueError(f"algorithms not allowed: {', '.join(bad)} (only "
                             f"{', '.join(sorted(ALLOWED_ALGORITHMS))}; never none or HS*)")
        return value


def compiled(cfg: IssuerConfig, resource: str | None) -> Issuer:
    """The identity package's value for ``cfg``; ``resource`` is ``identity.resource``."""
    audiences = cfg.audiences
    if audiences is None:
        if resource is None:
            raise ValueError(f"issuer {cfg.issuer}: set identity.resource or audiences")
        base = resource.rstrip("/")
        audiences = [resource, base, f"{base}/mcp"]
    c = cfg.claims
    mapping = Mapping(
        tenant=c.tenant, tenant_claim=c.tenant_claim, agent_claim=c.agent_claim,
        agents=dict(c.agents) if c.agents is not None else None,
        person_name_claims=tuple(c.person_name_claims),
        roles=tuple(RoleRule(claim=r.claim, value=r.value, role=Role(r.role), tenant=r.tenant)
                    for r in c.roles),
        scopes=({k: frozenset(v) for k, v in c.scopes.items()}
                if c.scopes is not None else None))
    intro = cfg.introspection
    return Issuer(issuer=cfg.issuer, jwks_uri=cfg.jwks_uri, audiences=frozenset(audiences),
                  algorithms=frozenset(cfg.algorithms), leeway_s=cfg.leeway_s,
                  required_typ=cfg.required_typ, mapping=mapping, timeout_s=cfg.timeout_s,
                  refetch_interval_s=cfg.jwks_refetch_interval_s,
                  introspection=None if intro is None else Introspection(
                      endpoint=intro.endpoint, client_id=intro.client_id,
                      client_secret_ref=intro.client_secret, timeout_s=intro.timeout_s))


def bearers_for(identity: Any, tk: TokenCache, agent_exists: AgentExists,
                secrets: SecretGetter | None) -> Bearers:
    """REST's and ``/mcp``'s bearer tokens as the ``identity`` section (``IdentityConfig``
    or ``None``) says."""
    if identity is None:
        return Bearers(tk, None)
    issuers = [compiled(i, identity.resource) for i in identity.issuers]
    access = AccessTokens(issuers, agent_exists, secrets) if issuers else None
    return Bearers(tk, access, tk_tokens=identity.tk_tokens, resource=identity.resource)
