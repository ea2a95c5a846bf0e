"""``identity.issuers[]``: an authorization server whose access tokens are accepted."""

from __future__ import annotations

from pydantic import Field

from toolkeeper.config._section import _Section


class IssuerConfig(_Section):
    """One trusted issuer (skeleton: filled in by the resource-server work)."""

    issuer: str = Field(min_length=1, max_length=2000)
