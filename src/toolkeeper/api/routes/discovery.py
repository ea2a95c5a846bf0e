"""Three-tier tool discovery over REST (SPEC §6, §7; seed: Toolbox §3).

People (admins, operators, approvers) read the tenant's catalog and available tools. An
agent token is shown only what its agent may see: the catalog and available tiers hold
just the tools it may call, and its unavailable tier only the tools its own profile
activates. An agent's enabled and unavailable tools are read by admins and operators of
its tenant, and by that agent itself; another tenant's agent does not exist here (404).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from toolkeeper.api.auth import Caller, GatewayDep, require, seen_as_agent
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import EnabledOut, ListingOut, UnavailableOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ToolDefinition
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.services.discovery import (
    AgentTools,
    agent_enabled,
    agent_listing,
    agent_tools,
    as_seen_by_agent,
    available_tools,
    catalog_tools,
)
from toolkeeper.services.tool_views import enabled_body, listing_body, unavailable_body

router = RouteTable(tags=["discovery"])
_READERS = (Role.OPERATOR, Role.APPROVER, Role.AGENT)


def _agent_view(gw: Gateway, caller: Principal, agent: str) -> tuple[Catalog, AgentTools]:
    if not caller.has_role(Role.OPERATOR) and caller.agent != agent:
        raise ApiError(403, Reason.FORBIDDEN, "an agent reads only its own tools")
    catalog = gw.catalog  # one snapshot for the whole answer
    view = agent_tools(catalog, gw.runtime.health, caller.tenant_id, agent,
                       caller.scopes if caller.agent == agent else None)
    if view is None:
        raise ApiError(404, Reason.NOT_FOUND, f"no agent {agent!r}")
    return catalog, (view if caller.has_role(Role.OPERATOR) else as_seen_by_agent(view))


def _listing(gw: Gateway, caller: Principal, tools: Callable[[Catalog, str],
             list[ToolDefinition]]) -> dict[str, Any]:
    snap, tenant = gw.catalog, caller.tenant_id  # one snapshot for the whole answer
    agent = seen_as_agent(caller)
    picked = tools(snap, tenant) if agent is None else agent_listing(
        snap, gw.runtime.health, tenant, agent, caller.scopes)
    return listing_body(snap, tenant, picked)


@router.get("/discovery/catalog", response_model=ListingOut, responses=ERRORS,
            summary="Tier 1: every tool the tenant can see, any status")
async def catalog(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, *_READERS)
    return await anyio.to_thread.run_sync(_listing, gw, caller, catalog_tools)


@router.get("/discovery/available", response_model=ListingOut, responses=ERRORS,
            summary="Tier 2: the tools the tenant has available")
async def available(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, *_READERS)
    return await anyio.to_thread.run_sync(_listing, gw, caller, available_tools)


@router.get("/discovery/agents/{agent}/enabled", response_model=EnabledOut,
            responses=ERRORS,
            summary="Tier 3: the tools and actions this agent may call, by name")
async def enabled(agent: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    if not caller.has_role(Role.OPERATOR) and caller.agent != agent:
        raise ApiError(403, Reason.FORBIDDEN, "an agent reads only its own tools")
    snap, tenant = gw.catalog, caller.tenant_id  # in memory: no thread hop needed
    view = agent_enabled(snap, gw.runtime.health, tenant, agent,
                         caller.scopes if caller.agent == agent else None)
    if view is None:
        raise ApiError(404, Reason.NOT_FOUND, f"no agent {agent!r}")
    return enabled_body(snap, tenant, agent, *view)


@router.get("/discovery/agents/{agent}/unavailable", response_model=UnavailableOut,
            responses=ERRORS,
            summary="Tier 2 minus tier 3, each with why_unavailable")
async def unavailable(agent: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    snap, view = await anyio.to_thread.run_sync(_agent_view, gw, caller, agent)
    return unavailable_body(snap, caller.tenant_id, view)
