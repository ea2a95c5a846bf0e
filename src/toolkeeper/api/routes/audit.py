"""The audit trail: filtered, cursor-paginated reads and chain verification."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio
from fastapi import Query, Request
from fastapi.responses import JSONResponse

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import AuditExportOut, AuditPage, VerifyOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.access import system_tenant
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason

router = RouteTable(tags=["audit"])


@router.get("/audit", response_model=AuditPage,
            responses=ERRORS, summary="Audit events, oldest first, by cursor")
async def list_audit(gw: GatewayDep, caller: Caller, call_id: str | None = None,
                     agent: str | None = None, tool: str | None = None,
                     type: list[str] | None = Query(None),
                     since: datetime | None = None, until: datetime | None = None,
                     cursor: int = Query(0, ge=0, le=2**63 - 1),
                     limit: int = Query(100, ge=1, le=1000),
                     ) -> dict[str, Any]:
    require(caller, Role.OPERATOR, Role.APPROVER)
    # stopped and pure calls queue their events: write them first (read your writes)
    await anyio.to_thread.run_sync(gw.flush)
    events = await anyio.to_thread.run_sync(lambda: gw.store.audit.list(
        caller.tenant_id, call_id=call_id, agent=agent, tool=tool, types=type, since=since,
        until=until, after_seq=cursor, limit=limit))
    next_cursor = events[-1].seq if len(events) == limit else None
    return {"events": [e.to_dict() for e in events], "next_cursor": next_cursor}


@router.get("/audit/verify", response_model=VerifyOut,
            responses=ERRORS, summary="Recompute this tenant's hash chain")
async def verify_audit(gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    require(caller, Role.OPERATOR, Role.APPROVER)
    await anyio.to_thread.run_sync(gw.flush)
    report = await anyio.to_thread.run_sync(gw.store.audit.verify, caller.tenant_id)
    return {"tenant_id": report.tenant_id, "ok": report.ok, "events": report.events,
            "problems": report.problems, "warnings": report.warnings,
            "first_seq": report.first_seq}


@router.get("/audit/export", response_model=AuditExportOut, summary="The audit sinks' state",
            responses={**ERRORS, 503: {"model": AuditExportOut,
                                       "description": "A sink is past max_backlog"}})
async def audit_export(request: Request, caller: Caller) -> Any:
    """Operators of the system tenant: each sink's backlog (events stored and not yet
    accepted, over every tenant), its failures and last error; 503 while a sink is past
    ``max_backlog``, so a health check can page on it (docs/guides/audit-export.md)."""
    require(caller, Role.OPERATOR)
    if caller.tenant_id != system_tenant(request):
        raise ApiError(403, Reason.FORBIDDEN, "the audit export is the system tenant's")
    exporter = getattr(request.app.state, "audit_export", None)
    if exporter is None:
        return {"status": "off", "sinks": []}
    body = {"status": "alarm" if exporter.alarm else "ok", "sinks": exporter.status()}
    return JSONResponse(body, status_code=503) if exporter.alarm else body
