"""The tool registry over REST (SPEC §6, §7; seed: Tools Overview).

Admins write, people of every other role read. A tenant sees its own tools and the global
ones, never another tenant's (their ids answer 404). Global tools are read-only for every
tenant (403). An agent token reads only the tools its agent may call, the actions it may
call and never their wiring or policy values (``agent_tool_out``); any other id is 404
to it, and the built-in templates are for people only. Lifecycle rules live in
:class:`RegistryService`: creation is draft only, publishing only via
``POST /tools/{id}/publish``, versions are semver and must increase.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from fastapi import Query

from toolkeeper.api.auth import Caller, GatewayDep, require, seen_as_agent
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import (
    AgentToolOut,
    BuiltinTemplatesOut,
    QuarantineOut,
    ToolHealthOut,
    ToolOut,
    ToolSourcesOut,
    ToolVersionOut,
)
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.tool_bodies import (
    ToolChanges,
    ToolCreate,
    build_definition,
    with_builtin_template,
)
from toolkeeper.builtins import BUILTINS, definition
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role, ToolStatus
from toolkeeper.model.reasons import Reason
from toolkeeper.model.tool import ImplementationType, ToolDefinition
from toolkeeper.services.discovery import EnabledTool, enabled_by_id, enabled_tool
from toolkeeper.services.tool_sources import tool_sources
from toolkeeper.services.tool_views import (
    agent_tool_out,
    policy_template,
    quarantine_out,
    tool_out,
)
from toolkeeper.store.registry import ToolRow

router = RouteTable(tags=["tools"])
_READERS = (Role.OPERATOR, Role.APPROVER, Role.AGENT)
_PEOPLE = (Role.OPERATOR, Role.APPROVER)


def _enabled(gw: Gateway, caller: Principal, agent: str) -> dict[str, EnabledTool]:
    """The tools ``agent`` may call, by registry id."""
    return enabled_by_id(gw.catalog, gw.runtime.health, caller.tenant_id, agent,
                         caller.scopes if caller.agent == agent else None)


def _out(row: ToolRow) -> dict[str, Any]:
    return tool_out(row.definition, row.id, created_at=row.created_at,
                    updated_at=row.updated_at)


def _reread(gw: Gateway, tool_id: str) -> dict[str, Any]:
    row = gw.store.registry.tool_by_id(tool_id)
    assert row is not None  # written a moment ago by this request
    return _out(row)


@router.api_route("/tools/execute", methods=["GET", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
@router.api_route("/tools/execute-batch", methods=["GET", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
@router.api_route("/tools/check", methods=["GET", "PUT", "PATCH", "DELETE"],
                  include_in_schema=False)
async def execute_wrong_method() -> None:
    """Not a tool named ``execute``: the execution endpoints take POST only."""
    raise ApiError(405, Reason.METHOD_NOT_ALLOWED, "use POST to execute",
                   headers={"Allow": "POST"})


@router.get("/tools/health", response_model=list[ToolHealthOut],
            responses=ERRORS, summary="Health of every visible tool")
async def tools_health(gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    require(caller, *_READERS)
    catalog, board, tenant = gw.catalog, gw.runtime.health, caller.tenant_id
    agent = seen_as_agent(caller)
    tools = catalog.visible(tenant) if agent is None else [
        e.definition for e in _enabled(gw, caller, agent).values()]
    out = []
    for tool in tools:
        h = board.get(f"{tenant}:{tool.name}")
        rec = catalog.record(tenant, tool.name)
        out.append({"id": rec[0] if rec else None, "name": tool.name,
                    "health": h.status.value, "consecutive_errors": h.consecutive_errors,
                    "last_error": h.last_error, "last_success_at": h.last_success_at})
    return out


@router.get("/tools/builtins/templates", response_model=BuiltinTemplatesOut,
            responses=ERRORS,
            summary="The shipped built-ins: installed as global tools, or available")
async def builtin_templates(gw: GatewayDep, caller: Caller) -> dict[str, list[dict[str, Any]]]:
    require(caller, *_PEOPLE)
    rows = await anyio.to_thread.run_sync(gw.store.registry.tool_rows, caller.tenant_id)
    installed = {r.definition.builtin_key: r for r in rows
                 if r.definition.tenant_id is None and r.definition.builtin_key}
    out: dict[str, list[dict[str, Any]]] = {"installed": [], "available": []}
    for key in sorted(BUILTINS):
        row = installed.get(key)
        policy = policy_template(BUILTINS[key].policy_model)
        if row is not None:
            out["installed"].append({**_out(row), "installed": True, **policy})
        else:
            out["available"].append({**tool_out(definition(key), None), "installed": False,
                                     **policy})
    return out


@router.get("/tools/sources", response_model=ToolSourcesOut, responses=ERRORS,
            summary="What a new tool can be wired to: functions, servers, artifacts, "
                    "pipelines, agents")
async def sources(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    tenant = caller.tenant_id

    def read() -> dict[str, Any]:
        catalog = gw.catalog
        return tool_sources(
            functions=gw.factory.functions, servers=catalog.mcp_servers,
            tools=catalog.visible(tenant), artifacts=gw.factory.artifacts,
            pipelines=gw.registry.retrieval_pipelines(tenant),
            agents=[name for (t, name) in catalog.agents if t == tenant])
    return await anyio.to_thread.run_sync(read)


ToolType = Literal["built_in", "mcp", "artifact", "custom"]


@router.get("/tools", response_model=list[ToolOut | AgentToolOut],
            responses=ERRORS, summary="The tenant's tools and the global ones")
async def list_tools(gw: GatewayDep, caller: Caller, status: ToolStatus | None = None,
                     implementation_type: ImplementationType | None = None,
                     tool_type: ToolType | None = None, skip: int = Query(0, ge=0, le=2**63 - 1),
                     limit: int = Query(100, ge=1, le=500)) -> list[dict[str, Any]]:
    require(caller, *_READERS)

    def wanted(tool: ToolDefinition) -> bool:
        return (status is None or tool.status is status) and (
            implementation_type is None or tool.implementation_type == implementation_type
        ) and (tool_type is None or tool.tool_type == tool_type)

    agent = seen_as_agent(caller)
    if agent is not None:
        enabled = _enabled(gw, caller, agent)
        return [agent_tool_out(e.definition, tool_id, e.actions)
                for tool_id, e in enabled.items() if wanted(e.definition)][skip:skip + limit]
    rows = await anyio.to_thread.run_sync(gw.store.registry.tool_rows, caller.tenant_id)
    return [_out(r) for r in rows if wanted(r.definition)][skip:skip + limit]


@router.post("/tools", status_code=201, response_model=ToolOut,
             responses=ERRORS, summary="Create a draft tool")
async def create_tool(body: ToolCreate, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)
    if body.scope != "tenant":
        raise ApiError(422, Reason.INVALID_ARGUMENTS, "only tenant tools are created here; "
                       "global tools come from configuration")
    tool = build_definition(with_builtin_template({**body.fields(),
                                                   "tenant_id": caller.tenant_id}))

    def create() -> dict[str, Any]:
        created = gw.registry.create(tool)
        rec = gw.store.registry.tool(created.name, caller.tenant_id)
        assert rec is not None
        return _reread(gw, rec[0])

    return await anyio.to_thread.run_sync(create)


@router.get("/tools/{tool_id}", response_model=ToolOut | AgentToolOut,
            responses=ERRORS, summary="One tool (working copy)")
async def get_tool(tool_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, *_READERS)
    agent = seen_as_agent(caller)
    if agent is not None:
        item = enabled_tool(gw.catalog, gw.runtime.health, caller.tenant_id, agent, tool_id,
                            caller.scopes)
        return agent_tool_out(item.definition, tool_id, item.actions)
    row = await anyio.to_thread.run_sync(gw.registry.visible_row, caller.tenant_id, tool_id)
    return _out(row)


@router.put("/tools/{tool_id}", response_model=ToolOut, responses=ERRORS,
            summary="Update the working copy (published snapshots never change)")
async def update_tool(tool_id: str, body: ToolChanges, gw: GatewayDep,
                      caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)

    def update() -> dict[str, Any]:
        current = gw.registry.own_row(caller.tenant_id, tool_id).definition
        data = {**current.model_dump(), **body.fields()}
        gw.registry.update(build_definition(data))
        return _reread(gw, tool_id)

    return await anyio.to_thread.run_sync(update)


@router.post("/tools/{tool_id}/publish", response_model=ToolOut, responses=ERRORS,
             summary="Publish the working copy as an immutable version snapshot")
async def publish_tool(tool_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.ADMIN)

    def publish() -> dict[str, Any]:
        tool = gw.registry.own_row(caller.tenant_id, tool_id).definition
        gw.registry.publish(tool.name, tool.tenant_id)
        return _reread(gw, tool_id)

    return await anyio.to_thread.run_sync(publish)


@router.post("/tools/{tool_id}/version", response_model=ToolOut, responses=ERRORS,
             summary="Move to a greater semver version and snapshot it")
async def version_tool(tool_id: str, gw: GatewayDep, caller: Caller,
                       new_version: str = Query(min_length=1, max_length=64),
                       ) -> dict[str, Any]:
    require(caller, Role.ADMIN)

    def bump() -> dict[str, Any]:
        tool = gw.registry.own_row(caller.tenant_id, tool_id).definition
        gw.registry.new_version(tool.name, new_version, tool.tenant_id)
        return _reread(gw, tool_id)

    return await anyio.to_thread.run_sync(bump)


@router.get("/tools/{tool_id}/versions", response_model=list[ToolVersionOut],
            responses=ERRORS,
            summary="The published snapshots, oldest first")
async def tool_versions(tool_id: str, gw: GatewayDep, caller: Caller) -> list[dict[str, Any]]:
    require(caller, *_READERS)
    agent = seen_as_agent(caller)
    if agent is not None:
        enabled_tool(gw.catalog, gw.runtime.health, caller.tenant_id, agent, tool_id,
                            caller.scopes)
    show = tool_out if agent is None else agent_tool_out

    def versions() -> list[tuple[ToolDefinition, Any]]:
        gw.registry.visible_row(caller.tenant_id, tool_id)
        return gw.store.registry.version_rows(tool_id)

    snapshots = await anyio.to_thread.run_sync(versions)
    return [{"version": snap.version, "snapshot_at": at.isoformat(),
             "definition_hash": snap.definition_hash, "tool": show(snap, tool_id)}
            for snap, at in snapshots]


@router.get("/tools/{tool_id}/quarantine", response_model=QuarantineOut, responses=ERRORS,
            summary="A quarantined tool: the pinned and the new definition, and their diff")
async def tool_quarantine(tool_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    """For people reviewing a drifted upstream MCP tool (or a changed artifact) before an
    admin re-publishes it with ``POST /tools/{id}/publish``; 409 ``not_quarantined`` for
    a tool in any other state."""
    require(caller, *_PEOPLE)

    def review() -> dict[str, Any]:
        row = gw.registry.visible_row(caller.tenant_id, tool_id)
        tool = row.definition
        if tool.status is not ToolStatus.QUARANTINED:
            raise ApiError(409, Reason.NOT_QUARANTINED, f"{tool.name} is {tool.status.value}, "
                           "not quarantined: there is no new definition to review")
        snapshots = gw.store.registry.version_rows(tool_id)
        pinned = snapshots[-1][0] if snapshots else None
        return quarantine_out(pinned, tool, tool_id)

    return await anyio.to_thread.run_sync(review)
