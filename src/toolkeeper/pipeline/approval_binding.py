"""Does an approval (or preview token) bind to exactly this call? (SPEC §3)"""

from __future__ import annotations

from datetime import UTC, datetime

from toolkeeper.model.enums import ApprovalStatus, CallStatus, Gate
from toolkeeper.model.reasons import Reason
from toolkeeper.pipeline.runtime import Runtime
from toolkeeper.pipeline.state import CallState
from toolkeeper.store.records import ApprovalRecord

# Which approval kinds satisfy which gate: an approval also satisfies a confirmation.
SATISFIES = {
    Gate.PREVIEW: frozenset({"preview", "confirm", "approve"}),
    Gate.CONFIRM: frozenset({"confirm", "approve"}),
    Gate.APPROVE: frozenset({"approve"}),
}

Problem = tuple[CallStatus, Reason, str]


def approval_problem(rt: Runtime, st: CallState, rec: ApprovalRecord | None,
                     gate: Gate) -> Problem | None:
    """``None`` if ``rec`` lets this call past ``gate``; else why not."""
    denied = CallStatus.DENIED
    if rec is None or rec.tenant_id != st.tenant_id:
        return denied, Reason.APPROVAL_NOT_FOUND, "no such approval"
    assert st.tool is not None
    if (rec.agent != st.agent or rec.tool != st.tool.definition.name
            or rec.action != st.action or rec.tool_version != st.tool.definition.version
            or rec.bound_digest != st.args_digest):
        return denied, Reason.APPROVAL_MISMATCH, (
            "the approval was given for another call (arguments, action or tool version differ)")
    assert st.profile is not None
    if rec.policy_version != st.profile.version:
        return denied, Reason.APPROVAL_MISMATCH, (
            "the approval was given under another policy (the agent's profile changed since)")
    if rec.kind not in SATISFIES[gate]:
        return denied, Reason.APPROVAL_MISMATCH, f"a {rec.kind} does not satisfy a {gate} gate"
    now = datetime.now(UTC)
    if rec.status is ApprovalStatus.PENDING:
        if rec.expires_at <= now:
            return denied, Reason.APPROVAL_EXPIRED, "the approval expired"
        status = (CallStatus.APPROVAL_REQUIRED if gate is Gate.APPROVE
                  else CallStatus.CONFIRMATION_REQUIRED)
        return status, Reason.APPROVAL_PENDING, "the approval is still pending"
    if rec.status is ApprovalStatus.DENIED:
        return denied, Reason.APPROVAL_DENIED, f"denied by {rec.decided_by}: {rec.note or ''}"
    if rec.status is ApprovalStatus.CONSUMED:
        if _consumed_by_this_key(rt, st, rec):
            return None  # a retry of the very call it was used for: idempotency dedupes
        return denied, Reason.APPROVAL_CONSUMED, "the approval was already used"
    if rec.status is ApprovalStatus.EXPIRED or rec.expires_at <= now:
        return denied, Reason.APPROVAL_EXPIRED, "the approval expired"
    return None


def _consumed_by_this_key(rt: Runtime, st: CallState, rec: ApprovalRecord) -> bool:
    from toolkeeper.pipeline.idempotency import call_key

    key = call_key(st)
    if key is None or rec.consumed_by is None or st.tenant_id is None or st.agent is None:
        return False
    outcome = rt.store.outcomes.by_key(st.tenant_id, st.agent, key)
    return outcome is not None and outcome.call_id == rec.consumed_by


def find_open_approval(rt: Runtime, st: CallState, gate: Gate) -> ApprovalRecord | None:
    """A pending or approved, unexpired approval for exactly this call, if any."""
    assert st.tenant_id is not None and st.agent is not None and st.tool is not None
    now = datetime.now(UTC)
    found = rt.store.approvals.for_call(st.tenant_id, st.agent, st.tool.definition.name,
                                        st.action or "", st.args_digest or "")
    assert st.profile is not None
    usable = [r for r in found if r.kind in SATISFIES[gate] and r.expires_at > now
              and r.tool_version == st.tool.definition.version
              and r.bound_digest == st.args_digest
              and r.policy_version == st.profile.version]
    for rec in usable:  # an approved one wins over a pending one
        if rec.status is ApprovalStatus.APPROVED:
            return rec
    return usable[0] if usable else None
