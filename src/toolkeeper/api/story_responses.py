"""The body of ``GET /calls/{call_id}/story``: a call's whole story in one answer."""

from __future__ import annotations

from typing import Any

from toolkeeper.api.responses import Out
from toolkeeper.model.enums import ApprovalStatus, OutcomeState
from toolkeeper.model.wire import Timestamp


class StoryStepOut(Out):
    """One audit event of a call, as a step of its story."""

    seq: int
    type: str
    ts: Timestamp
    at_ms: float
    """Milliseconds since the call's first event."""
    duration_ms: float | None
    reason: str | None
    gate: str | None
    risk: str | None
    detail: str
    """One sentence for a person, from the event's fields (never the arguments)."""


class StoryGateOut(Out):
    gate: str | None
    risk: str | None
    why: str


class StoryApprovalOut(Out):
    """An approval the call asked for or used: who asked, who decided, with which edits."""

    id: str
    status: ApprovalStatus
    kind: str
    requested_at: Timestamp
    requested_by: str
    """The agent whose call asked for it."""
    decided_by: str | None
    decided_at: Timestamp | None
    waited_ms: float | None
    note: str | None
    edited: bool
    arguments: Any
    """As ``/approvals`` shows them (stored redacted)."""
    edited_arguments: Any
    preview: Any
    """The data of the tool's preview the approver saw, if any."""
    summary: str | None
    call_id: str | None
    """The call that asked for it."""
    consumed_by: str | None
    """The call that ran with it."""


class StoryOutcomeOut(Out):
    state: OutcomeState
    status: str
    reason: str | None
    side_effect: str
    resolved_by: str | None
    created_at: Timestamp
    updated_at: Timestamp


class StoryEffectOut(Out):
    id: str
    policy: str
    status: str
    created_at: Timestamp
    compensation_call_id: str | None
    compensation_status: str | None
    """The status of the compensation call, when one ran."""


class StoryRelatedOut(Out):
    call_id: str
    relation: str
    """``resubmission_of``, ``resubmitted_as``, ``compensation_of`` or ``compensated_by``."""


class CallStoryOut(Out):
    """A call's whole story (``/calls/{call_id}/story``)."""

    call_id: str
    agent: str | None
    tool: str | None
    action: str | None
    tool_version: str | None
    turn_group_id: str | None
    trace_id: str | None
    audit_level: str
    """``steps`` when the call's every step was recorded, else ``decisions``."""
    status: str | None
    reason: str | None
    started_at: Timestamp
    duration_ms: float | None
    steps: list[StoryStepOut]
    gate: StoryGateOut | None
    approvals: list[StoryApprovalOut]
    outcome: StoryOutcomeOut | None
    side_effects: list[StoryEffectOut]
    related: list[StoryRelatedOut]
    truncated: bool = False
    """True when the call had more audit events than a story reads (the first are shown)."""
