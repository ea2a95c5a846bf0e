"""The tool dependency graph over REST (issue 31; seed 003 ``ToolGraph``).

``GET /graph`` draws the caller's tenant (its tools and the global ones, its profiles and
agents) as JSON with the graph's findings, or as DOT, GraphML or Cypher text; ``around``
keeps the neighbourhood of one node (a tool, an agent…). ``GET /tools/{id}/impact`` and
``GET /credentials/{connector}/{key}/impact`` say who loses what before a change — the
console shows that list in its confirmation dialog. People of the tenant read these (an
agent token gets 403); no credential value or tool config is in them, only names.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from fastapi import Query
from fastapi.responses import PlainTextResponse

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.graph_responses import CredentialImpactOut, GraphOut, ToolImpactOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.access import ConnectorName, KeyName
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.errors import OperationRefused
from toolkeeper.gateway import Gateway
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.services.graph import Graph, build_graph, findings, node_id
from toolkeeper.services.graph_export import render, to_json
from toolkeeper.services.graph_impact import credential_impact, tool_impact

router = RouteTable(tags=["graph"])
_PEOPLE = (Role.OPERATOR, Role.APPROVER)
_MEDIA = {"dot": "text/vnd.graphviz", "graphml": "application/graphml+xml",
          "cypher": "text/plain"}


def _graph(gw: Gateway, caller: Principal) -> tuple[Graph, set[str] | None]:
    """The tenant's graph, and its credential names when the caller may list them."""
    tenant = caller.tenant_id
    tools = [d for _, d in gw.store.registry.tools(tenant)]
    g = build_graph(tools, gw.identities.list_profiles(caller, tenant),
                    gw.identities.list_agents(caller, tenant))
    known = None
    if caller.has_role(Role.ADMIN):
        try:
            known = {f"{c}/{k}" for c, k in gw.identities.list_credentials(caller, tenant)}
        except OperationRefused:  # not the embedded store: names cannot be listed here
            known = None
    return g, known


_TEXT: dict[int | str, dict[str, Any]] = {
    200: {"content": {m: {"schema": {"type": "string"}} for m in _MEDIA.values()}}}


@router.get("/graph", responses={**ERRORS, **_TEXT}, response_model=GraphOut,
            summary="The tenant's tool dependency graph (JSON, DOT, GraphML or Cypher)")
async def get_graph(gw: GatewayDep, caller: Caller,
                    format: Literal["json", "dot", "graphml", "cypher"] = "json",
                    around: str | None = Query(None, max_length=600),
                    depth: int = Query(2, ge=1, le=6)) -> Any:
    require(caller, *_PEOPLE)
    g, known = await anyio.to_thread.run_sync(_graph, gw, caller)
    found = findings(g, known)
    if around is not None:
        if around not in g.nodes:
            raise ApiError(404, Reason.NOT_FOUND, f"no node {around!r} in the graph")
        g = g.around(around, depth)
    if format != "json":
        return PlainTextResponse(render(g, format), media_type=_MEDIA[format])
    return {**to_json(g), "findings": [{"code": f.code, "message": f.message,
                                        "node": f.node} for f in found]}


@router.get("/tools/{tool_id}/impact", responses=ERRORS, response_model=ToolImpactOut,
            summary="Who loses which actions, and which compensations break, if the tool "
                    "is disabled, deprecated, re-published or quarantined")
async def get_tool_impact(tool_id: str, gw: GatewayDep, caller: Caller,
                          change: Literal["disable", "deprecate", "republish",
                                          "quarantine"] = "disable") -> dict[str, Any]:
    require(caller, *_PEOPLE)

    def impact() -> dict[str, Any]:
        row = gw.registry.visible_row(caller.tenant_id, tool_id)
        g, _ = _graph(gw, caller)
        d = row.definition
        return tool_impact(g, node_id("tool", d.tenant_id or "*", d.name), change)

    return await anyio.to_thread.run_sync(impact)


@router.get("/credentials/{connector}/{key}/impact", responses=ERRORS,
            response_model=CredentialImpactOut,
            summary="What revoking a credential of the tenant breaks")
async def get_credential_impact(connector: ConnectorName, key: KeyName, gw: GatewayDep,
                                caller: Caller) -> dict[str, Any]:
    require(caller, *_PEOPLE)
    g, _ = await anyio.to_thread.run_sync(_graph, gw, caller)
    nid = node_id("credential", caller.tenant_id, f"{connector}/{key}")
    if nid not in g.nodes:  # nothing references it: revoking breaks nothing
        return {"change": "revoke", "credential": f"{connector}/{key}",
                "tenant": caller.tenant_id, "tools": [], "agent_endpoints": []}
    return credential_impact(g, nid)
