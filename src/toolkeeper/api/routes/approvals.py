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
from toolkeeper.services.approvals import approval_json
from toolkeeper.store.records import ApprovalRecord

router = APIRouter(tags=["approvals"])


def _visible(caller: Principal, rec: ApprovalRecord) -> bool:
    return caller.has_role(Role.APPROVER, Role.OPERATOR) or caller.agent == rec.agent


@router.get("/approvals", response_model=list[ApprovalOut],
            responses=ERRORS, summary="Approvals (pending by default)")
async def list_approvals(gw: GatewayDep, caller: Caller,
                         status: str | None = Query("pending"),
                         limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
    recs = await anyio.to_thread.run_sync(
        lambda: gw.approvals.list(caller.tenant_id, status=status, limit=limit))
    return [approval_json(r) for r in recs if _visible(caller, r)]


@router.get("/approvals/{approval_id}", response_model=ApprovalOut,
            responses=ERRORS, summary="One approval")
async def get_approval(approval_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.approvals.get, approval_id, caller.tenant_id)
    if not _visible(caller, rec):
        raise ApiError(404, Reason.NOT_FOUND, f"no approval {approval_id!r}")
    return approval_json(rec)


@router.post("/approvals/{approval_id}/approve", response_model=ApprovalOut,
             responses=ERRORS,
             summary="Approve (optionally with edited arguments)")
async def approve(approval_id: str, gw: GatewayDep, caller: Caller,
                  body: ApproveBody | None = None) -> dict[str, Any]:
    body = body or ApproveBody()
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.approve(
        approval_id, caller, edited_arguments=body.arguments, note=body.note))
    return approval_json(rec)


@router.post("/approvals/{approval_id}/deny", response_model=ApprovalOut,
             responses=ERRORS, summary="Deny")
async def deny(approval_id: str, gw: GatewayDep, caller: Caller,
               body: DenyBody | None = None) -> dict[str, Any]:
    note = body.note if body else None
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.deny(approval_id, caller,
                                                                   note=note))
    return approval_json(rec)


@router.post("/approvals/{approval_id}/confirm", response_model=ApprovalOut,
             responses=ERRORS,
             summary="Confirm a confirm gate (the requesting agent's own token may)")
async def confirm(approval_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.approvals.confirm, approval_id, caller)
    return approval_json(rec)
