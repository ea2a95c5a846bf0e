"""Three-tier tool discovery over REST (SPEC §6, §7; seed: Toolbox §3).

Every role reads the tenant's catalog and available tools. An agent's enabled and
unavailable tools are read by admins and operators of its tenant, and by that agent
itself; another tenant's agent does not exist here (404).
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.tool_views import enabled_body, listing_body, unavailable_body
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.catalog import Catalog
from toolkeeper.services.discovery import (
    AgentTools,
    agent_enabled,
    agent_tools,
    available_tools,
    catalog_tools,
)

router = APIRouter(tags=["discovery"])
_READERS = (Role.OPERATOR, Role.APPROVER, Role.AGENT)


def _agent_view(gw: Gateway, caller: Principal, agent: str) -> tuple[Catalog, AgentTools]:
    if not caller.has_role(Role.OPERATOR) and caller.agent != agent:
        raise ApiError(403, Reason.FORBIDDEN, "an agent reads only its own tools")
    catalog = gw.catalog  # one snapshot for the whole answer
    view = agent_tools(catalog, gw.runtime.health, caller.tenant_id, agent)
    if view is None:
        raise ApiError(404, Reason.NOT_FOUND, f"no agent {agent!r}")
    return catalog, view


@router.get("/discovery/catalog", responses=ERRORS,
            summary="Tier 1: every tool the tenant can see, any status")
async def catalog(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, *_READERS)
    snap, tenant = gw.catalog, caller.tenant_id
    return await anyio.to_thread.run_sync(
        lambda: listing_body(snap, tenant, catalog_tools(snap, tenant)))


@router.get("/discovery/available", responses=ERRORS,
            summary="Tier 2: the tools the tenant has available")
async def available(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, *_READERS)
    snap, tenant = gw.catalog, caller.tenant_id
    return await anyio.to_thread.run_sync(
        lambda: listing_body(snap, tenant, available_tools(snap, tenant)))


@router.get("/discovery/agents/{agent}/enabled", responses=ERRORS,
            summary="Tier 3: the tools and actions this agent may call, by name")
async def enabled(agent: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    if not caller.has_role(Role.OPERATOR) and caller.agent != agent:
        raise ApiError(403, Reason.FORBIDDEN, "an agent reads only its own tools")
    snap, tenant = gw.catalog, caller.tenant_id  # in memory: no thread hop needed
    view = agent_enabled(snap, gw.runtime.health, tenant, agent)
    if view is None:
        raise ApiError(404, Reason.NOT_FOUND, f"no agent {agent!r}")
    return enabled_body(snap, tenant, agent, *view)


@router.get("/discovery/agents/{agent}/unavailable", responses=ERRORS,
            summary="Tier 2 minus tier 3, each with why_unavailable")
async def unavailable(agent: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    snap, view = await anyio.to_thread.run_sync(_agent_view, gw, caller, agent)
    return unavailable_body(snap, caller.tenant_id, view)
