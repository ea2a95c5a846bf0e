"""What one agent sees over MCP: its ``tools/list`` and the discovery resources.

Listings come from the gateway's in-memory catalog (the rules of
:mod:`toolkeeper.services.discovery`, so a listed tool is one the pipeline lets the agent
call) and are cached per agent until the catalog is replaced.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
import orjson
from mcp.shared.inbound import x_mcp_header_map

from toolkeeper.canonical import digest
from toolkeeper.model.call import Principal
from toolkeeper.model.mcp_names import Listed, listed
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.pipeline.health import HealthBoard
from toolkeeper.pipeline.resolve import Refusal, resolve_tool
from toolkeeper.services.discovery import (
    AgentTools,
    agent_enabled,
    agent_listing,
    agent_tools,
    as_seen_by_agent,
)
from toolkeeper.services.tool_views import enabled_body, listing_body, unavailable_body
from toolkeeper.upstream.extras import RELAYED

if TYPE_CHECKING:
    from toolkeeper.gateway import Gateway

log = logging.getLogger("toolkeeper.mcp")

Key = tuple[str, str, frozenset[str] | None]
"""(tenant, agent, the caller's OAuth scopes): whose listing."""

RESOURCE_RE = re.compile(
    r"^toolkeeper://tools/(?:tenant/(?P<tenant>[^/]+)/available"
    r"|agent/(?P<agent>[^/]+)/(?P<which>enabled|unavailable))$")
TEMPLATES = (
    ("toolkeeper://tools/tenant/{tenant_id}/available", "available",
     "Tier 2: the tools the tenant has available"),
    ("toolkeeper://tools/agent/{agent_id}/enabled", "enabled",
     "Tier 3: the tools and actions this agent may call"),
    ("toolkeeper://tools/agent/{agent_id}/unavailable", "unavailable",
     "The tenant's other tools, each with why_unavailable"),
)


@dataclass(frozen=True, slots=True)
class Listing:
    """One agent's ``tools/list`` for one catalog snapshot."""

    entries: tuple[Listed, ...]
    by_name: dict[str, Listed]
    wire: list[dict[str, Any]]
    fingerprint: str
    result: types.ListToolsResult
    """The SDK's typed answer, built once per agent and snapshot."""
    callable_names: dict[str, Listed]
    """What ``tools/call`` accepts: the listed names and those of tools hidden only while
    their circuit is open (the pipeline answers ``tool_unavailable`` with ``retry_after``,
    and lets the half-open probe through)."""
    health_version: int
    recheck_at: float
    """When the first hidden breaker half-opens (on the board's clock): rebuild then."""
    param_headers: frozenset[str] = frozenset()
    """Listed tools with ``x-mcp-header`` parameters (2026-07-28 ``Mcp-Param-*``): their
    calls are the SDK's, which checks the headers against this caller's schema."""


_NO_HEALTH = HealthBoard()
"""Every tool healthy: the listing as it is without its health filter."""


def build_listing(gw: Gateway, catalog: Catalog, key: Key) -> Listing:
    tenant, agent, scopes = key
    board = gw.runtime.health
    version = board.version  # read first: a change while building rebuilds next time
    view = agent_enabled(catalog, _NO_HEALTH, tenant, agent, scopes)
    every: dict[str, Listed] = {}
    entries: dict[str, Listed] = {}
    recheck = math.inf
    for item in view[1] if view else ():
        if item.definition.implementation_type in RELAYED:  # prompts/resources: mcp/relay.py
            continue
        wait = board.blocked(f"{tenant}:{item.definition.name}")
        if wait is not None:
            recheck = min(recheck, board.clock() + wait)
        for action in item.actions:
            entry = listed(item.definition, action)
            if entry.name in entries:  # a global and a tenant tool clash: keep the first
                log.warning("MCP name %s of %s/%s is taken; %s is not listed",
                            entry.name, tenant, agent, entry.tool)
                continue
            every[entry.name] = entry
            if wait is None:
                entries[entry.name] = entry
    ordered = tuple(entries[n] for n in sorted(entries))
    wire = [e.wire() for e in ordered]
    headed = frozenset(e.name for e in every.values() if x_mcp_header_map(e.input_schema))
    return Listing(entries=ordered, by_name={e.name: e for e in ordered}, wire=wire,
                   fingerprint=digest(wire),
                   result=types.ListToolsResult(tools=[types.Tool.model_validate(w)
                                                       for w in wire]),
                   callable_names=every, health_version=version, recheck_at=recheck,
                   param_headers=headed)


class Listings:
    """Per-agent listings, rebuilt lazily after the catalog or a tool's health changes."""

    def __init__(self, gw: Gateway) -> None:
        self._gw = gw
        self._lock = threading.Lock()
        self._catalog: Catalog | None = None
        self._cache: dict[Key, Listing] = {}
        self.param_headers = False
        """Whether any listing built had tools with ``x-mcp-header`` parameters (the lean
        path looks further only then)."""

    def get(self, key: Key) -> Listing:
        catalog = self._gw.catalog
        with self._lock:
            if catalog is not self._catalog:
                self._catalog, self._cache = catalog, {}
            found = self._cache.get(key)
        if found is not None and self._stale(found):
            found = None
        if found is None:
            found = build_listing(self._gw, catalog, key)
            self.param_headers = self.param_headers or bool(found.param_headers)
            with self._lock:
                if catalog is self._catalog and len(self._cache) < 100_000:
                    self._cache[key] = found
        return found


    def _stale(self, found: Listing) -> bool:
        board = self._gw.runtime.health
        return found.health_version != board.version or (
            found.recheck_at != math.inf and board.clock() >= found.recheck_at)


def key_of(principal: Principal) -> Key:
    assert principal.agent is not None
    return (principal.tenant_id, principal.agent, principal.scopes)


def step_up_scopes(listings: Listings, catalog: Catalog, who: Principal,
                   name: str) -> frozenset[str] | None:
    """The scopes a call of ``name`` needs beyond what ``who``'s OAuth token grants, when
    the agent's profile grants them (the token, not the profile, falls short: the client can
    ask its authorization server for more); ``None`` otherwise. The two listings differ only
    by the token's scopes, so a name in the profile's and not in the token's is such a
    call."""
    if who.scopes is None or who.agent is None:
        return None
    tenant, agent, _ = key_of(who)
    if name in listings.get(key_of(who)).callable_names:
        return None
    entry = listings.get((tenant, agent, None)).callable_names.get(name)
    found = catalog.agents.get((tenant, agent))
    profile = catalog.profiles.get((tenant, found.profile)) if found is not None else None
    if entry is None or profile is None:
        return None
    resolved = resolve_tool(catalog, profile, tenant, entry.tool)
    if isinstance(resolved, Refusal):
        return None
    return (resolved[0].scopes(entry.action) - who.scopes) or None


def resources(principal: Principal) -> list[dict[str, Any]]:
    """The three discovery resources of the caller's tenant and agent."""
    tenant, agent, _ = key_of(principal)
    concrete = (f"toolkeeper://tools/tenant/{tenant}/available",
                f"toolkeeper://tools/agent/{agent}/enabled",
                f"toolkeeper://tools/agent/{agent}/unavailable")
    return [{"uri": uri, "name": name, "description": text, "mimeType": "application/json"}
            for uri, (_t, name, text) in zip(concrete, TEMPLATES, strict=True)]


def templates() -> list[dict[str, Any]]:
    return [{"uriTemplate": t, "name": name, "description": text,
             "mimeType": "application/json"} for t, name, text in TEMPLATES]


def read(gw: Gateway, principal: Principal, uri: str) -> str | None:
    """The JSON text of a discovery resource; ``None`` when the caller may not see it (another
    tenant or agent reads as not found, never as forbidden)."""
    m = RESOURCE_RE.match(uri)
    if m is None:
        return None
    tenant, agent, scopes = key_of(principal)
    catalog = gw.catalog
    if m["tenant"] is not None:
        if m["tenant"] != tenant:
            return None
        # an agent sees only what it may call, never the rest of the tenant's registry
        body = listing_body(catalog, tenant,
                            agent_listing(catalog, gw.runtime.health, tenant, agent, scopes))
    elif m["agent"] != agent:
        return None
    elif m["which"] == "enabled":
        view = agent_enabled(catalog, gw.runtime.health, tenant, agent, scopes)
        body = enabled_body(catalog, tenant, agent, *(view or ("", ())))
    else:
        full = agent_tools(catalog, gw.runtime.health, tenant, agent, scopes)
        body = unavailable_body(catalog, tenant,
                                as_seen_by_agent(full or AgentTools(agent, "", (), ())))
    return orjson.dumps(body).decode()
