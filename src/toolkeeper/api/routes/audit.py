"""The audit trail: filtered, cursor-paginated reads and chain verification."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anyio
from fastapi import Query

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.responses import AuditPage, VerifyOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.model.enums import Role

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
