"""Step 7: gate = matrix[autonomy][risk], raised by ``requires_confirmation`` and
activation overrides; ``deny`` stops; ``confirm``/``approve`` need a matching approval;
``preview`` needs a matching preview token (or escalates to ``confirm``)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from toolkeeper.model.call import CallResult
from toolkeeper.model.enums import ApprovalStatus, CallStatus, Gate, Risk
from toolkeeper.model.events import EventType
from toolkeeper.model.gates import stricter
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.approval_binding import approval_problem, find_open_approval
from toolkeeper.pipeline.idempotency import recorded_repeat
from toolkeeper.pipeline.risk import adjusted, adjuster_context
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState
from toolkeeper.store.records import ApprovalRecord

if TYPE_CHECKING:
    from toolkeeper.pipeline.catalog import CompiledTool
    from toolkeeper.pipeline.profiles import CompiledProfile

_NEEDS = {Gate.CONFIRM: (CallStatus.CONFIRMATION_REQUIRED, Reason.CONFIRMATION_REQUIRED),
          Gate.APPROVE: (CallStatus.APPROVAL_REQUIRED, Reason.APPROVAL_REQUIRED)}
_ALLOW = Gate.ALLOW
"""Read once (see ``supersede._IRREVERSIBLE``): every call asks."""


def gate_for(profile: CompiledProfile, tool: CompiledTool, action: str, risk: Risk) -> Gate:
    """The gate of ``tool.action`` at ``risk`` for ``profile``, before approvals are looked
    at. One rule for the gate step and for every listing (with the action's static risk:
    adjusters only raise it, so a ``deny`` there is a ``deny`` for every call)."""
    definition = tool.definition
    gate = profile.matrix.gate(risk, profile.profile.autonomy)
    act = profile.activations.get(definition.name)
    confirm = definition.requires_confirmation
    if act is not None and act.requires_confirmation is not None:
        confirm = confirm or act.requires_confirmation  # overrides may only tighten
    if confirm and gate in (Gate.ALLOW, Gate.PREVIEW):
        gate = Gate.CONFIRM
    if act is not None and action in act.gates:
        gate = stricter(gate, act.gates[action])
    if gate is Gate.PREVIEW and not tool.provider.supports_preview(action):
        gate = Gate.CONFIRM
    return gate


def static_gate(profile: CompiledProfile, tool: CompiledTool, action: str, *,
                agent: str | None = None, tenant: str | None = None) -> Gate:
    """The gate of ``tool.action`` at the action's own risk raised by the adjusters that
    read no argument (side effect, tool, action, autonomy; agent and tenant when given):
    what listings judge by. Adjusters only raise risk, so a ``deny`` here is a ``deny``
    for every call; one that only argument-dependent adjusters reach is not predicted."""
    definition = tool.definition
    level = definition.action_risk(action)
    if profile.adjusters:
        who = {k: v for k, v in (("agent", agent), ("tenant", tenant)) if v is not None}
        ctx = adjuster_context(definition.name, action,
                               definition.action_side_effect(action).value,
                               int(profile.profile.autonomy), **who)
        level = adjusted(level, profile.adjusters, definition.name, action, None, ctx)
    return gate_for(profile, tool, action, level)


def _autonomy(st: CallState) -> int | None:
    """The calling agent's autonomy, audited with the gate it met (the call's story says
    why: "risk high at autonomy 0")."""
    return int(st.profile.profile.autonomy) if st.profile is not None else None


def decide_gate(st: CallState) -> Gate:
    """The gate for this call, before approvals are looked at."""
    assert st.profile is not None and st.tool is not None and st.risk is not None
    key = ("gate", st.tool, st.action, st.risk)
    memo = st.profile.memo  # every input of gate_for is part of the profile's snapshot
    found: Gate | None = memo.get(key)
    if found is None:
        found = memo[key] = gate_for(st.profile, st.tool, st.action or "", st.risk)
    return found


def gate_allows(rt: Runtime, st: CallState) -> bool:
    """Whether the gate lets the call go on at once (``allow``): the step then has nothing
    to await. Otherwise :func:`gate` decides what stops the call."""
    assert st.profile is not None
    g = st.profile.memo.get(("gate", st.tool, st.action, st.risk))  # decide_gate's, inline
    st.gate = g = decide_gate(st) if g is None else g
    if g is not _ALLOW:
        return False
    if rt.settings.audit_level == "steps":
        st.emit(EventType.GATE_ALLOWED, autonomy=_autonomy(st))
    return True


async def gate(rt: Runtime, st: CallState) -> CallResult | None:
    if gate_allows(rt, st):
        return None
    g = st.gate
    assert g is not None
    repeat = recorded_repeat(rt, st)
    if repeat is not None:
        return repeat
    if g is Gate.DENY:
        return st.stop(EventType.POLICY_DENIED, Reason.GATE_DENIED,
                       f"risk {st.risk} at autonomy {int(st.profile.profile.autonomy)} "  # type: ignore[union-attr]
                       "is denied")
    if g is Gate.PREVIEW:
        return await _preview_gate(rt, st)
    return await _approval_gate(rt, st, g)


async def _approval_gate(rt: Runtime, st: CallState, g: Gate) -> CallResult | None:
    req = st.request
    if req.approval_id is not None or req.preview_token is not None:
        ident = req.approval_id or req.preview_token
        rec = rt.store.approvals.get(str(ident))
        problem = approval_problem(rt, st, rec, g)
        if problem is not None:
            status, reason, msg = problem
            return st.stop(EventType.POLICY_DENIED, reason, msg, status=status,
                           approval_id=rec.id if rec and reason is Reason.APPROVAL_PENDING
                           else None)
        st.approval = rec
        st.emit(EventType.GATE_ALLOWED, approval_id=rec.id)  # type: ignore[union-attr]
        return None
    existing = find_open_approval(rt, st, g)
    if existing is not None and existing.status is ApprovalStatus.APPROVED:
        st.approval = existing
        st.emit(EventType.GATE_ALLOWED, approval_id=existing.id)
        return None
    status, reason = _NEEDS[g]
    if existing is not None:  # the same call is already waiting: never create a second one
        return st.stop(EventType.GATE_REQUIRED, reason,
                       f"{g.value} pending: approval {existing.id}", status=status,
                       approval_id=existing.id)
    cap = rt.settings.max_pending_approvals
    if cap and rt.store.approvals.pending_of_agent(
            st.tenant_id or "", st.agent or "", datetime.now(UTC)) >= cap:
        return st.stop(EventType.LIMIT_DENIED, Reason.APPROVALS_PENDING_LIMIT,
                       f"{cap} approvals of this agent are already waiting for a human: "
                       "decide or let some expire first")
    from toolkeeper.pipeline.execute import preview_for_approver

    shown = await preview_for_approver(rt, st)  # what the approver sees of the effect
    rec = _new_approval(rt, st, g.value, preview=shown.data if shown else None,
                        summary=shown.summary if shown else None)
    st.emit(EventType.GATE_REQUIRED, reason=reason.value, approval_id=rec.id,
            autonomy=_autonomy(st))
    st.emit(EventType.APPROVAL_CREATED, approval_id=rec.id, kind=rec.kind)
    rt.store.approvals.create(rec, st.take_drafts())
    rt.listeners.approval(rec)
    return st.result(status, reason, message=f"{g.value} required: approval {rec.id}",
                     approval_id=rec.id)


async def _preview_gate(rt: Runtime, st: CallState) -> CallResult | None:
    assert st.tool is not None and st.action is not None
    token = st.request.preview_token
    if token is not None:
        rec = rt.store.approvals.get(str(token))
        problem = approval_problem(rt, st, rec, Gate.PREVIEW)
        if problem is None:
            st.approval = rec
            st.emit(EventType.GATE_ALLOWED, preview_token=str(token))
            return None
        status, reason, msg = problem
        return st.stop(EventType.POLICY_DENIED, Reason.PREVIEW_INVALID, msg, status=status,
                       details={"cause": str(reason)})
    from toolkeeper.pipeline.execute import run_preview

    preview = await run_preview(rt, st)
    if isinstance(preview, CallResult):
        return preview
    if preview is None:  # the provider declined after all: escalate to confirm
        st.gate = Gate.CONFIRM
        return await _approval_gate(rt, st, Gate.CONFIRM)
    rec = _new_approval(rt, st, "preview", preview=preview.data, summary=preview.summary,
                        status=ApprovalStatus.APPROVED, ident="pv_" + secrets.token_urlsafe(24))
    st.emit(EventType.GATE_REQUIRED, reason=Reason.PREVIEW_REQUIRED.value,
            autonomy=_autonomy(st))
    st.emit(EventType.PREVIEW_CREATED, summary=preview.summary)
    rt.store.approvals.create(rec, st.take_drafts())
    # the summary was made safe by run_preview, with the secrets the preview resolved too
    return st.result_as_is(CallStatus.PREVIEW_REQUIRED, Reason.PREVIEW_REQUIRED,
                           preview.summary, preview={"summary": preview.summary,
                                                     "data": preview.data},
                           preview_token=rec.id)


def _new_approval(rt: Runtime, st: CallState, kind: str, *, preview: object = None,
                  summary: str | None = None, status: ApprovalStatus = ApprovalStatus.PENDING,
                  ident: str | None = None) -> ApprovalRecord:
    assert st.tool is not None and st.profile is not None
    now = datetime.now(UTC)
    tool = st.tool.definition
    return ApprovalRecord(
        id=ident or "ap_" + secrets.token_urlsafe(16), tenant_id=st.tenant_id or "",
        agent=st.agent or "", kind=kind, tool=tool.name, action=st.action or "",
        tool_version=tool.version, args_digest=st.args_digest or "",
        arguments=rt.redactor.redact(st.arguments), risk=str(st.risk), gate=str(st.gate),
        policy_version=st.profile.version, status=status, created_at=now,
        expires_at=now + rt.settings.approval_ttl, call_id=st.call_id, preview=preview,
        summary=summary or tool.confirmation_prompt or f"{tool.name}.{st.action}",
    )
