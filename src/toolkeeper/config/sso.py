"""``identity.sso``: the console's sign-in through OpenID Connect."""

from __future__ import annotations

from pydantic import Field

from toolkeeper.config._section import _Section


class SsoConfig(_Section):
    """The OpenID provider people sign in with (skeleton: filled in by the SSO work)."""

    issuer: str = Field(min_length=1, max_length=2000)
