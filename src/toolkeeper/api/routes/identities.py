"""Identities over REST (SPEC §7): agents, profiles and activations (this router also carries
``access`` — tokens, credentials, tenants — and the tenant webhook setting).

Every record belongs to the caller's tenant (from its token, never from the request); another
tenant's record answers 404. Admins of the tenant write; operators and approvers read agents,
profiles and activations; an agent token reads only its own agent and profile. Token and
credential management is for admins; ``/tenants`` is for system admins (an admin token of
the system tenant). An agent's profile, autonomy and scopes come only from here.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Response
from pydantic import Field

from toolkeeper.api import webhook
from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import ActivationOut
from toolkeeper.api.routes import access
from toolkeeper.api.routes.access import NAME, admin, blocking, invalid, not_found
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import Body
from toolkeeper.bounds import Excess, activation_excess, refuse
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.profile import Activation, Agent, Profile
from toolkeeper.model.reasons import Reason

router = APIRouter(tags=["identities"], responses=ERRORS)
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

def _agents(gw: Gateway, tenant: str) -> list[Agent]:
    return sorted((a for a in gw.store.registry.agents() if a.tenant_id == tenant),
                  key=lambda a: a.name)


def _agent(gw: Gateway, caller: Principal, name: str) -> Agent:
    if not caller.has_role(Role.OPERATOR, Role.APPROVER) and caller.agent != name:
        raise not_found("agent", name)
    for a in _agents(gw, caller.tenant_id):
        if a.name == name:
            return a
    raise not_found("agent", name)


def _put_agent(gw: Gateway, agent: Agent) -> None:
    if _profile(gw, agent.tenant_id, agent.profile) is None:
        raise invalid(f"no profile {agent.profile!r} in this tenant", "/profile")
    gw.registry.put_agent(agent)


@router.get("/agents", response_model=list[Agent], summary="Agents of the tenant")
async def list_agents(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    require(caller, Role.OPERATOR, Role.APPROVER)
    return [a.model_dump(mode="json") for a in await blocking(_agents, gw, caller.tenant_id)]


@router.get("/agents/{name}", response_model=Agent, summary="One agent")
async def get_agent(name: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    return (await blocking(_agent, gw, caller, name)).model_dump(mode="json")


@router.post("/agents", status_code=201, response_model=Agent, summary="Create an agent (admin)")
async def create_agent(body: AgentBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    admin(caller)
    agent = Agent(name=body.name, profile=body.profile, description=body.description,
                  tenant_id=caller.tenant_id)

    def create() -> None:
        if any(a.name == body.name for a in _agents(gw, caller.tenant_id)):
            raise ApiError(409, Reason.CONFLICT, f"agent {body.name!r} exists already")
        _put_agent(gw, agent)

    await blocking(create)
    return agent.model_dump(mode="json")


@router.put("/agents/{name}", response_model=Agent, summary="Rebind an agent to a profile (admin)")
async def update_agent(name: str, body: AgentUpdate, gw: GatewayDep,
                       caller: Caller) -> dict[str, Any]:
    admin(caller)
    await blocking(_agent, gw, caller, name)
    agent = Agent(name=name, profile=body.profile, description=body.description,
                  tenant_id=caller.tenant_id)
    await blocking(_put_agent, gw, agent)
    return agent.model_dump(mode="json")


@router.delete("/agents/{name}", status_code=204, summary="Delete an agent and revoke its tokens")
async def delete_agent(name: str, gw: GatewayDep, caller: Caller) -> Response:
    admin(caller)

    def delete() -> None:
        if not gw.store.registry.delete_named("agents", caller.tenant_id, name):
            raise not_found("agent", name)
        for rec in gw.store.tokens.list(caller.tenant_id):
            if rec.agent == name and rec.revoked_at is None:
                gw.store.tokens.revoke(rec.id)
        gw.reload()

    await blocking(delete)
    return Response(status_code=204)


# profiles and activations -------------------------------------------------------------

def _profile(gw: Gateway, tenant: str, name: str) -> Profile | None:
    for p in gw.store.registry.profiles():
        if p.tenant_id == tenant and p.name == name:
            return p
    return None


def _readable_profile(gw: Gateway, caller: Principal, name: str) -> Profile:
    if not caller.has_role(Role.OPERATOR, Role.APPROVER):
        own = gw.catalog.agents.get((caller.tenant_id, caller.agent or ""))
        if own is None or own.profile != name:
            raise not_found("profile", name)
    found = _profile(gw, caller.tenant_id, name)
    if found is None:
        raise not_found("profile", name)
    return found


def _check_activations(gw: Gateway, profile: Profile) -> None:
    """Every activation names a tool visible to the tenant, and actions it has."""
    errors: list[dict[str, str]] = []
    for i, act in enumerate(profile.activations):
        rec = gw.catalog.record(profile.tenant_id, act.tool)
        if rec is None:
            errors.append({"pointer": f"/activations/{i}/tool",
                           "message": f"no tool {act.tool!r} visible to this tenant"})
            continue
        unknown = sorted(set(act.actions or ()) - set(rec[1].actions))
        if unknown:
            errors.append({"pointer": f"/activations/{i}/actions",
                           "message": f"{act.tool} has no action {', '.join(unknown)}"})
    if errors:
        raise ApiError(422, Reason.INVALID_ARGUMENTS, "the profile is invalid",
                       {"errors": errors})


def _beyond_bounds(gw: Gateway, tenant: str, act: Activation, at: str) -> list[Excess]:
    """The activation's host-touching values beyond the operator's ceiling."""
    rec = gw.catalog.record(tenant, act.tool)
    if rec is None:
        return []
    return activation_excess(act.policy, rec[1], gw.factory.policy_model(rec[1]),
                             gw.settings.tenant_bounds, at=at)


def _save_profile(gw: Gateway, profile: Profile) -> None:
    """Store a profile a tenant wrote (origin ``api``) after checking it."""
    _check_activations(gw, profile)
    refuse([e for i, act in enumerate(profile.activations)
            for e in _beyond_bounds(gw, profile.tenant_id, act, f"/activations/{i}/policy")],
           f"profile {profile.name!r}")
    gw.registry.put_profile(profile.model_copy(update={"origin": "api"}))


def _own_tenant(profile: Profile, caller: Principal) -> Profile:
    if "tenant_id" in profile.model_fields_set and profile.tenant_id != caller.tenant_id:
        raise invalid("tenant_id must be the token's tenant (or left out)", "/tenant_id")
    return profile.model_copy(update={"tenant_id": caller.tenant_id, "origin": "api"})


@router.get("/profiles", response_model=list[Profile], summary="Profiles of the tenant")
async def list_profiles(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    require(caller, Role.OPERATOR, Role.APPROVER)
    found = await blocking(gw.store.registry.profiles)
    return [p.model_dump(mode="json") for p in sorted(found, key=lambda p: p.name)
            if p.tenant_id == caller.tenant_id]


@router.get("/profiles/{name}", response_model=Profile, summary="One profile")
async def get_profile(name: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    return (await blocking(_readable_profile, gw, caller, name)).model_dump(mode="json")


@router.post("/profiles", status_code=201, response_model=Profile,
             summary="Create a profile (admin)")
async def create_profile(body: Profile, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    admin(caller)
    profile = _own_tenant(body, caller)

    def create() -> None:
        if _profile(gw, caller.tenant_id, profile.name) is not None:
            raise ApiError(409, Reason.CONFLICT, f"profile {profile.name!r} exists already")
        _save_profile(gw, profile)

    await blocking(create)
    return profile.model_dump(mode="json")


@router.put("/profiles/{name}", response_model=Profile, summary="Replace a profile (admin)")
async def replace_profile(name: str, body: Profile, gw: GatewayDep,
                          caller: Caller) -> dict[str, Any]:
    admin(caller)
    if body.name != name:
        raise invalid("the body's name must be the path's", "/name")
    profile = _own_tenant(body, caller)

    def replace() -> None:
        if _profile(gw, caller.tenant_id, name) is None:
            raise not_found("profile", name)
        _save_profile(gw, profile)

    await blocking(replace)
    return profile.model_dump(mode="json")


@router.delete("/profiles/{name}", status_code=204, summary="Delete an unused profile (admin)")
async def delete_profile(name: str, gw: GatewayDep, caller: Caller) -> Response:
    admin(caller)

    def delete() -> None:
        users = [a.name for a in _agents(gw, caller.tenant_id) if a.profile == name]
        if users:
            raise ApiError(409, Reason.CONFLICT, f"profile {name!r} is used by agents",
                           {"agents": users})
        if not gw.store.registry.delete_named("profiles", caller.tenant_id, name):
            raise not_found("profile", name)
        gw.reload()

    await blocking(delete)
    return Response(status_code=204)


@router.get("/activations", response_model=list[Activation], summary="Activations of one profile")
async def list_activations(gw: GatewayDep, caller: Caller,
                           profile: str = Query(min_length=1)) -> list[dict[str, Any]]:
    found: Profile = await blocking(_readable_profile, gw, caller, profile)
    return [a.model_dump(mode="json") for a in found.activations]


@router.post("/activations", response_model=ActivationOut,
             summary="Enable one tool for a profile (upsert, admin)")
async def put_activation(body: ActivationBody, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    admin(caller)
    act = Activation(tool=body.tool, enabled=body.enabled, policy=body.policy,
                     actions=None if body.actions is None else tuple(body.actions),
                     requires_confirmation=body.requires_confirmation, version=body.version)

    def upsert() -> None:
        current = _profile(gw, caller.tenant_id, body.profile)
        if current is None:
            raise not_found("profile", body.profile)
        refuse(_beyond_bounds(gw, caller.tenant_id, act, "/policy"), f"activation {act.tool!r}")
        others = tuple(a for a in current.activations if a.tool != body.tool)
        _save_profile(gw, current.model_copy(update={"activations": (*others, act)}))

    await blocking(upsert)
    return {"profile": body.profile, **act.model_dump(mode="json")}


@router.delete("/activations/{profile}/{tool}", status_code=204,
               summary="Remove a tool from a profile (admin)")
async def delete_activation(profile: str, tool: str, gw: GatewayDep, caller: Caller) -> Response:
    admin(caller)

    def delete() -> None:
        current = _profile(gw, caller.tenant_id, profile)
        if current is None or current.activation(tool) is None:
            raise not_found("activation", f"{profile}/{tool}")
        kept = tuple(a for a in current.activations if a.tool != tool)
        gw.registry.put_profile(current.model_copy(update={"activations": kept}))

    await blocking(delete)
    return Response(status_code=204)
