"""Identities over REST (SPEC §7): agents, profiles and activations (this router also carries
``access`` — tokens, credentials, tenants — and the tenant webhook setting). The rules live
in :class:`toolkeeper.services.identities.IdentityService`; these routes translate.

Every record belongs to the caller's tenant (from its token, never from the request); another
tenant's record answers 404. Admins of the tenant write; operators and approvers read agents,
profiles and activations; an agent token reads only its own agent and profile. Token and
credential management is for admins; ``/tenants`` is for system admins (an admin token of
the system tenant). An agent's profile, autonomy and scopes come only from here.
"""

from __future__ import annotations

from typing import Any

from fastapi import Query, Response
from pydantic import Field

from toolkeeper.api import webhook
from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import ActivationOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes import access
from toolkeeper.api.routes.access import NAME, blocking
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import Body
from toolkeeper.builtins.agent_call import check_endpoint_destination
from toolkeeper.errors import ToolDenied
from toolkeeper.model.call import Principal
from toolkeeper.model.profile import Activation, Agent, AgentEndpoint, Profile, agent_id
from toolkeeper.services.identities import invalid, not_found

router = RouteTable(tags=["identities"], responses=ERRORS)
router.include_router(access.router)
router.include_router(webhook.router)


class AgentBody(Body):
    """``POST /agents``: an agent bound to a profile of the caller's tenant."""

    name: str = Field(pattern=NAME)
    profile: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)


class AgentUpdate(Body):
    """``PUT /agents/{name}``."""

    profile: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=2000)


class ActivationBody(Body):
    """``POST /activations``: enable one tool for a profile (upsert)."""

    profile: str = Field(min_length=1, max_length=200)
    tool: str = Field(min_length=1, max_length=200)
    actions: list[str] | None = None
    policy: dict[str, Any] = Field(default_factory=dict)
    requires_confirmation: bool | None = None
    version: str | None = Field(default=None, max_length=100)
    enabled: bool = True


# agents -------------------------------------------------------------------------------

