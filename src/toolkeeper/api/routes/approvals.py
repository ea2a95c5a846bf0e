"""Approvals: the approver's inbox and decisions; confirmations by the caller (SPEC §3)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Query

from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import ApprovalOut
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import ApproveBody, DenyBody
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.store.records import ApprovalRecord

router = APIRouter(tags=["approvals"])


def approval_out(rec: ApprovalRecord) -> dict[str, Any]:
    return {"id": rec.id, "kind": rec.kind, "status": rec.status.value, "agent": rec.agent,
            "tool": rec.tool, "action": rec.action, "tool_version": rec.tool_version,
            "arguments": rec.arguments, "args_digest": rec.args_digest, "risk": rec.risk,
            "gate": rec.gate, "summary": rec.summary, "call_id": rec.call_id,
            "created_at": rec.created_at.isoformat(), "expires_at": rec.expires_at.isoformat(),
            "decided_by": rec.decided_by,
            "decided_at": rec.decided_at.isoformat() if rec.decided_at else None,
            "note": rec.note, "edited_arguments": rec.edited_arguments,
            "consumed_by": rec.consumed_by}


def _visible(caller: Principal, rec: ApprovalRecord) -> bool:
    return caller.has_role(Role.APPROVER, Role.OPERATOR) or caller.agent == rec.agent


@router.get("/approvals", response_model=list[ApprovalOut],
            responses=ERRORS, summary="Approvals (pending by default)")
async def list_approvals(gw: GatewayDep, caller: Caller,
                         status: str | None = Query("pending"),
                         limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
    recs = await anyio.to_thread.run_sync(
        lambda: gw.approvals.list(caller.tenant_id, status=status, limit=limit))
    return [approval_out(r) for r in recs if _visible(caller, r)]


@router.get("/approvals/{approval_id}", response_model=ApprovalOut,
            responses=ERRORS, summary="One approval")
async def get_approval(approval_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.approvals.get, approval_id, caller.tenant_id)
    if not _visible(caller, rec):
        raise ApiError(404, Reason.NOT_FOUND, f"no approval {approval_id!r}")
    return approval_out(rec)


@router.post("/approvals/{approval_id}/approve", response_model=ApprovalOut,
             responses=ERRORS,
             summary="Approve (optionally with edited arguments)")
async def approve(approval_id: str, gw: GatewayDep, caller: Caller,
                  body: ApproveBody | None = None) -> dict[str, Any]:
    body = body or ApproveBody()
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.approve(
        approval_id, caller, edited_arguments=body.arguments, note=body.note))
    return approval_out(rec)


@router.post("/approvals/{approval_id}/deny", response_model=ApprovalOut,
             responses=ERRORS, summary="Deny")
async def deny(approval_id: str, gw: GatewayDep, caller: Caller,
               body: DenyBody | None = None) -> dict[str, Any]:
    note = body.note if body else None
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.deny(approval_id, caller,
                                                                   note=note))
    return approval_out(rec)


@router.post("/approvals/{approval_id}/confirm", response_model=ApprovalOut,
             responses=ERRORS,
             summary="Confirm a confirm gate (the requesting agent's own token may)")
async def confirm(approval_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.approvals.confirm, approval_id, caller)
    return approval_out(rec)
