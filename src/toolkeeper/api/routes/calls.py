"""Recorded calls: look-up, listing, manual resolution of unknown outcomes (SPEC §4)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio
from fastapi import Query

from toolkeeper.api.auth import Caller, GatewayDep, require
from toolkeeper.api.errors import ApiError
from toolkeeper.api.responses import OutcomeOut, RecentCallOut
from toolkeeper.api.route_table import RouteTable
from toolkeeper.api.routes.execute import ERRORS
from toolkeeper.api.schemas import ResolveBody
from toolkeeper.api.story_responses import CallStoryOut
from toolkeeper.model.call import Principal
from toolkeeper.model.enums import Role
from toolkeeper.model.reasons import Reason
from toolkeeper.services.story import CallStory
from toolkeeper.store.records import OutcomeRecord

router = RouteTable(tags=["calls"])


def outcome_out(rec: OutcomeRecord) -> dict[str, Any]:
    return {"call_id": rec.call_id, "tenant_id": rec.tenant_id, "agent": rec.agent,
            "tool": rec.tool, "action": rec.action, "tool_version": rec.tool_version,
            "state": rec.state.value, "status": rec.status, "reason": rec.reason,
            "idempotency_key": rec.key, "args_digest": rec.args_digest,
            "side_effect": rec.side_effect, "turn_group_id": rec.turn_group_id,
            "result": rec.result, "resolved_by": rec.resolved_by,
            "created_at": rec.created_at.isoformat(), "updated_at": rec.updated_at.isoformat(),
            "expires_at": rec.expires_at.isoformat()}


def _visible(caller: Principal, rec: OutcomeRecord) -> bool:
    return caller.has_role(Role.OPERATOR, Role.APPROVER) or caller.agent == rec.agent


@router.get("/calls/recent", response_model=list[RecentCallOut], responses=ERRORS,
            summary="The last calls, whatever became of them, newest first")
async def recent_calls(gw: GatewayDep, caller: Caller, status: str | None = None,
                       agent: str | None = None, tool: str | None = None,
                       before: int | None = Query(None, ge=1, le=2**63 - 1),
                       limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
    """Denied, gated, pure and recorded calls alike (the last ``recent_calls_max`` per
    tenant); never their arguments or outputs. An agent sees only its own calls."""
    status, agent, tool = status or None, agent or None, tool or None  # "" filters nothing
    if not caller.has_role(Role.OPERATOR, Role.APPROVER):
        agent = caller.agent or ""  # a caller that is no agent has no calls of its own
    log = gw.recent_calls

    def read() -> list[dict[str, Any]]:
        log.flush()  # what this process has queued so far is listed too
        rows = log.repo.list(caller.tenant_id, status=status, agent=agent, tool=tool,
                             before=before, limit=limit)
        return [{**asdict(r), "ts": r.ts.isoformat()} for r in rows]

    return await anyio.to_thread.run_sync(read)


@router.get("/calls/{call_id}", response_model=OutcomeOut,
            responses=ERRORS, summary="One recorded call")
async def get_call(call_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    rec = await anyio.to_thread.run_sync(gw.calls.get, call_id, caller.tenant_id)
    if not _visible(caller, rec):
        raise ApiError(404, Reason.NOT_FOUND, f"no recorded call {call_id!r}")
    return outcome_out(rec)


@router.get("/calls/{call_id}/story", response_model=CallStoryOut, responses=ERRORS,
            summary="A call's whole story: steps, gate, approvals, outcome, side effects")
async def call_story(call_id: str, gw: GatewayDep, caller: Caller) -> dict[str, Any]:
    """Every audit event of the call as a step (its offset from the first, a sentence for a
    person), the gate it met and why, the approvals it asked for or ran with (who asked,
    who decided and when, the edits, the preview; arguments as ``/approvals`` shows them),
    its outcome, side effects and their compensation, and the calls related to it (the
    re-submission of an approved call, a compensation), both ways. A call known only from
    the audit (denied, or waiting for a decision) has a story too. At ``audit_level:
    steps`` every pipeline step is there, else only the decisions. At most
    500 events are read (``truncated`` says when there were more). Operators and
    approvers read their tenant's calls, an agent its own; any other call is
    ``not_found``."""
    agent = None if caller.has_role(Role.OPERATOR, Role.APPROVER) else caller.agent or ""

    def read() -> dict[str, Any]:
        gw.flush()  # the events this process has queued are part of the story
        return CallStory(gw.store).story(caller.tenant_id, call_id, agent=agent,
                                         audit_level=gw.settings.audit_level)

    return await anyio.to_thread.run_sync(read)


@router.get("/calls", response_model=list[OutcomeOut],
            responses=ERRORS, summary="Recorded calls, newest first")
async def list_calls(gw: GatewayDep, caller: Caller, status: str | None = None,
                     limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
    recs = await anyio.to_thread.run_sync(
        lambda: gw.calls.list(caller.tenant_id, status=status, limit=limit))
    return [outcome_out(r) for r in recs if _visible(caller, r)]


@router.post("/calls/{call_id}/resolve", response_model=OutcomeOut, responses=ERRORS,
             summary="Record the real outcome of an unknown call")
async def resolve_call(call_id: str, body: ResolveBody, gw: GatewayDep,
                       caller: Caller) -> dict[str, Any]:
    require(caller, Role.OPERATOR, Role.APPROVER)
    rec = await anyio.to_thread.run_sync(lambda: gw.calls.resolve(
        call_id, caller, status=body.status, output=body.output, note=body.note))
    return outcome_out(rec)
