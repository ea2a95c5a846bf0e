"""The network reach the outbound built-ins share (``http_request``, ``web_fetch``,
``web_search``): which hosts, private networks and ports their requests may go to, all
enforced by :class:`toolkeeper.netguard.NetGuard` on every hop and resolved address."""

from __future__ import annotations

from typing import Annotated

from pydantic import field_validator

from toolkeeper.bounds import HostNetworks, Subset, host_covered
from toolkeeper.errors import ConfigError
from toolkeeper.netguard import NetGuard, Resolver
from toolkeeper.providers.base import ToolPolicy


class NetworkPolicy(ToolPolicy):
    """Base of an outbound built-in's policy: where its requests may go."""

    allowed_hosts: Annotated[tuple[str, ...], Subset(open="empty", covered=host_covered)] = ()
    """Exact host names or ``*.suffix``; empty admits any public host."""
    allowed_networks: Annotated[tuple[str, ...], HostNetworks()] = ()
    """CIDRs reachable even though private (``10.0.0.0/8``); empty admits none. A tenant
    may list only networks within the operator's ceiling (``toolkeeper.bounds``)."""
    allowed_ports: Annotated[tuple[int, ...] | None, Subset(open="none")] = None
    """``None`` admits any port."""

    @field_validator("allowed_networks")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            NetGuard(allowed_networks=value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return value


def provider_guard(policy: NetworkPolicy, resolver: Resolver | None) -> NetGuard:
    """The guard of a built-in that sends a key to a provider (``web_search``,
    ``composio``): the policy's hosts, networks and ports, and no redirects (a redirect
    would carry the key elsewhere)."""
    return NetGuard(allowed_hosts=policy.allowed_hosts, allowed_networks=policy.allowed_networks,
                    allowed_ports=policy.allowed_ports, max_redirects=0, resolver=resolver)