@router.get("/agents", response_model=list[Agent], summary="Agents of the tenant")
async def list_agents(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    found = await blocking(gw.identities.list_agents, caller, caller.tenant_id)
    return [a.model_dump(mode="json") for a in found]


@router.get("/agents/{name}", response_model=Agent, summary="One agent")
async def get_agent(name: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    found = await blocking(gw.identities.get_agent, caller, caller.tenant_id, name)
    return found.model_dump(mode="json")


@router.post("/agents", status_code=201, response_model=Agent, summary="Create an agent (admin)")
async def create_agent(body: AgentBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    agent = Agent(name=body.name, profile=body.profile, description=body.description,
                  tenant_id=caller.tenant_id)
    await blocking(gw.identities.create_agent, caller, agent)
    return agent.model_dump(mode="json")


@router.put("/agents/{name}", response_model=Agent, summary="Rebind an agent to a profile (admin)")
async def update_agent(name: str, body: AgentUpdate, gw: GatewayDep,
                       caller: Caller) -> dict[str, Any]:
    agent = Agent(name=name, profile=body.profile, description=body.description,
                  tenant_id=caller.tenant_id)
    await blocking(gw.identities.update_agent, caller, agent)
    return agent.model_dump(mode="json")


@router.delete("/agents/{name}", status_code=204, summary="Delete an agent and revoke its tokens")
async def delete_agent(name: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(gw.identities.delete_agent, caller, caller.tenant_id, name)
    return Response(status_code=204)


class EndpointOut(AgentEndpoint):
    """An agent's endpoint with the agent's ``agent_call`` id and slug."""

    agent_id: str
    agent: str


def _endpoint_out(agent: Agent) -> dict[str, Any]:
    if agent.endpoint is None:
        raise not_found("endpoint of agent", agent.name)
    return {**agent.endpoint.model_dump(mode="json"), "agent": agent.name,
            "agent_id": agent_id(agent.tenant_id, agent.name)}


@router.get("/agents/{name}/endpoint", response_model=EndpointOut,
            summary="The agent's agent_call endpoint")
async def get_endpoint(name: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    found = await blocking(gw.identities.get_agent, caller, caller.tenant_id, name)
    return _endpoint_out(found)


@router.put("/agents/{name}/endpoint", response_model=EndpointOut,
            summary="Register or replace the agent's agent_call endpoint (admin)")
async def put_endpoint(name: str, body: AgentEndpoint, gw: GatewayDep,
                       caller: Caller) -> dict[str, Any]:
    await blocking(gw.identities.vet_endpoint, caller, caller.tenant_id, name, body)
    try:  # the URL resolved as the call will resolve it, so the admin hears of it now
        await check_endpoint_destination(body)
    except ToolDenied as exc:
        raise ApiError(422, exc.reason, f"endpoint URL refused: {exc.message}; list the "
                       "agent's network in 'allowed_networks' to reach it") from None
    saved = await blocking(gw.identities.set_endpoint, caller, caller.tenant_id, name, body)
    return _endpoint_out(saved)


@router.delete("/agents/{name}/endpoint", status_code=204,
               summary="Remove the agent's agent_call endpoint (admin)")
async def delete_endpoint(name: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(gw.identities.set_endpoint, caller, caller.tenant_id, name, None)
    return Response(status_code=204)


# profiles and activations -------------------------------------------------------------

def _own_tenant(profile: Profile, caller: Principal) -> Profile:
    if "tenant_id" in profile.model_fields_set and profile.tenant_id != caller.tenant_id:
        raise invalid("tenant_id must be the token's tenant (or left out)", "/tenant_id")
    return profile.model_copy(update={"tenant_id": caller.tenant_id, "origin": "api"})


@router.get("/profiles", response_model=list[Profile], summary="Profiles of the tenant")
async def list_profiles(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    found = await blocking(gw.identities.list_profiles, caller, caller.tenant_id)
    return [p.model_dump(mode="json") for p in found]


@router.get("/profiles/{name}", response_model=Profile, summary="One profile")
async def get_profile(name: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    found = await blocking(gw.identities.get_profile, caller, caller.tenant_id, name)
    return found.model_dump(mode="json")


@router.post("/profiles", status_code=201, response_model=Profile,
             summary="Create a profile (admin)")
async def create_profile(body: Profile, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    profile = _own_tenant(body, caller)
    await blocking(gw.identities.create_profile, caller, profile)
    return profile.model_dump(mode="json")


@router.put("/profiles/{name}", response_model=Profile, summary="Replace a profile (admin)")
async def replace_profile(name: str, body: Profile, gw: GatewayDep,
                          caller: Caller) -> dict[str, Any]:
    if body.name != name:
        raise invalid("the body's name must be the path's", "/name")
    profile = _own_tenant(body, caller)
    await blocking(gw.identities.replace_profile, caller, profile)
    return profile.model_dump(mode="json")


@router.delete("/profiles/{name}", status_code=204, summary="Delete an unused profile (admin)")
async def delete_profile(name: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(gw.identities.delete_profile, caller, caller.tenant_id, name)
    return Response(status_code=204)


@router.get("/activations", response_model=list[Activation], summary="Activations of one profile")
async def list_activations(gw: GatewayDep, caller: Caller,
                           profile: str = Query(min_length=1)) -> list[dict[str, Any]]:
    found = await blocking(gw.identities.list_activations, caller, caller.tenant_id, profile)
    return [a.model_dump(mode="json") for a in found]


@router.post("/activations", response_model=ActivationOut,
             summary="Enable one tool for a profile (upsert, admin)")
async def put_activation(body: ActivationBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    act = Activation(tool=body.tool, enabled=body.enabled, policy=body.policy,
                     actions=None if body.actions is None else tuple(body.actions),
                     requires_confirmation=body.requires_confirmation, version=body.version)
    await blocking(gw.identities.put_activation, caller, caller.tenant_id, body.profile, act)
    return {"profile": body.profile, **act.model_dump(mode="json")}


@router.delete("/activations/{profile}/{tool}", status_code=204,
               summary="Remove a tool from a profile (admin)")
async def delete_activation(profile: str, tool: str, gw: GatewayDep, caller: Caller) -> Response:
    await blocking(gw.identities.delete_activation, caller, caller.tenant_id, profile, tool)
    return Response(status_code=204)
