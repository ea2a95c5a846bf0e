"""``identity:`` in ``toolkeeper.yaml``: OAuth 2.1 access tokens from a company's identity
provider (toolkeeper as a protected resource) and the console's single sign-on.

Read once at start (like ``secrets``); ``tk_…`` tokens keep working unless turned off.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from toolkeeper.config._section import _Section
from toolkeeper.config.issuers import IssuerConfig
from toolkeeper.config.sso import SsoConfig


class IdentityConfig(_Section):
    """Who may call besides ``tk_…`` tokens."""

    resource: str | None = Field(default=None, min_length=1, max_length=2000)
    """This gateway's resource identifier (RFC 8707/9728): the ``aud`` access tokens must
    carry, and the ``resource`` of its protected-resource metadata — its public base URL,
    e.g. ``https://tools.example.com``."""
    tk_tokens: bool = True
    """Accept toolkeeper's own ``tk_…`` bearer tokens (the embedded default)."""
    issuers: list[IssuerConfig] = Field(default_factory=list)
    """Authorization servers whose access tokens are accepted, each with its claim mapping."""
    sso: SsoConfig | None = None
    """The console's sign-in through OpenID Connect."""

    @model_validator(mode="after")
    def _resource_for_issuers(self) -> IdentityConfig:
        if self.issuers and self.resource is None:
            raise ValueError("identity.issuers needs identity.resource (the aud tokens carry)")
        return self
