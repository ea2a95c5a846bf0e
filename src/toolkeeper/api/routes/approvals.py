"""Approvals: the approver's inbox and decisions; confirmations by the caller (SPEC §3);
a bounded long-poll for a decision (``/approvals/{id}/wait``)."""

from __future__ import annotations

import math
from typing import Any

import anyio
from fastapi import Query, Request

from toolkeeper.api.auth import Caller, GatewayDep
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import ApprovalOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import ApproveBody, DenyBody
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import ApprovalStatus, Role
from toolkeeper.model.reasons import Reason
from toolkeeper.services.approvals import approval_json
from toolkeeper.store.records import ApprovalRecord

router = RouteTable(tags=["approvals"])

MAX_WAIT_S = 30.0
"""The longest one ``/wait`` request holds its connection (clients loop for longer)."""
POLL_S = 0.5
"""How often a waiter re-reads the store: a decision made by another replica, the CLI or
the UI is seen within this long (one made through these routes wakes it at once)."""


class DecisionSignals:
    """Wakes the waiters of an approval when a route of this process decides it. One per
    app (``app.state``), so nothing is shared between apps or held at module level."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[anyio.Event, int]] = {}

    async def wait(self, approval_id: str, timeout: float) -> None:
        """Return when ``approval_id`` is decided here or after ``timeout`` seconds."""
        event, count = self._waiting.get(approval_id, (anyio.Event(), 0))
        self._waiting[approval_id] = (event, count + 1)
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            current = self._waiting.get(approval_id)
            if current is not None and current[0] is event:
                if current[1] <= 1:
                    del self._waiting[approval_id]
                else:
                    self._waiting[approval_id] = (event, current[1] - 1)

    def decided(self, approval_id: str) -> None:
        found = self._waiting.pop(approval_id, None)
        if found is not None:
            found[0].set()


def _signals(request: Request) -> DecisionSignals:
    signals: DecisionSignals | None = getattr(request.app.state, "approval_signals", None)
    if signals is None:
        signals = request.app.state.approval_signals = DecisionSignals()
    return signals


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
async def approve(approval_id: str, request: Request, gw: GatewayDep, caller: Caller,
                  body: ApproveBody | None = None) -> dict[str, Any]:
    body = body or ApproveBody()
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.approve(
        approval_id, caller, edited_arguments=body.arguments, note=body.note))
    _signals(request).decided(rec.id)
    return approval_json(rec)


@router.post("/approvals/{approval_id}/deny", response_model=ApprovalOut,
             responses=ERRORS, summary="Deny")
async def deny(approval_id: str, request: Request, gw: GatewayDep, caller: Caller,
               body: DenyBody | None = None) -> dict[str, Any]:
    note = body.note if body else None
    rec = await anyio.to_thread.run_sync(lambda: gw.approvals.deny(approval_id, caller,
                                                                   note=note))
    _signals(request).decided(rec.id)
    return approval_json(rec)


@router.post("/approvals/{approval_id}/confirm", response_model=ApprovalOut,
             responses=ERRORS,
             summary="Confirm a confirm gate (the requesting agent's own token may)")
async def confirm(approval_id: str, request: Request, gw: GatewayDep,
                  caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.approvals.confirm, approval_id, caller)
    _signals(request).decided(rec.id)
    return approval_json(rec)


def _settled(rec: ApprovalRecord) -> bool:
    """Decided, or past its expiry (the service reads it as ``expired`` then)."""
    return rec.status is not ApprovalStatus.PENDING


@router.get("/approvals/{approval_id}/wait", response_model=ApprovalOut, responses=ERRORS,
            summary="Wait (bounded) for a decision on an approval")
async def wait_for_decision(approval_id: str, request: Request, gw: GatewayDep,
                            caller: Caller,
                            timeout_s: float = Query(10.0, ge=0, le=MAX_WAIT_S),
                            ) -> dict[str, Any]:
    """The approval once it is decided (or expired), else after ``timeout_s`` seconds (at
    most 30) its current, still pending state, with 200 either way: call again to wait
    longer. Readable by whoever may read the approval."""
    deadline = anyio.current_time() + (timeout_s if math.isfinite(timeout_s) else 0.0)
    signals = _signals(request)
    while True:
        rec = await anyio.to_thread.run_sync(gw.approvals.get, approval_id, caller.tenant_id)
        if not _visible(caller, rec):
            raise ApiError(404, Reason.NOT_FOUND, f"no approval {approval_id!r}")
        left = deadline - anyio.current_time()
        if _settled(rec) or left <= 0:
            return approval_json(rec)
        await signals.wait(rec.id, min(POLL_S, left))
