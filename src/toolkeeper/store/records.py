"""Rows the store keeps: outcomes, approvals, side effects, audit events, tokens."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolkeeper.model.enums import ApprovalStatus, OutcomeState


@dataclass(slots=True, kw_only=True)
class OutcomeRecord:
    """The durable record of a call under an idempotency key (SPEC §1, §2 step 9)."""

    call_id: str
    tenant_id: str
    agent: str
    key: str
    tool: str
    action: str
    tool_version: str
    args_digest: str
    side_effect: str
    state: OutcomeState
    status: str
    """The call status to report (``succeeded``, ``failed``, ``denied``…)."""
    reason: str | None = None
    result: dict[str, Any] | None = None
    """The final ``CallResult.to_dict()`` (already redacted)."""
    turn_group_id: str | None = None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    stale_after: datetime
    """When an ``in_progress`` record is presumed dead (created + tool timeout + grace)."""
    resolved_by: str | None = None


@dataclass(slots=True, kw_only=True)
class ApprovalRecord:
    """A pending human decision bound to one exact call (SPEC §3)."""

    id: str
    tenant_id: str
    agent: str
    kind: str
    """``approve``, ``confirm`` or ``preview`` (a preview token is an approval of kind preview)."""
    tool: str
    action: str
    tool_version: str
    args_digest: str
    arguments: Any
    """Redacted arguments, for the approver to read."""
    risk: str
    gate: str
    policy_version: str
    status: ApprovalStatus
    created_at: datetime
    expires_at: datetime
    call_id: str | None = None
    """The call that asked for it."""
    decided_by: str | None = None
    decided_by_subject: str | None = None
    """The approver's ``sub`` at their identity provider (a signed-in person, an OAuth
    token); ``None`` for ``tk_…`` tokens."""
    decided_by_issuer: str | None = None
    decided_at: datetime | None = None
    note: str | None = None
    edited_digest: str | None = None
    edited_arguments: Any = None
    consumed_by: str | None = None
    preview: Any = None
    summary: str | None = None

    @property
    def bound_digest(self) -> str:
        """The digest a re-submitted call must match (the edited one, if edited)."""
        return self.edited_digest or self.args_digest


@dataclass(slots=True, kw_only=True)
class SideEffectRecord:
    """An executed non-pure call, for compensation and reporting (SPEC §4)."""

    id: str
    tenant_id: str
    agent: str
    call_id: str
    tool: str
    action: str
    tool_version: str
    policy: str
    arguments: Any
    result: Any
    status: str = "executed"
    turn_group_id: str | None = None
    compensation_call_id: str | None = None
    created_at: datetime


@dataclass(slots=True, kw_only=True)
class AuditDraft:
    """An audit event before it is chained: the store assigns seq, prev_hash and hash."""

    type: str
    tenant_id: str | None
    event_id: str
    ts: datetime
    agent_id: str | None = None
    call_id: str | None = None
    trace_id: str | None = None
    task_id: str | None = None
    step_id: str | None = None
    turn_group_id: str | None = None
    tool: str | None = None
    action: str | None = None
    tool_version: str | None = None
    risk: str | None = None
    gate: str | None = None
    reason: str | None = None
    duration_ms: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class AuditEvent:
    """A chained, stored audit event."""

    seq: int
    event_id: str
    ts: datetime
    type: str
    tenant_id: str | None
    agent_id: str | None
    call_id: str | None
    trace_id: str | None
    task_id: str | None
    step_id: str | None
    turn_group_id: str | None
    tool: str | None
    action: str | None
    tool_version: str | None
    risk: str | None
    gate: str | None
    reason: str | None
    duration_ms: float | None
    data: dict[str, Any]
    prev_hash: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["ts"] = self.ts.isoformat()
        return out


@dataclass(slots=True, kw_only=True)
class TokenRecord:
    id: str
    tenant_id: str
    role: str
    agent: str | None
    label: str
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(slots=True, kw_only=True)
class PruneReport:
    """What audit retention did to one chain."""

    tenant_id: str | None
    deleted: int = 0
    through_seq: int = 0
    """The last deleted event: the chain now starts after it."""
    refused: str | None = None
    """Why the rest of this chain was kept (a head or an event that does not verify)."""


@dataclass(slots=True, kw_only=True)
class VerifyReport:
    """Result of re-computing a tenant's audit chain."""

    tenant_id: str | None
    ok: bool
    events: int
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """What verify could not rule out (e.g. an unkeyed chain); they do not make it fail."""
    first_seq: int = 1
    """The first event kept: audit retention deleted the ones before it (1: none deleted)."""
