"""Audit event types (SPEC §9): one vocabulary for every face."""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    CALL_REQUESTED = "call.requested"
    CALL_RESOLVED = "call.resolved"
    POLICY_DENIED = "policy.denied"
    SCOPE_DENIED = "scope.denied"
    LIMIT_DENIED = "limit.denied"
    BUDGET_WARNING = "budget.warning"
    GATE_ALLOWED = "gate.allowed"
    GATE_REQUIRED = "gate.required"
    PREVIEW_CREATED = "preview.created"
    APPROVAL_CREATED = "approval.created"
    APPROVAL_GRANTED = "approval.granted"
    APPROVAL_DENIED = "approval.denied"
    APPROVAL_CONSUMED = "approval.consumed"
    CALL_DEDUPED = "call.deduped"
    CALL_ATTEMPTED = "call.attempted"
    CALL_SUCCEEDED = "call.succeeded"
    CALL_FAILED = "call.failed"
    CALL_UNKNOWN = "call.unknown"
    CALL_SUPERSEDED = "call.superseded"
    TURN_DECIDED = "turn.decided"
    """An agent's runtime decided what to do about new user messages before an irreversible
    call (seed 004 §10): ``decision`` (supersede, absorb, force_complete, queue), the
    ``turn_group_id``, ``continued_as`` (queue's new turn group) and the planned call."""
    CALL_RESOLVED_MANUALLY = "call.resolved_manually"
    SIDE_EFFECT_RECORDED = "side_effect.recorded"
    SIDE_EFFECT_COMPENSATED = "side_effect.compensated"
    TOOL_HEALTH_CHANGED = "tool.health_changed"
    TOOL_QUARANTINED = "tool.quarantined"
    TOOL_PUBLISHED = "tool.published"
    CONFIG_APPLIED = "config.applied"
    AUDIT_PRUNED = "audit.pruned"
    """Audit retention deleted the start of this chain (``events``, ``through_seq``,
    ``before``): the chain now starts after ``through_seq``."""
    TOKEN_CREATED = "token.created"
    """A token minted straight in the store by an operator holding the database
    (``toolkeeper tokens create --local``): no token authenticated it."""
