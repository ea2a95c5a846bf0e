"""Operations: the index, liveness, readiness, metrics, supersede, compensation."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import Request, Response
from sqlalchemy import text

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import IndexOut, StatusOut, SupersedeOut, TurnDecidedOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.access import system_tenant
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import ErrorOut, TurnDecisionBody
from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import Role
from toolkeeper.version import __version__

router = RouteTable(tags=["ops"])


@router.get("/", response_model=IndexOut, summary="What this server serves, and where")
async def index(request: Request) -> dict[str, Any]:
    """The start-up banner's first address: the console, the API's documents, MCP and the
    probes, so a person (or a script) who opens the server's root finds the rest."""
    state = request.app.state
    return {"name": "toolkeeper", "version": __version__,
            "console": "/ui/" if getattr(state, "ui", False) else None,
            "docs": "/docs", "openapi": "/openapi.json",
            "mcp": "/mcp" if getattr(state, "mcp", None) is not None else None,
            "health": "/healthz", "ready": "/readyz"}


@router.get("/healthz", response_model=StatusOut, summary="The process is alive")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", response_model=StatusOut, summary="The store answers",
            responses={503: {"model": ErrorOut, "description": "The store does not answer"}})
async def readyz(gw: GatewayDep) -> dict[str, str]:
    def ping() -> None:
        with gw.store.db.read() as conn:
            conn.execute(text("SELECT 1"))

    try:
        with anyio.fail_after(5):
            await anyio.to_thread.run_sync(ping)
    except Exception as exc:
        raise ApiError(503, "not_ready",
                       f"the store does not answer: {type(exc).__name__}") from exc
    return {"status": "ready"}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={**ERRORS, 200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                       "description": "Prometheus text exposition format"}})
async def metrics(request: Request, gw: GatewayDep, caller: Caller) -> Response:
    """Admins and operators only. A tenant's token sees the samples labelled with its own
    tenant; the system tenant's sees every sample (all tenants, and any unlabelled ones)."""
    require(caller, Role.OPERATOR)
    everything = caller.tenant_id == system_tenant(request)
    body = await anyio.to_thread.run_sync(
        gw.metrics.render, None if everything else caller.tenant_id)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.post("/turns/{turn_group_id}/supersede", response_model=SupersedeOut,
             responses=ERRORS,
             summary="Stop later irreversible calls of a turn group")
async def supersede(turn_group_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    # the agent's runtime supersedes its own turns (a regenerated answer); operators may too
    require(caller, Role.AGENT, Role.OPERATOR)
    changed = await anyio.to_thread.run_sync(gw.calls.supersede, caller.tenant_id,
                                             turn_group_id)
    return {"turn_group_id": turn_group_id, "superseded": True, "changed": changed}


@router.post("/turns/{turn_group_id}/decisions", response_model=TurnDecidedOut,
             responses=ERRORS,
             summary="Record a supersede decision taken before an irreversible call")
async def decide_turn(turn_group_id: str, body: TurnDecisionBody, gw: GatewayDep,
                      caller: Caller) -> dict[str, Any]:
    """The agent's runtime found new user messages pending before an irreversible call and
    decided (seed 004 §10): recorded as a ``turn.decided`` audit event; ``supersede``
    also supersedes the turn group, ``queue`` names the new one the calls go on in."""
    require(caller, Role.AGENT, Role.OPERATOR)
    return await anyio.to_thread.run_sync(lambda: gw.calls.decide_turn(
        caller.tenant_id, turn_group_id, body.decision, agent=caller.agent or caller.name,
        tool=body.tool, action=body.action, continued_as=body.continued_as,
        pending=body.pending, note=body.note))


@router.post("/side-effects/{side_effect_id}/compensate", response_model=CallResult,
             responses=ERRORS,
             summary="Run a side effect's compensation through the pipeline")
async def compensate(side_effect_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    res: CallResult = await anyio.to_thread.run_sync(
        lambda: gw.run_sync(gw.calls.compensate(side_effect_id, caller)))
    return res.to_dict(omit_empty=False)
