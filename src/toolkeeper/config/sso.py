"""``identity.sso``: the console's sign-in through OpenID Connect (docs/identity-sso.md).

The operator names the provider, the console's client at it, the console's public URL (the
redirect URI is ``<public_url>/auth/callback``, registered at the provider) and how a
person's ID-token claims become a tenant and roles — the same rule model as
``identity.issuers[].claims`` (``config/issuers.py``), people only: a person whom no role
rule matches is not let in.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from toolkeeper.config._section import _Section
from toolkeeper.config.issuers import ClaimsConfig
from toolkeeper.identity.mapping import Mapping, RoleRule
from toolkeeper.identity.sso import SsoSettings
from toolkeeper.identity.tokens import ALLOWED_ALGORITHMS
from toolkeeper.model.enums import Role
from toolkeeper.secrets.base import parse_ref


class SsoConfig(_Section):
    """The OpenID provider people sign in with, and the sessions it opens."""

    issuer: str = Field(min_length=1, max_length=2000)
    """The provider's exact ``iss``; its ``/.well-known/openid-configuration`` is read."""
    client_id: str = Field(min_length=1, max_length=500)
    client_secret: str | None = Field(default=None, min_length=1, max_length=500)
    """A ``${secret:connector/key}`` reference (the ``env`` backend reads it from the
    environment); a literal is refused. ``None``: a public client (PKCE only)."""
    scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "email"],
                              min_length=1, max_length=20)
    public_url: str = Field(min_length=1, max_length=2000)
    """The console's origin as browsers reach it, e.g. ``https://tools.example.com``."""
    claims: ClaimsConfig
    """Tenant and roles from the ID token's claims (``agent_claim`` is ignored: people only)."""
    algorithms: list[str] = Field(default_factory=lambda: sorted(ALLOWED_ALGORITHMS),
                                  min_length=1, max_length=10)
    leeway_s: int = Field(default=60, ge=0, le=300)
    timeout_s: float = Field(default=5.0, gt=0, le=30)
    """Bound on each request to the provider (discovery, keys, token endpoint)."""
    session_idle_s: int = Field(default=1800, ge=1, le=86400 * 7)
    """A session unused this long ends."""
    session_max_s: int = Field(default=43200, ge=1, le=86400 * 30)
    """A session ends this long after sign-in, used or not."""
    login_ttl_s: int = Field(default=600, ge=10, le=3600)
    """How long a started sign-in may take at the provider."""
    secure_cookies: bool | None = None
    """``Secure`` + ``__Host-`` cookies; ``None``: when ``public_url`` is https."""

    @field_validator("client_secret")
    @classmethod
    def _reference_only(cls, value: str | None) -> str | None:
        if value is not None and parse_ref(value) is None:
            raise ValueError("secret_literal_refused: client_secret must be a "
                             "${secret:connector/key} reference")
        return value

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        bad = sorted(set(value) - ALLOWED_ALGORITHMS)
        if bad:
            raise ValueError(f"algorithms not allowed: {', '.join(bad)}")
        return value

    @model_validator(mode="after")
    def _checked(self) -> SsoConfig:
        url = urlsplit(self.public_url)
        if url.scheme not in ("http", "https") or not url.netloc or url.path not in ("", "/"):
            raise ValueError("public_url: an http(s) origin without a path")
        if "openid" not in self.scopes:
            raise ValueError("scopes: must include openid")
        if not self.claims.roles:
            raise ValueError("claims.roles: give at least one rule (people need a role)")
        return self


def compiled(cfg: SsoConfig) -> SsoSettings:
    """The identity package's value for ``cfg``."""
    c = cfg.claims
    mapping = Mapping(
        tenant=c.tenant, tenant_claim=c.tenant_claim, agent_claim=None, agents=None,
        person_name_claims=tuple(c.person_name_claims),
        roles=tuple(RoleRule(claim=r.claim, value=r.value, role=Role(r.role), tenant=r.tenant)
                    for r in c.roles), scopes=None)
    public = cfg.public_url.rstrip("/")
    secure = cfg.secure_cookies if cfg.secure_cookies is not None else \
        public.startswith("https://")
    return SsoSettings(
        issuer=cfg.issuer, client_id=cfg.client_id, client_secret_ref=cfg.client_secret,
        scopes=tuple(cfg.scopes), public_url=public, mapping=mapping,
        algorithms=frozenset(cfg.algorithms), leeway_s=cfg.leeway_s, timeout_s=cfg.timeout_s,
        idle_s=cfg.session_idle_s, max_s=cfg.session_max_s, login_ttl_s=cfg.login_ttl_s,
        secure=secure)
